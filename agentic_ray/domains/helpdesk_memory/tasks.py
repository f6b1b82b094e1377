"""Help-desk tasks where memory matters: the caller refers to what they told the help desk in an earlier call.

``asset_recall``: "How many days of warranty are left on the laptop that kept overheating? I called about it last
time." The caller holds two or three assets of that kind (distractors a listing cannot tell apart); each was the
subject of an earlier conversation about a different problem, and only the one about the problem the caller names
now is recent. The earlier conversations sit in long-term memory, in the caller's namespace; a colleague's
look-alike memory (the same problem, the colleague's own asset) sits in another namespace. A ``memory.search``
with the caller's words (request fact ``recall``) reveals the caller's remembered assets with their
``memory_score`` and ``memory_age_h``; the right one is the best hit. The goals are the warranty inquiry's: read
the asset, then answer with its warranty days. Once the search has said which asset is meant, the agent writes that
to memory (``memory.write``: the caller's words, the asset), so the next conversation finds it fresh.

The key fact (what the caller means) is the task's ``key_facts`` entry, for the memory reward and metrics: slot
``asset_id``, the meant asset, stated before this conversation (turn 0), first needed by the asset read (turn 3 of
the optimal plan: identify, recall, write, read), last confirmed when that earlier conversation took place
(negative hours: before this one started).

Validation seeds are a fixed range disjoint from training (the help desk's convention).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from agentic_ray.domains.helpdesk.tasks import warranty_goals
from agentic_ray.domains.helpdesk.world import make_world
from agentic_ray.domains.helpdesk_memory.world import HelpdeskMemoryWorld
from agentic_ray.domains.protocol import Request, Task

FAMILIES: tuple[str, ...] = ("asset_recall",)
VALIDATION_SEED_BASE = 1_000_000_000
"""Task seeds at or above this value are reserved for validation; training draws below it."""

RECALL_FACT = "recall"
"""Request fact holding the caller's words about what they mean (a memory search's query)."""

ISSUES: tuple[tuple[str, str], ...] = (
    # (what the caller said in the earlier call, how they refer to it now)
    ("My {kind} keeps overheating and shuts itself down.", "the {kind} that kept overheating"),
    ("The screen of my {kind} cracked when I dropped it.", "the {kind} with the cracked screen"),
    ("The battery of my {kind} is empty after an hour.", "the {kind} whose battery ran down so fast"),
    ("My {kind} will not connect to the office wifi.", "the {kind} that could not get on the wifi"),
    ("My {kind} makes a loud grinding noise from the fan.", "the {kind} with the noisy fan"),
)
KINDS: tuple[str, ...] = ("laptop", "phone")
"""Kinds of asset a caller may hold several of."""
RECENT_H = (2.0, 20.0)
"""Hours before this conversation that the meant asset was last talked about."""
OLDER_H = (100.0, 600.0)
"""Hours before this conversation of the other conversations (older distractors)."""


def generate_task(family: str, seed: int) -> tuple[HelpdeskMemoryWorld, Task]:
    """Draw the world (with its memory) and the task of ``(family, seed)``."""
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng([seed, 7_000 + FAMILIES.index(family)])
    base = make_world(rng)
    r = random.Random(int(rng.integers(1 << 62)))
    e, colleague = base.employees[0], base.employees[1]
    w = HelpdeskMemoryWorld(
        base.employees,
        base.tickets,
        base.assets,
        base.tool_health,
        customer=e.id,
        conversation=f"{family}/{seed}",
    )
    kind = r.choice(KINDS)
    mine = [a for a in w.assets if a.owner_id == e.id]
    same = mine[: min(len(mine), r.choice((2, 3)))]
    for a in same:
        a.kind = kind
    target = same[r.randrange(len(same))]
    issues = r.sample(ISSUES, len(same))
    at_target = -round(r.uniform(*RECENT_H), 2)
    for i, (a, (said, _)) in enumerate(zip(same, issues, strict=True)):
        at = at_target if a is target else -round(r.uniform(*OLDER_H), 2)
        w.history.append(_memory(e.id, f"{family}/{seed}/earlier-{i}", said.format(kind=kind), a.id, at))
    said, refer = issues[same.index(target)]
    theirs = next(a for a in w.assets if a.owner_id == colleague.id)
    w.history.append(
        _memory(colleague.id, f"{family}/{seed}/other", said.format(kind=kind), theirs.id, at_target)
    )
    recall = refer.format(kind=kind)
    goals = warranty_goals(target)
    facts = {"email": e.email} if r.random() < 0.7 else {"badge": e.badge}
    fact = {
        "slot": "asset_id",
        "value": target.id,
        "stated_turn": 0,
        "needed_turn": 3,
        "confirmed_at_h": at_target,
    }
    task = Task(
        family=family,
        seed=int(seed),
        request=Request(
            text=f"How many days of warranty are left on {recall}? I called about it last time.",
            facts={**facts, RECALL_FACT: recall},
        ),
        goals=tuple(goals),
        optimal_steps=5,  # identify, recall, write, read, answer
        relevant=(e.id, target.id),
        extra={"lookups": [("memory.search", e.id)]},
        key_facts=(fact,),
    )
    return w, task


def _memory(customer: str, episode: str, text: str, asset_id: str, at_h: float) -> dict[str, Any]:
    return {
        "customer": customer,
        "episode": episode,
        "text": text,
        "entities": [{"id": asset_id, "node_type": "asset"}],
        "at_h": at_h,
        "turn": 0,
    }


def validation_seeds(family: str, n: int = 25) -> list[int]:
    """The fixed validation seeds of one family (disjoint from any training seed)."""
    return [VALIDATION_SEED_BASE + FAMILIES.index(family) * 100_000 + i for i in range(n)]


def draw_training_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, VALIDATION_SEED_BASE))


def sentences() -> list[str]:
    """Every sentence the families write to memory or search it with."""
    return [x.format(kind=k) for k in KINDS for pair in ISSUES for x in pair]


if __name__ == "__main__":  # rebuild the shipped vectors of these sentences
    from agentic_ray.domains.helpdesk_memory.world import VECTORS, build_vectors

    build_vectors(sentences())
    print(f"wrote {VECTORS}")
