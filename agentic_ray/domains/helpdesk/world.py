"""The simulated IT help desk: the caller, a colleague, their tickets and assets, and tool health.

The agent sees none of this directly: it identifies the caller (by email or badge), then learns tickets and
assets through lookups (``ticket.search``, ``ticket.get``, ``get_assets_for_employee``, ``asset.get``).
:func:`entity_fields` is the ground truth a full lookup would reveal now; :func:`state_hash` digests the part of
the world that ``end: world_state`` tasks are judged on.

Everything is a plain dataclass with a JSON-safe ``to_dict()`` / ``from_dict()``, so a world can travel to an HTTP
skill server and back.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from agentic_ray.domains.draws import bits62
from agentic_ray.domains.tool_health import (
    DriftingToolHealth,
    ToolHealth,
    drift_tool_health,
    drifting_tool_health,
)

DEPARTMENTS: tuple[str, ...] = ("engineering", "sales", "finance", "operations")
ACCOUNT_STATUSES: tuple[str, ...] = ("active", "locked", "disabled")
TICKET_CATEGORIES: tuple[str, ...] = ("access", "hardware", "software", "network")
TICKET_STATUSES: tuple[str, ...] = ("open", "in_progress", "resolved", "merged")
PRIORITIES: tuple[str, ...] = ("low", "medium", "high", "critical")
ASSET_KINDS: tuple[str, ...] = ("laptop", "phone", "monitor", "headset")
ASSET_STATUSES: tuple[str, ...] = ("in_use", "lost", "repair")
OPEN_STATUSES = frozenset({"open", "in_progress"})
NAMES: tuple[str, ...] = ("Ana Silva", "Ben Okafor", "Chloe Martin", "Dev Patel", "Eva Novak", "Femi Adeyemi")


@dataclass
class Employee:
    id: str
    name: str
    email: str
    badge: str
    dept: str  # one of DEPARTMENTS
    status: str  # one of ACCOUNT_STATUSES
    mfa_enrolled: bool
    tenure_years: float
    verified: bool = False  # identity verified in this session
    password_resets: int = 0


@dataclass
class Ticket:
    id: str
    reporter_id: str
    category: str  # one of TICKET_CATEGORIES
    status: str  # one of TICKET_STATUSES
    priority: str  # one of PRIORITIES
    age_hours: float
    asset_id: str = ""  # the asset the ticket is about, "" for none
    merged_into: str = ""


@dataclass
class Asset:
    id: str
    owner_id: str
    kind: str  # one of ASSET_KINDS
    status: str  # one of ASSET_STATUSES
    warranty_days_left: int
    cost: float


@dataclass
class Session:
    counter: int = 0  # id generator for escalations
    answers: list[dict[str, Any]] = field(default_factory=list)
    escalation: dict[str, Any] | None = None


@dataclass
class HelpdeskWorld:
    """The caller (``employees[0]``), a colleague, their tickets and assets, tool health and the session."""

    employees: list[Employee]
    tickets: list[Ticket]
    assets: list[Asset]
    tool_health: Mapping[str, ToolHealth]  # a DriftingToolHealth: drifted when read
    session: Session = field(default_factory=Session)
    tick: int = 0

    @property
    def caller(self) -> Employee:
        return self.employees[0]

    def employee(self, eid: str) -> Employee | None:
        return next((e for e in self.employees if e.id == eid), None)

    def ticket(self, tid: str) -> Ticket | None:
        return next((t for t in self.tickets if t.id == tid), None)

    def asset(self, aid: str) -> Asset | None:
        return next((a for a in self.assets if a.id == aid), None)

    def next_id(self, prefix: str) -> str:
        self.session.counter += 1
        return f"{prefix}-{self.tick:04d}-{self.session.counter:03d}"

    def drift(self, rng: np.random.Generator) -> None:
        """One tick: tool health wanders and reverts to its base (nothing a lookup reveals changes)."""
        self.tick += 1
        drift_tool_health(self.tool_health, rng)

    def copy_entities(self) -> HelpdeskWorld:
        """A copy of the employees, tickets and assets (fresh session, no tool health): what the gold calls of a
        task need. Every field is a scalar, so ``replace`` copies fully; ``deepcopy`` of a world took ~2 ms."""
        return HelpdeskWorld(
            [replace(e) for e in self.employees],
            [replace(t) for t in self.tickets],
            [replace(a) for a in self.assets],
            {},
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(replace(self, tool_health=dict(self.tool_health)))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HelpdeskWorld:
        return cls(
            employees=[Employee(**e) for e in d["employees"]],
            tickets=[Ticket(**t) for t in d["tickets"]],
            assets=[Asset(**a) for a in d["assets"]],
            tool_health=DriftingToolHealth({k: ToolHealth(**v) for k, v in d["tool_health"].items()}),
            session=Session(**d.get("session", {})),
            tick=int(d.get("tick", 0)),
        )


BASE_TOOL_HEALTH: dict[str, tuple[float, float, float]] = {
    # skill: (mean latency ms, std ms, failure rate)
    "lookup_employee_by_email": (40.0, 12.0, 0.003),
    "lookup_employee_by_badge": (55.0, 15.0, 0.003),
    "ticket.search": (80.0, 25.0, 0.005),
    "ticket.get": (30.0, 10.0, 0.002),
    "get_assets_for_employee": (120.0, 40.0, 0.01),
    "asset.get": (60.0, 20.0, 0.01),
    "account.verify_identity": (300.0, 120.0, 0.01),
    "reset_password": (150.0, 50.0, 0.005),
    "asset.report_lost": (200.0, 60.0, 0.01),
    "ticket.merge": (90.0, 30.0, 0.005),
    "ticket.set_priority": (40.0, 12.0, 0.002),
    "answer_warranty": (5.0, 2.0, 0.0),
    "escalate_to_tier2": (400.0, 150.0, 0.0),
}


def _employee(r: random.Random, eid: str, name: str) -> Employee:
    first, last = name.lower().split()
    return Employee(
        id=eid,
        name=name,
        email=f"{first[0]}.{last}.{eid[1:]}@corp.example",
        badge=f"B{r.randint(100_000, 999_999)}",
        dept=r.choice(DEPARTMENTS),
        status="locked" if r.random() < 0.2 else "active",
        mfa_enrolled=r.random() < 0.6,
        tenure_years=round(r.gammavariate(2.0, 2.0), 2),
    )


def add_ticket(
    w: HelpdeskWorld, r: random.Random, reporter: str, category: str, status: str = "open"
) -> Ticket:
    """A new ticket with a fresh id, appended to the world."""
    taken = {t.id for t in w.tickets}
    tid = f"T{r.randint(100_000, 999_999)}"
    while tid in taken:
        tid = f"T{r.randint(100_000, 999_999)}"
    t = Ticket(tid, reporter, category, status, r.choice(PRIORITIES[:3]), round(r.uniform(0.5, 240.0), 1))
    w.tickets.append(t)
    return t


def make_world(rng: np.random.Generator) -> HelpdeskWorld:
    """A fresh random help desk: the caller with 2-4 assets of distinct kinds and 1-3 tickets, a colleague with one
    asset and one ticket."""
    r = random.Random(bits62(rng))  # = rng.integers(1 << 62)
    names, eids = r.sample(NAMES, 2), r.sample(range(10_000, 100_000), 2)
    people = [_employee(r, f"E{i}", n) for i, n in zip(eids, names, strict=True)]
    health = drifting_tool_health(r, BASE_TOOL_HEALTH)  # drawn now, built when first read
    w = HelpdeskWorld(people, [], [], health)
    counts = ((people[0], r.randint(2, 4), r.randint(1, 3)), (people[1], 1, 1))
    aids = iter(r.sample(range(10_000, 100_000), 5))
    for e, n_assets, n_tickets in counts:
        for kind in r.sample(ASSET_KINDS, n_assets):
            lo, hi = {"laptop": (900, 2400), "phone": (400, 1100)}.get(kind, (60, 400))
            w.assets.append(
                Asset(f"A{next(aids)}", e.id, kind, "in_use", r.randint(0, 1095), round(r.uniform(lo, hi), 2))
            )
        for _ in range(n_tickets):
            add_ticket(w, r, e.id, r.choice(TICKET_CATEGORIES))
    return w


def employee_record(w: HelpdeskWorld, e: Employee) -> dict[str, Any]:
    """An employee as the lookups reveal it (also :func:`entity_fields`' ground truth)."""
    return {
        "dept": e.dept,
        "status": e.status,
        "verified": e.verified,
        "mfa_enrolled": e.mfa_enrolled,
        "tenure_years": e.tenure_years,
        "open_tickets": sum(1 for t in w.tickets if t.reporter_id == e.id and t.status in OPEN_STATUSES),
    }


def entity_fields(world: HelpdeskWorld, entity_type: str, entity_id: str) -> dict[str, Any] | None:
    """What a full lookup of one entity would reveal now (the field names of the contracts' outputs)."""
    if entity_type == "employee":
        e = world.employee(entity_id)
        return None if e is None else employee_record(world, e)
    if entity_type == "ticket":
        t = world.ticket(entity_id)
        if t is None:
            return None
        out = {"reporter": t.reporter_id, "status": t.status, "category": t.category, "priority": t.priority}
        return out | {"age_hours": t.age_hours} | ({"asset": t.asset_id} if t.asset_id else {})
    if entity_type == "asset":
        a = world.asset(entity_id)
        if a is None:
            return None
        return {
            "owner": a.owner_id,
            "kind": a.kind,
            "status": a.status,
            "warranty_days_left": a.warranty_days_left,
            "cost": a.cost,
        }
    return None


def entity_ids(world: HelpdeskWorld, entity_type: str) -> list[str]:
    """Every id of a type in the world."""
    rows: dict[str, list[Employee] | list[Ticket] | list[Asset]] = {
        "employee": world.employees,
        "ticket": world.tickets,
        "asset": world.assets,
    }
    return [x.id for x in rows.get(entity_type, [])]


def state_hash(world: HelpdeskWorld) -> str:
    """Digest of what help-desk work changes: every account's status, ticket's status/priority/merge target and
    asset's status (not lookups' side data, tool health or the session)."""
    state = (
        sorted((e.id, e.status) for e in world.employees),
        sorted((t.id, t.status, t.priority, t.merged_into) for t in world.tickets),
        sorted((a.id, a.status) for a in world.assets),
    )
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()


def perturb_desk(world: HelpdeskWorld, rng: np.random.Generator) -> HelpdeskWorld:
    """Changes two to four hidden values of ``world`` in place (see ``HelpdeskDomain.perturb_hidden``); returns it."""

    def other(choices: tuple[Any, ...], now: Any) -> Any:
        rest = [c for c in choices if c != now]
        return rest[int(rng.integers(len(rest)))]

    edits: list[Any] = []
    for e in world.employees:
        edits += [
            lambda e=e: setattr(e, "dept", other(DEPARTMENTS, e.dept)),
            lambda e=e: setattr(e, "mfa_enrolled", not e.mfa_enrolled),
            lambda e=e: setattr(e, "tenure_years", round(e.tenure_years + float(rng.uniform(1.0, 5.0)), 2)),
        ]
    for t in world.tickets:
        edits += [
            lambda t=t: setattr(t, "priority", other(PRIORITIES, t.priority)),
            lambda t=t: setattr(t, "age_hours", round(t.age_hours + float(rng.uniform(5.0, 50.0)), 2)),
        ]
    for a in world.assets:
        edits += [
            lambda a=a: setattr(a, "warranty_days_left", a.warranty_days_left + int(rng.integers(10, 200))),
            lambda a=a: setattr(a, "cost", round(a.cost * float(rng.uniform(1.2, 2.0)), 2)),
            lambda a=a: setattr(a, "status", other(ASSET_STATUSES, a.status)),
        ]
    for i in rng.choice(len(edits), size=int(rng.integers(2, 5)), replace=False):
        edits[int(i)]()
    return world
