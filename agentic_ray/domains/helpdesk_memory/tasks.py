"""Help-desk tasks where memory matters: the caller refers to what they told the help desk in an earlier call, or
earlier in this one.

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

``ticket_said_earlier``: "My tickets T1, T2 and T3 are still open; T2 is the one about the laptop that kept
overheating. First, my phone and my headset were stolen: please lock them. I am also locked out: reset my password.
After that, raise the ticket about the laptop that kept overheating to high." The caller names two or three of
their tickets, alike in everything a lookup shows (one category, all about the same laptop, none already at the
asked priority, named in random order), and says which one they mean. The read and the priority change depend on
the other requests (two or three stolen devices to lock after a listing, a password reset), so they come 8 to 9
turns later, and the task's short-term window (:data:`~agentic_ray.memory.short_term_window.DEFAULT_K` = 6 turns,
``Task.short_term_window``) has dropped the request by then: the named tickets stay known, but nothing in the
observation says which one is meant any more. Only memory does, if the agent wrote it while the request named it:
``memory.write`` of the caller's words with a pointer to the ticket, then ``memory.search`` with the same words
when it is needed (the note is the best and freshest hit). Long-term memory holds distractors: earlier calls about
the other named tickets, an older resolved ticket about the same problem (same words as the meant one's), and a
colleague's ticket filed under exactly the caller's words (another namespace). The key fact: slot ``ticket_id``,
stated at turn 0, needed by the read (turn 8 or 9 of the optimal plan: identify, write, list the assets, lock each
stolen device, verify, reset, recall, read, set the priority), confirmed at the start of this conversation.

Validation seeds are a fixed range disjoint from training (the help desk's convention).
"""

from __future__ import annotations

import random

import numpy as np

from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.helpdesk.tasks import password_reset_goals, warranty_goals
from agentic_ray.domains.helpdesk.world import ASSET_KINDS, Asset, add_ticket, make_world
from agentic_ray.domains.helpdesk_memory.world import HelpdeskMemoryWorld
from agentic_ray.domains.protocol import EntityRef, Request, Task
from agentic_ray.memory.memory_world import earlier_memories, key_fact, memory_record
from agentic_ray.memory.short_term_window import DEFAULT_K

FAMILIES: tuple[str, ...] = ("asset_recall", "ticket_said_earlier")

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
    w = HelpdeskMemoryWorld(
        base.employees,
        base.tickets,
        base.assets,
        base.tool_health,
        customer=base.employees[0].id,
        conversation=f"{family}/{seed}",
    )
    make = _asset_recall if family == "asset_recall" else _ticket_said_earlier
    return w, make(w, r, family, int(seed))


