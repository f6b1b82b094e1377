"""E-commerce caller errors (issue 13): a look-alike order/product id, a refund above the order total, and a
stale read (another agent changes an order between the agent's ``order.get`` and its write)."""

from __future__ import annotations

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

COUPON_CAP_PER_LEVEL = 10.0
"""``coupon.issue`` caps the value at this times the user's level (``tools.coupon_issue``)."""


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
    if c is None:
        return None
    if cause == "wrong_entity":
        return lookalike_entity(c, params, task.relevant, lambda t: entity_ids(world, t), rng)
    if cause == "bad_parameters":
        if skill == "coupon.issue" and "value" in params:  # above the level cap, inside the contract's range
            value = COUPON_CAP_PER_LEVEL * world.user.level + 5.0
            return {**params, "value": value} if value <= c.input["value"].max else None  # type: ignore[union-attr]
        return above_limit(c, params, lambda t, i, f: (entity_fields(world, t, i) or {}).get(f))
    if cause == "stale_information":
        oid = params.get("order_id")
        o = world.order(oid) if isinstance(oid, str) else None
        if skill not in WRITES_CHECK_REVISION or o is None or o.id not in world.session.read_revisions:
            return None
        o.revision += 1  # someone else changed the order after the agent read it
        return dict(params)
    return None
