"""Seeded help-desk task families: each a goal DAG over a world edited so that the caller's story is true.

``generate_task(family, seed, handler)`` draws a world (:func:`make_world`), edits it (a locked account, a
disabled one, a stolen laptop with its ticket, duplicate tickets about one problem...) and returns the
:class:`~agentic_ray.domains.protocol.Task`. The caller is identified by email or badge through a lookup; assets
and tickets the request does not name come from ``get_assets_for_employee`` / ``ticket.search``. How a task ends
is the family's:

* ``password_reset``: goals (verify, then reset);
* ``disabled_account`` and ``lost_device``: a tier-2 escalation is the right end (in the other families it is an
  explicit failure, because goals are still pending);
* ``warranty_inquiry``: an answer that tells the caller a number the asset registry revealed;
* ``merge_duplicates``: ``end="world_state"``; the final world's :func:`state_hash` must equal the one the gold
  actions produce, computed here by running the gold calls on a copy of the initial world.

Validation tasks use a fixed, disjoint seed range (:func:`validation_seeds`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.draws import bits62
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.helpdesk.world import (
    OPEN_STATUSES,
    TICKET_CATEGORIES,
    HelpdeskWorld,
    add_ticket,
    make_world,
    state_hash,
)
from agentic_ray.domains.protocol import EntityRef, Request, Task

FAMILIES: tuple[str, ...] = (
    "password_reset",
    "disabled_account",
    "lost_device",
    "warranty_inquiry",
    "merge_duplicates",
)
VALIDATION_SEED_BASE = 1_000_000_000
"""Task seeds at or above this value are reserved for validation; training draws below it."""

ENTITY_ARGS = frozenset({"employee_id", "ticket_id", "asset_id", "duplicates"})
Handler = Callable[[Any, dict[str, Any]], dict[str, Any]]


@dataclass
class _Ctx:
    world: HelpdeskWorld
    r: random.Random
    lookups: set[tuple[str, str]] = field(default_factory=set)  # (skill, employee) lookups the plan needs
    mentioned: list[EntityRef] = field(default_factory=list)
    end: str = "goals"
    open_args: dict[str, dict[str, Any]] = field(default_factory=dict)


def _password_reset(c: _Ctx) -> tuple[list[Goal], str]:
    goals, where = password_reset_goals(c.world.caller, c.r)
    return goals, f"I am locked out of my account. Please reset my password and send the new one {where}."


def password_reset_goals(e: Any, r: random.Random) -> tuple[list[Goal], str]:
    """Lock caller ``e`` out (or not) and return the goals verify, then reset, and where the caller wants the new
    password sent, as words ("by SMS", "to my manager")."""
    e.status = "locked" if r.random() < 0.7 else "active"
    method = "mfa_push" if e.mfa_enrolled else "manager_callback"
    delivery = r.choice(("sms", "manager_email"))
    goals = [
        Goal(
            "verify",
            "account.verify_identity",
            {"employee_id": e.id, "method": method},
            hidden_args=("method",),  # follows from the caller's MFA enrolment, which a lookup reveals
            description="verify",
        ),
        Goal(
            "reset",
            "reset_password",
            {"employee_id": e.id, "delivery": delivery},
            deps=("verify",),
            priority=2,
            description="reset the password",
        ),
    ]
    return goals, "by SMS" if delivery == "sms" else "to my manager"


def _disabled_account(c: _Ctx) -> tuple[list[Goal], str]:
    e = c.world.caller
    e.status = "disabled"
    goals = [
        Goal(
            "escalate",
            "escalate_to_tier2",
            {"employee_id": e.id, "reason": "account_disabled"},
            priority=3,
            description="only tier 2 re-enables a disabled account",
        )
    ]
    return goals, "I cannot sign in to anything since this morning. Can you reset my password?"


def _caller_asset(c: _Ctx, kinds: tuple[str, ...] | None = None) -> tuple[Any, str]:
    mine = [a for a in c.world.assets if a.owner_id == c.world.caller.id]
    pick = [a for a in mine if kinds is None or a.kind in kinds] or mine[:1]
    a = pick[c.r.randrange(len(pick))]
    # The caller holds none of these kinds: this asset becomes one.
    if kinds is not None and a.kind not in kinds:
        a.kind = next(k for k in kinds if k not in {m.kind for m in mine})
    c.lookups.add(("get_assets_for_employee", c.world.caller.id))
    return a, a.kind


def _lost_device(c: _Ctx) -> tuple[list[Goal], str]:
    e = c.world.caller
    a, kind = _caller_asset(c, ("laptop", "phone"))
    t = add_ticket(c.world, c.r, e.id, "hardware")
    t.asset_id, t.priority = a.id, "high"
    c.mentioned.append(EntityRef("ticket", t.id))
    goals = [
        Goal(
            "report",
            "asset.report_lost",
            {"asset_id": a.id},
            priority=2,
            hints={"kind": kind},
            description="lock it",
        ),
        Goal(
            "escalate",
            "escalate_to_tier2",
            {"employee_id": e.id, "ticket_id": t.id, "reason": "security"},
            deps=("report",),
            description="a theft goes to security (tier 2)",
        ),
    ]
    return goals, f"My {kind} was stolen from my car last night. I opened ticket {t.id} about it."


def warranty_goals(a: Any) -> list[Goal]:
    """Read asset ``a`` in the registry, then tell the caller its warranty days left (the hint: its kind)."""
    hint = {"kind": a.kind}
    return [
        Goal("read", "asset.get", {"asset_id": a.id}, hints=hint, description="read the registry"),
        Goal(
            "answer",
            "answer_warranty",
            {"asset_id": a.id},
            numeric={"days": float(a.warranty_days_left)},
            deps=("read",),
            tolerance=0.0,
            hints=hint,
            description="tell the caller the warranty days left",
        ),
    ]


def _warranty_inquiry(c: _Ctx) -> tuple[list[Goal], str]:
    a, kind = _caller_asset(c)
    return warranty_goals(a), f"How many days of warranty are left on my {kind}?"


def _merge_duplicates(c: _Ctx) -> tuple[list[Goal], str]:
    w, r, e = c.world, c.r, c.world.caller
    cat = r.choice(TICKET_CATEGORIES)
    for t in w.tickets:  # the caller's other tickets are about other things
        if t.reporter_id == e.id and t.category == cat:
            t.category = r.choice([x for x in TICKET_CATEGORIES if x != cat])
    same = [add_ticket(w, r, e.id, cat) for _ in range(r.randint(2, 4))]
    if r.random() < 0.5:  # an older, already resolved ticket about the same thing is not a duplicate
        add_ticket(w, r, e.id, cat, status="resolved").age_hours = 500.0
    r.shuffle(w.tickets)
    primary = max(same, key=lambda t: t.age_hours)
    dups = sorted(t.id for t in same if t is not primary)
    target = r.choice(("high", "critical"))
    if primary.priority == target:
        primary.priority = "medium"
    hint = {"category": cat}
    c.lookups.add(("ticket.search", e.id))
    c.end = "world_state"
    c.open_args["merge"] = {"ticket_id": primary.id}
    goals = [
        Goal(
            "read", "ticket.get", {"ticket_id": primary.id}, hints=hint, description="read the oldest ticket"
        ),
        Goal(  # the primary is left open: the final world state judges it (see OPEN_ARGS)
            "merge",
            "ticket.merge",
            {"duplicates": dups},
            deps=("read",),
            priority=2,
            hints=hint,
            description="merge the duplicates into it",
        ),
        Goal(
            "priority",
            "ticket.set_priority",
            {"ticket_id": primary.id, "priority": target},
            deps=("merge",),
            description=f"mark it {target}",
        ),
    ]
    text = f"I opened several tickets about the same {cat} problem. Merge them into the oldest one and make it {target}."
    return goals, text


SIMPLE: dict[str, Callable[[_Ctx], tuple[list[Goal], str]]] = {
    "password_reset": _password_reset,
    "disabled_account": _disabled_account,
    "lost_device": _lost_device,
    "warranty_inquiry": _warranty_inquiry,
    "merge_duplicates": _merge_duplicates,
}


OPEN_ARGS = "open_args"
"""``Task.extra`` key: goal id -> arguments the goal leaves open for the final-state check to judge. A merge goal
names only its duplicates: its primary is a pointer of the same node type, and goal -> entity edges (and prototype
grounding) cannot tell a pointer's target from a list member's, so naming both would put the primary in the list."""


def gold_call(task: Task, g: Goal) -> dict[str, Any]:
    """The parameters of the gold call of goal ``g``."""
    return {**g.args, **g.numeric, **task.extra.get(OPEN_ARGS, {}).get(g.id, {})}


def gold_state(world: HelpdeskWorld, task: Task, handler: Callable[[str], Handler]) -> str:
    """:func:`state_hash` of the world the gold calls (the goals, in order) produce from a copy of ``world``."""
    w = world.copy_entities()
    for g in task.goals:
        handler(g.skill)(w, gold_call(task, g))
    return state_hash(w)


def generate_task(family: str, seed: int, handler: Callable[[str], Handler]) -> tuple[HelpdeskWorld, Task]:
    """Draw the world and task of ``(family, seed)``; ``handler(skill)`` is the skill's tool handler."""
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng([seed, FAMILIES.index(family)])
    world = make_world(rng)
    c = _Ctx(world, random.Random(bits62(rng)))  # = rng.integers(1 << 62)
    goals, text = SIMPLE[family](c)
    e = world.caller
    facts = {"email": e.email} if c.r.random() < 0.7 else {"badge": e.badge}
    args = [v for g in goals for k, v in g.args.items() if k in ENTITY_ARGS]
    relevant = (
        [e.id]
        + [m.id for m in c.mentioned]
        + [str(x) for v in args for x in (v if isinstance(v, list) else [v])]
    )
    extra: dict[str, Any] = {"lookups": sorted(c.lookups), OPEN_ARGS: c.open_args}
    task = Task(
        family=family,
        seed=int(seed),
        request=Request(text=text, facts=facts, mentioned=tuple(c.mentioned)),
        goals=tuple(goals),
        optimal_steps=1 + len(c.lookups) + len(goals),  # identify + list lookups + one call per goal
        relevant=tuple(dict.fromkeys(relevant)),
        end="world_state" if c.end == "world_state" else "goals",
        extra=extra,
    )
    if task.end == "world_state":
        extra["gold_state"] = gold_state(world, task, handler)
    return world, task


def validation_seeds(family: str, n: int = 25) -> list[int]:
    """The fixed validation seeds of one family (disjoint from any training seed)."""
    return [VALIDATION_SEED_BASE + FAMILIES.index(family) * 100_000 + i for i in range(n)]


def draw_training_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, VALIDATION_SEED_BASE))


def goal_feasible(world: HelpdeskWorld, task: Task, goal: Goal) -> bool:
    """Whether a pending goal can still be satisfied from this world state (False = unrecoverable)."""
    a = gold_call(task, goal)
    if goal.skill in ("account.verify_identity", "reset_password"):
        e = world.employee(a["employee_id"])
        return e is not None and e.status != "disabled" and (a.get("method") != "mfa_push" or e.mfa_enrolled)
    if goal.skill == "asset.report_lost":
        x = world.asset(a["asset_id"])
        return x is not None and x.status == "in_use"
    if goal.skill in ("ticket.merge", "ticket.set_priority"):
        ts = [world.ticket(t) for t in [a["ticket_id"], *a.get("duplicates", [])]]
        return all(t is not None and t.status in OPEN_STATUSES for t in ts)
    return True