def _asset_recall(w: HelpdeskMemoryWorld, r: random.Random, family: str, seed: int) -> Task:
    e, colleague = w.employees[0], w.employees[1]
    kind = r.choice(KINDS)
    mine = [a for a in w.assets if a.owner_id == e.id]
    same = mine[: min(len(mine), r.choice((2, 3)))]
    for a in same:
        a.kind = kind
    target = same[r.randrange(len(same))]
    issues = r.sample(ISSUES, len(same))
    at_target = -round(r.uniform(*RECENT_H), 2)
    said_then = [(a.id, said.format(kind=kind)) for a, (said, _) in zip(same, issues, strict=True)]
    w.history += earlier_memories(
        e.id, f"{family}/{seed}/earlier", "asset", said_then, r, OLDER_H, {target.id: at_target}
    )
    said, refer = issues[same.index(target)]
    theirs = next(a for a in w.assets if a.owner_id == colleague.id)
    w.history.append(
        memory_record(
            colleague.id, f"{family}/{seed}/other", said.format(kind=kind), "asset", theirs.id, at_target
        )
    )
    recall = refer.format(kind=kind)
    goals = warranty_goals(target)
    facts = {"email": e.email} if r.random() < 0.7 else {"badge": e.badge}
    fact = key_fact("asset_id", target.id, 3, at_target)
    return Task(
        family=family,
        seed=seed,
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


def _ticket_said_earlier(w: HelpdeskMemoryWorld, r: random.Random, family: str, seed: int) -> Task:
    e, colleague = w.employees[0], w.employees[1]
    kind = r.choice(KINDS)
    n_lost = r.choice((2, 3))
    mine = [a for a in w.assets if a.owner_id == e.id]
    taken = {a.id for a in w.assets}
    while len(mine) < 1 + n_lost:  # the caller holds the subject of the tickets and the stolen devices
        aid = f"A{r.randint(10_000, 99_999)}"
        if aid not in taken:
            taken.add(aid)
            mine.append(
                Asset(aid, e.id, "headset", "in_use", r.randint(0, 1095), round(r.uniform(60, 400), 2))
            )
            w.assets.append(mine[-1])
    subject, lost = mine[0], mine[1 : 1 + n_lost]
    # distinct kinds, so that each stolen device is the caller's only one of its kind (the goal's hint)
    for a, k in zip(
        mine, [kind, *r.sample([k for k in ASSET_KINDS if k != kind], len(mine) - 1)], strict=True
    ):
        a.kind, a.status = k, "in_use"
    # the tickets the caller names: one problem each, all about the subject, alike in what a lookup shows
    n_named = r.choice((2, 3))
    issues = r.sample(ISSUES, n_named)
    cat, target_priority = "hardware", r.choice(("high", "critical"))
    named = [add_ticket(w, r, e.id, cat) for _ in range(n_named)]
    for t in named:
        t.asset_id = subject.id
        t.priority = r.choice([p for p in ("low", "medium") if p != target_priority])
    meant = r.randrange(n_named)
    ticket = named[meant]
    said, refer = issues[meant]
    recall = refer.format(kind=kind)
    # long-term memory: earlier calls about the other named tickets, an older resolved ticket about the same
    # problem, and a colleague's ticket filed under the very words the caller uses now (another namespace)
    said_then = [(t.id, other.format(kind=kind)) for t, (other, _) in zip(named, issues, strict=True)]
    w.history += earlier_memories(
        e.id, f"{family}/{seed}/earlier", "ticket", said_then, r, OLDER_H, {ticket.id: None}
    )
    old = add_ticket(w, r, e.id, cat, status="resolved")
    old.asset_id, old.age_hours = subject.id, 700.0
    at_old = -round(r.uniform(*OLDER_H), 2)
    w.history.append(
        memory_record(e.id, f"{family}/{seed}/resolved", said.format(kind=kind), "ticket", old.id, at_old)
    )
    theirs = next(t for t in w.tickets if t.reporter_id == colleague.id)
    w.history.append(memory_record(colleague.id, f"{family}/{seed}/other", recall, "ticket", theirs.id, -1.0))
    order = r.sample(named, n_named)  # the order the caller names them in says nothing
    reset, where = password_reset_goals(e, r)
    reports = [
        Goal(
            f"report_{i}",
            "asset.report_lost",
            {"asset_id": a.id},
            priority=2,
            hints={"kind": a.kind},
            description="lock a stolen device",
        )
        for i, a in enumerate(lost)
    ]
    before = tuple(g.id for g in (*reset, *reports))
    hint = {"category": cat}
    goals = [
        *reset,
        *reports,
        Goal("read", "ticket.get", {"ticket_id": ticket.id}, deps=before, hints=hint, description="read it"),
        Goal(
            "priority",
            "ticket.set_priority",
            {"ticket_id": ticket.id, "priority": target_priority},
            deps=("read",),
            hints=hint,
            description=f"mark it {target_priority}",
        ),
    ]
    # identify, write, list the assets, lock each stolen one, verify, reset, recall, read, set the priority
    optimal = 1 + 1 + 1 + n_lost + 2 + 1 + 2
    facts = {"email": e.email} if r.random() < 0.7 else {"badge": e.badge}
    devices = " and my ".join(a.kind for a in lost)
    ids = ", ".join(t.id for t in order[:-1]) + f" and {order[-1].id}"
    text = (
        f"My tickets {ids} are still open; {ticket.id} is the one about {recall}. First, my {devices} were "
        f"stolen last night: please lock them. I am also locked out: reset my password and send the new one {where}. "
        f"After that, raise the ticket about {recall} to {target_priority}."
    )
    fact = key_fact("ticket_id", ticket.id, optimal - 2, 0.0)  # needed by the read
    return Task(
        family=family,
        seed=seed,
        request=Request(
            text=text,
            facts={**facts, RECALL_FACT: recall},
            mentioned=tuple(EntityRef("ticket", t.id) for t in order),
        ),
        goals=tuple(goals),
        optimal_steps=optimal,
        relevant=(e.id, ticket.id, *(a.id for a in lost)),
        extra={"lookups": [("get_assets_for_employee", e.id), ("memory.search", e.id)]},
        key_facts=(fact,),
        short_term_window=DEFAULT_K,
    )


def sentences() -> list[str]:
    """Every sentence the families write to memory or search it with."""
    return [x.format(kind=k) for k in KINDS for pair in ISSUES for x in pair]
