"""The help-desk tools: ``handler(world, params) -> payload``, with real effects on a HelpdeskWorld.

Each handler checks the state and raises :class:`~agentic_ray.skills.backends.ToolError` with a typed code on a
bad call (``NOT_FOUND``, ``CONFLICT``, ``PRECONDITION_FAILED``, ``INVALID_INPUT``); parameters arrive validated by
the gateway (see ``configs/skills/helpdesk.yaml``). Payload fields match the contracts' ``output``.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.helpdesk.world import (
    OPEN_STATUSES,
    Asset,
    Employee,
    HelpdeskWorld,
    Ticket,
    employee_record,
)
from agentic_ray.skills.backends import ToolError


def _world(world: Any) -> HelpdeskWorld:
    if not isinstance(world, HelpdeskWorld):
        raise ToolError("NOT_FOUND", "no help-desk world is loaded for this world_id")
    return world


def _employee(w: HelpdeskWorld, eid: str) -> Employee:
    e = w.employee(eid)
    if e is None:
        raise ToolError("NOT_FOUND", f"employee {eid} not found")
    return e


def _ticket(w: HelpdeskWorld, tid: str) -> Ticket:
    t = w.ticket(tid)
    if t is None:
        raise ToolError("NOT_FOUND", f"ticket {tid} not found")
    return t


def _asset(w: HelpdeskWorld, aid: str) -> Asset:
    a = w.asset(aid)
    if a is None:
        raise ToolError("NOT_FOUND", f"asset {aid} not found")
    return a


def _found(w: HelpdeskWorld, e: Employee | None, what: str) -> dict[str, Any]:
    if e is None:
        raise ToolError("NOT_FOUND", f"no employee with that {what}")
    return {"employee_id": e.id, **employee_record(w, e)}


def lookup_employee_by_email(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Identify the caller by the email they gave."""
    w = _world(world)
    email = params["email"].strip().lower()
    return _found(w, next((e for e in w.employees if e.email == email), None), "email")


def lookup_employee_by_badge(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Identify the caller by badge number."""
    w = _world(world)
    badge = params["badge"].strip().upper()
    return _found(w, next((e for e in w.employees if e.badge == badge), None), "badge")


def ticket_search(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Every ticket an employee reported, with status, category, priority and age."""
    w = _world(world)
    e = _employee(w, params["employee_id"])
    rows = [
        {
            "id": t.id,
            "status": t.status,
            "category": t.category,
            "priority": t.priority,
            "age_hours": t.age_hours,
        }
        for t in w.tickets
        if t.reporter_id == e.id
    ]
    return {"employee_id": e.id, "tickets": rows}


def ticket_get(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """One ticket: its reporter, state, and the asset it is about ("" when none)."""
    t = _ticket(_world(world), params["ticket_id"])
    return {
        "ticket_id": t.id,
        "employee_id": t.reporter_id,
        "status": t.status,
        "category": t.category,
        "priority": t.priority,
        "age_hours": t.age_hours,
        "asset_id": t.asset_id,
    }


def get_assets_for_employee(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The assets assigned to an employee, with kind and status."""
    w = _world(world)
    e = _employee(w, params["employee_id"])
    rows = [{"id": a.id, "kind": a.kind, "status": a.status} for a in w.assets if a.owner_id == e.id]
    return {"employee_id": e.id, "assets": rows}


def asset_get(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """One asset from the registry: owner, kind, status, warranty left and cost."""
    a = _asset(_world(world), params["asset_id"])
    return {
        "asset_id": a.id,
        "employee_id": a.owner_id,
        "kind": a.kind,
        "status": a.status,
        "warranty_days_left": a.warranty_days_left,
        "cost": a.cost,
    }


def account_verify_identity(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Verify the caller's identity; a push challenge needs MFA enrolment; a disabled account cannot be verified."""
    e = _employee(_world(world), params["employee_id"])
    if e.status == "disabled":
        raise ToolError("CONFLICT", f"account {e.id} is disabled")
    if params["method"] == "mfa_push" and not e.mfa_enrolled:
        raise ToolError("PRECONDITION_FAILED", f"{e.id} has no MFA device for a push challenge")
    e.verified = True
    return {"employee_id": e.id, "verified": True, "method": params["method"]}


def reset_password(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Reset the password (and unlock) of a verified, not disabled account."""
    e = _employee(_world(world), params["employee_id"])
    if e.status == "disabled":
        raise ToolError("CONFLICT", f"account {e.id} is disabled; only tier 2 can re-enable it")
    if not e.verified:
        raise ToolError("PRECONDITION_FAILED", f"{e.id} is not verified")
    e.status, e.password_resets = "active", e.password_resets + 1
    return {"employee_id": e.id, "status": e.status, "delivery": params["delivery"]}


def asset_report_lost(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Mark an in-use asset lost (remote lock and wipe)."""
    a = _asset(_world(world), params["asset_id"])
    if a.status != "in_use":
        raise ToolError("CONFLICT", f"asset {a.id} is {a.status}")
    a.status = "lost"
    return {"asset_id": a.id, "status": a.status}


def ticket_merge(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Merge duplicate tickets into a primary one (same reporter, all open)."""
    w = _world(world)
    p = _ticket(w, params["ticket_id"])
    dups = [_ticket(w, d) for d in params["duplicates"]]
    if p.id in params["duplicates"]:
        raise ToolError("INVALID_INPUT", "a ticket cannot be merged into itself")
    for t in (p, *dups):
        if t.status not in OPEN_STATUSES:
            raise ToolError("CONFLICT", f"ticket {t.id} is {t.status}")
        if t.reporter_id != p.reporter_id:
            raise ToolError("CONFLICT", f"ticket {t.id} has another reporter than {p.id}")
    for t in dups:
        t.status, t.merged_into = "merged", p.id
    return {"ticket_id": p.id, "merged": len(dups)}


def ticket_set_priority(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Change the priority of an open ticket."""
    t = _ticket(_world(world), params["ticket_id"])
    if t.status not in OPEN_STATUSES:
        raise ToolError("CONFLICT", f"ticket {t.id} is {t.status}")
    t.priority = params["priority"]
    return {"ticket_id": t.id, "priority": t.priority}


def answer_warranty(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Tell the caller how many warranty days an asset has left (ends the conversation)."""
    w = _world(world)
    a = _asset(w, params["asset_id"])
    w.session.answers.append({"asset_id": a.id, "days": int(params["days"])})
    return {"answered": True}


def escalate_to_tier2(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Hand the case to a tier-2 engineer (ends the automated session); caller and ticket are optional."""
    w = _world(world)
    if params.get("employee_id") is not None:
        _employee(w, params["employee_id"])
    if params.get("ticket_id") is not None:
        _ticket(w, params["ticket_id"])
    eid = w.next_id("ESC")
    w.session.escalation = {"escalation_id": eid, **params}
    return {"escalation_id": eid, "queued": True}
