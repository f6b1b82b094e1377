"""E-commerce caller errors (issue 13): each leaves the world (or the agent's memory) so that only its own fix works.

Every kind lands on an order write (``WRITES_CHECK_REVISION``), so the same call can fail for each root cause and
only the diagnosis tells which fix it needs:

* ``wrong_entity``: the agent's memory of the order's id is a look-alike that exists nowhere (the env keeps
  sending it, :attr:`~agentic_ray.envs.agent_task_env.AgentTaskEnv.misheld`) until ``order.list`` lists the
  customer's orders again. Re-reading the order by its (wrong) id fails like the call.
* ``stale_information``: another agent changes the order just before the write, so the write's revision check
  fails (``tools._order_for_write``) until ``order.get`` reads the order again. An order the session never read
  is checked against its revision when the session began. ``order.list`` does not read the revision.
* ``bad_parameters``: the refund exceeds what is refundable. At reset the order is set up as paid partly with a
  voucher (its ``total``, what was paid, is below the item's price) and the refund goal becomes the total; the
  call goes out above the total. The item's price, which a refund usually copies, is above the limit too, so only
  a refund of the order's revealed ``total`` succeeds. (``coupon.issue`` has a cap too, 10 x the customer's
  level, but no revealed field holds it, so a coupon is not given this error.)
* ``tool_error`` (the control, not a caller error; injected by the env): the write's tool fails this once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from agentic_ray.domains.caller_errors import above_limit, lookalike_entity
from agentic_ray.domains.ecommerce.world import ShopWorld, entity_fields, entity_ids
from agentic_ray.domains.protocol import Task
from agentic_ray.skills.contracts import DomainContracts

WRITES_CHECK_REVISION = frozenset(
    {
        "return.create",
        "order.update_address",
        "order.cancel",
        "refund.trigger",
        "express.contact",
        "waybill.generate",
        "exchange.create",
    }
)
"""Writes that reject an order changed since it was read (``tools._order_for_write``)."""

RESOLVABLE = frozenset({"order"})
"""Entity types a wrong entity is injected on: a lookup (``order.list``) re-resolves them."""

LIMITED = "refund.trigger"
"""The skill whose numeric argument gets a binding limit for ``bad_parameters``."""

PAID_SHARE = (0.5, 0.8)
"""A ``bad_parameters`` order's total (what was paid) is this share of the refunded item's price."""


def caller_error_setup(world: ShopWorld, task: Task, cause: str, rng: np.random.Generator) -> Task | None:
    """See :meth:`agentic_ray.domains.protocol.Domain.caller_error_setup`."""
    if cause in ("wrong_entity", "stale_information", "tool_error"):
        ok = any(g.skill in WRITES_CHECK_REVISION and "order_id" in g.args for g in task.goals)
        return task if ok else None
    if cause == "bad_parameters":
        goals = list(task.goals)
        for i, g in enumerate(goals):
            o = world.order(g.args.get("order_id", "")) if g.skill == LIMITED else None
            if o is None or "amount" not in g.numeric:
                continue
            paid = round(g.numeric["amount"] * float(rng.uniform(*PAID_SHARE)), 2)
            o.total, o.refunded = paid, 0.0
            goals[i] = dataclasses.replace(g, numeric={**g.numeric, "amount": paid})
            return dataclasses.replace(task, goals=tuple(goals))
        return None
    return None


def caller_error(
    contracts: DomainContracts,
    world: ShopWorld,
    task: Task,
    skill: str,
    params: dict[str, Any],
    cause: str,
    rng: np.random.Generator,
) -> dict[str, Any] | None:
    """See :meth:`agentic_ray.domains.protocol.Domain.caller_error`."""
    c = contracts.by_name().get(skill)
    if c is None or skill not in WRITES_CHECK_REVISION:
        return None
    if cause == "tool_error":
        return dict(params)
    if cause == "wrong_entity":
        return lookalike_entity(c, params, task.relevant, lambda t: entity_ids(world, t), rng, RESOLVABLE)
    if cause == "bad_parameters":
        if skill != LIMITED:
            return None
        return above_limit(c, params, lambda t, i, f: (entity_fields(world, t, i) or {}).get(f))
    if cause == "stale_information":
        oid = params.get("order_id")
        o = world.order(oid) if isinstance(oid, str) else None
        if o is None:
            return None
        world.session.read_revisions.setdefault(o.id, o.revision)  # the session's view of an unread order
        o.revision += 1  # someone else changed the order after the agent saw it
        return dict(params)
    return None
