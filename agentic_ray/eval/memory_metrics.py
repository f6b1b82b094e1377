"""Memory metrics over episodes' key facts (:class:`~agentic_ray.memory.memory_episode.MemoryEpisode`).

* **Entity Recall@k** (seed 000: @5, bar ≥ 0.95): the share of customer-mentioned key facts the agent reuses
  correctly (its value in the fact's slot) within ``k`` turns of first needing them.
* **Forgetting** (seed 000: ≤ 0.05): the share of facts given earlier that the agent asks for again, or uses
  with a wrong value, after the customer gave them.

Both pool facts over episodes (micro average) and are ``None`` when no episode carries a key fact. A memory note of a
fact (a ``write`` event) is neither a reuse nor a wrong use: what counts is the call that needs it.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentic_ray.memory.memory_episode import KeyFact, MemoryEpisode


def recalled_within(episode: MemoryEpisode, fact: KeyFact, k: int = 5) -> bool:
    """Whether the agent put the fact's value into its slot at some turn in ``[needed_turn, needed_turn + k]``."""
    return any(
        e.value == fact.value and fact.needed_turn <= e.turn <= fact.needed_turn + k
        for e in episode.after(fact, "use")
    )


def forgot(episode: MemoryEpisode, fact: KeyFact) -> bool:
    """Whether, after the fact was given, the agent asked for it again or used a wrong value in its slot."""
    return bool(episode.after(fact, "ask")) or any(e.value != fact.value for e in episode.after(fact, "use"))


def entity_recall_at_k(episodes: Iterable[MemoryEpisode], k: int = 5) -> float | None:
    """Entity Recall@k over all key facts of ``episodes``; None without any."""
    hits = [recalled_within(ep, f, k) for ep in episodes for f in ep.facts]
    return sum(hits) / len(hits) if hits else None


def forgetting(episodes: Iterable[MemoryEpisode]) -> float | None:
    """Forgetting rate over all key facts of ``episodes``; None without any."""
    lost = [forgot(ep, f) for ep in episodes for f in ep.facts]
    return sum(lost) / len(lost) if lost else None
