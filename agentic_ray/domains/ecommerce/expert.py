"""The scripted e-commerce expert: solves every task optimally from the episode view (faults off).

It reads the task's ground truth (the goals' arguments) but acts under the same partial information as the
policy: it can only name an entity a lookup or the request revealed, so it identifies the customer (by email, or
by name and zip code), reads the orders whose items, prices or fees a goal needs (``order.get``; ``order.list``
when the customer named no order), then runs the most urgent ready goal. Its step count is the task's
``optimal_steps``.

After a failure it corrects according to the root cause the env attributed to the last step (the policy's
reflection input): a tool error is retried as is; after ``stale_information`` it first re-reads the entity the
rejected call referred to (``order.get`` / ``inventory.check``, the minimal experiment) and then calls again;
after ``wrong_entity`` (the call carried an id the agent never learned: it holds a look-alike) it re-resolves
that entity with the lookup that reveals it (``order.list`` for an order, identifying the customer again for a
customer) and then calls again; after ``bad_parameters`` it calls again at once with the task's values (a refund
above what was paid becomes a refund of the order's revealed ``total``); a missing prerequisite or a dependency
violation is fixed by the plan itself.
When the skill a goal needs is masked (an outage), it hands off.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.skills.contracts import EnumParam

REREAD_SKILLS: tuple[tuple[str, str], ...] = (("order_id", "order.get"), ("sku", "inventory.check"))
"""``(argument, read-only skill)``: how to re-read the entity a call referred to, in order of preference."""

REREAD_CAUSES = frozenset({"stale_information"})
"""Causes whose fix reads first. After ``bad_parameters`` the task's own values are known (the goal's arguments),
so the fix is the corrected call at once; only a stale read needs the fresh value first. Distinct fixes for the
two write failures that leave the same trace (a failed write after a read) are what makes the cause matter."""

READ_FIELD = "total"
"""An order field only ``order.get`` reveals (an order named in the request, or listed, has not been read)."""


def resolve_after_failure(view: EpisodeView) -> tuple[str, dict[str, Any]] | None:
    """The lookup that re-resolves the entity a ``wrong_entity`` step named by an id the agent never learned
    (an order: ``order.list``; the customer: identify them again), else None."""
    last = view.last
    if last is None or last.code == "OK" or last.root_cause != "wrong_entity":
        return None
    users = view.knowledge.ids("user")
    for arg, node_type in (("order_id", "order"), ("user_id", "user")):
        v = last.params.get(arg)
        if not isinstance(v, str) or view.knowledge.knows(node_type, v):
            continue
        if node_type == "order" and users and view.allowed("order.list"):
            return "order.list", {"user_id": users[0]}
        if node_type == "user":
            return EcommerceExpert._identify(view)
    return None


def reread_after_failure(view: EpisodeView) -> tuple[str, dict[str, Any]] | None:
    """The re-read call after a step attributed to stale information, else None."""
    last = view.last
    if last is None or last.code == "OK" or last.root_cause not in REREAD_CAUSES:
        return None
    for arg, read in REREAD_SKILLS:
        if (
            arg in last.params
            and last.skill != read
            and view.allowed(read)
            and view.knowledge.type_of(str(last.params[arg]))
        ):
            return read, {arg: last.params[arg]}
    return None


class EcommerceExpert:
    """Optimal scripted policy for the e-commerce task families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        """The next call as ``(skill, params)``."""
        fix = reread_after_failure(view) or resolve_after_failure(view)
        if fix is not None:
            return fix
        task = view.task
        cands = [i for i in range(len(task.goals)) if view.ready[i]]
        if not cands:
            return self._handoff(view, "complex")
        g = task.goals[min(cands, key=lambda j: (-task.goals[j].priority, j))]
        step = self._lookup(view, g)
        if step is not None:
            return step if view.allowed(step[0]) else self._handoff(view, "tool_failure")
        if not view.allowed(g.skill):
            return self._handoff(view, "tool_failure")
        params: dict[str, Any] = dict(g.args)
        params.update(g.numeric)
        for name, p in view.contracts[g.skill].input.items():
            if name not in params and isinstance(p, EnumParam):
                params[name] = p.default or p.choices[0]
        return g.skill, params

    # ------------------------------------------------------------------ lookups
    @staticmethod
    def _identify(view: EpisodeView) -> tuple[str, dict[str, Any]]:
        facts = view.task.request.facts
        if "email" in facts:
            return "user.find", {"email": facts["email"]}
        return "lookup_customer_by_name", {"name": facts.get("name", ""), "zip": facts.get("zip", "")}

    def _lookup(self, view: EpisodeView, g: Goal) -> tuple[str, dict[str, Any]] | None:
        """The next lookup the goal needs, or None when it can run."""
        k, task = view.knowledge, view.task
        reads = {oid for skill, oid in task.extra.get("lookups", ()) if skill == "order.get"}
        prefix = g.id.rsplit(".", 1)[0] + "." if "." in g.id else ""
        related = (g.args.get("order_id"), task.extra.get(f"{prefix}compensated_order"))
        orders = [o for o in related if isinstance(o, str)]
        products = [g.args["sku"]] if isinstance(g.args.get("sku"), str) else []
        unknown = [p for p in products + list(g.args.get("item_ids", [])) if not k.knows("product", p)]
        needs_user = "user_id" in g.args or bool(reads) or bool(orders)
        if needs_user and not k.ids("user"):
            return self._identify(view)
        for oid in orders:
            if not k.knows("order", oid):
                return "order.list", {"user_id": k.ids("user")[0]}
            if oid in reads and READ_FIELD not in k.fields("order", oid):
                return "order.get", {"order_id": oid}
        if unknown:  # an item the goal names comes with the order it belongs to
            for oid in sorted(reads):
                if k.knows("order", oid) and READ_FIELD not in k.fields("order", oid):
                    return "order.get", {"order_id": oid}
        return None

    @staticmethod
    def _handoff(view: EpisodeView, reason: str) -> tuple[str, dict[str, Any]]:
        users = view.knowledge.ids("user")
        return "human.handoff", ({"user_id": users[0]} if users else {}) | {"reason": reason}
