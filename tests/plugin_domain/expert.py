"""The plug-in domain's scripted expert: solves every task in its optimal steps from the episode view (faults off).

It acts under the agent's partial information: it identifies the customer, runs the lookup the goal's
preconditions ask for (the order for a refund, the customer's order list for a cancellation), then makes the
goal's call; a goal-less task is closed with the outcome the customer must be told. A question goal is asked as
soon as the customer is identified; the answer voids the goals it rules out, so the next ready goal is the one the
answer asks for. It checks the mask before it
acts (a masked step becomes a handoff), so its demonstrations never hold a forbidden action.

After a failure it applies the fix of the root cause the env attributed to it (the policy's reflection input): a
wrong entity is re-resolved by the lookup that reveals its type, stale information by running the goal's lookup
again (it reveals every entity the write names and does not return itself); anything else is fixed by the plan.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.protocol import EpisodeView, Goal
from agentic_ray.skills.contracts import EntityParam

Step = tuple[str, dict[str, Any]]


def gold_call(g: Goal) -> dict[str, Any]:
    """The call that satisfies goal ``g``."""
    return {**g.args, **g.numeric}


def _order_of(view: EpisodeView) -> str:
    return next(r.id for r in view.task.request.mentioned if r.type == "order")


NO_LOOKUP = ("ask_customer", "expedite_order", "close_case")
"""Skills that need no lookup beyond identifying the customer."""


def _email(view: EpisodeView) -> str:
    """The account's email: the request's, or the right one of the two it gives (``two_emails``)."""
    return str(view.task.extra.get("account_email") or view.task.request.facts["email"])


def _lookup(view: EpisodeView, skill: str) -> Step:
    """The lookup a call of ``skill`` needs first (its precondition's earlier call, or the one that reveals the
    string it copies: the other order's address)."""
    if skill == "cancel_order":
        return "list_orders", {"customer_id": view.knowledge.ids("customer")[0]}
    if skill == "update_address":
        return "get_order", {"order_id": view.task.request.mentioned[1].id}
    return "get_order", {"order_id": _order_of(view)}


class RetailExpert:
    """Optimal scripted policy (see the module docstring)."""

    def plan(self, view: EpisodeView) -> Step:
        step = self._fix(view) or self._next(view)
        return step if view.allowed(step[0]) else ("transfer_to_human", {"reason": "tool_failure"})

    def _next(self, view: EpisodeView) -> Step:
        task, k = view.task, view.knowledge
        customers = k.ids("customer")
        if not customers or not view.succeeded("find_customer_by_email"):
            return "find_customer_by_email", {"email": _email(view)}
        if not task.goals:
            return "close_case", {"customer_id": customers[0], "outcome": "not_cancellable"}
        ready = [i for i in range(len(task.goals)) if view.ready[i]]
        g = task.goals[ready[0]] if ready else task.goals[0]
        if g.skill in NO_LOOKUP:  # asking first; then the goal the answer left (the others are void, done)
            return g.skill, gold_call(g)
        lookup = _lookup(view, g.skill)
        if not view.succeeded(lookup[0], **lookup[1]):
            return lookup
        return g.skill, gold_call(g)

    def _fix(self, view: EpisodeView) -> Step | None:
        last, k = view.last, view.knowledge
        if last is None or last.code == "OK" or last.root_cause not in ("wrong_entity", "stale_information"):
            return None
        customers = k.ids("customer")
        if last.root_cause == "stale_information" and customers:
            return _lookup(view, last.skill)
        for name, p in view.contracts[last.skill].input.items():
            v = last.params.get(name)
            if not isinstance(p, EntityParam) or not isinstance(v, str) or k.knows(p.node_type, v):
                continue
            if p.node_type in ("customer", "payment_method") or not customers:
                return "find_customer_by_email", {"email": _email(view)}
            if p.node_type == "order":
                return "list_orders", {"customer_id": customers[0]}
            return "get_order", {"order_id": _order_of(view)}
        return None
