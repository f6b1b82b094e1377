"""Pure memory maths: freshness of a remembered fact, and the L4 memory credit of one fact.

Seed 000's memory layer scores entity recall and freshness: full credit within 24 h of simulated time since the
fact was last confirmed, none after 72 h, linear in between.
"""

from __future__ import annotations

import numpy as np

from agentic_ray.memory.memory_episode import KeyFact, MemoryEpisode

FULL_CREDIT_H = 24.0
NO_CREDIT_H = 72.0


def freshness(
    age_h: np.ndarray | float, full_h: float = FULL_CREDIT_H, zero_h: float = NO_CREDIT_H
) -> np.ndarray:
    """Freshness of facts last confirmed ``age_h`` hours ago.

    Args:
        age_h: ages in hours, any shape (a negative age, a confirmation after the use, counts as fresh).
        full_h: full credit up to this age.
        zero_h: no credit from this age on (> ``full_h``).

    Returns:
        float64 array of ``age_h``'s shape, in [0, 1]: 1 for ``age <= full_h``, 0 for ``age >= zero_h``, linear
        between.
    """
    if not zero_h > full_h:
        raise ValueError(f"zero_h {zero_h} must exceed full_h {full_h}")
    age = np.asarray(age_h, dtype=np.float64)
    return np.clip((zero_h - age) / (zero_h - full_h), 0.0, 1.0)


def fact_credit(episode: MemoryEpisode, fact: KeyFact, recall_weight: float = 0.5) -> tuple[float, int]:
    """The L4 credit of one key fact and the turn it belongs to.

    The agent's first use of the fact's slot after it was stated decides. A memory note of it is no use, nor is a
    use about another entity than the fact and its look-alikes
    (:attr:`~agentic_ray.memory.memory_episode.KeyFact.distractors`). A correct value earns ``recall_weight`` for
    recall plus ``(1 - recall_weight) * freshness(use time - last confirmation)``; a wrong value, an ask before any
    use (the customer repeats themselves) or no use at all earns 0.

    Returns:
        ``(credit in [0, 1], turn)``: the turn of the deciding event, or ``needed_turn`` when there was none.
    """
    events = sorted(
        (
            e
            for e in episode.events
            if e.slot == fact.slot
            and e.turn > fact.stated_turn
            and e.kind != "write"
            and fact.concerns(e.value)
        ),
        key=lambda e: (e.turn, e.kind != "ask"),
    )
    if not events:
        return 0.0, fact.needed_turn
    first = events[0]
    if first.kind != "use" or first.value != fact.value:
        return 0.0, first.turn
    fresh = float(freshness(first.at_h - fact.confirmed_at_h))
    return recall_weight + (1.0 - recall_weight) * fresh, first.turn


def memory_step_credit(episode: MemoryEpisode, num_steps: int, recall_weight: float = 0.5) -> np.ndarray:
    """Per-step L4 memory reward: each key fact's credit divided by the number of facts, on its turn.

    Args:
        episode: the key facts and the agent's events.
        num_steps: T, the episode's steps; a turn past the end lands on the last step.
        recall_weight: share of a fact's credit given for a correct reuse (the rest scales with freshness).

    Returns:
        float32 ``(T,)``; its sum is the mean fact credit, in [0, 1] (0 everywhere without key facts).
    """
    if not 0.0 <= recall_weight <= 1.0:
        raise ValueError(f"recall_weight {recall_weight} outside [0, 1]")
    out = np.zeros(num_steps, dtype=np.float64)
    if num_steps == 0 or not episode.facts:
        return out.astype(np.float32)
    n = len(episode.facts)
    for fact in episode.facts:
        credit, turn = fact_credit(episode, fact, recall_weight)
        out[min(turn, num_steps - 1)] += credit / n
    return out.astype(np.float32)
