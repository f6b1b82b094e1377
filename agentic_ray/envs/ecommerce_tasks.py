"""Seeded e-commerce task generator: eight task families, each a goal DAG over a world set up to match it.

``generate_task(family, task_seed)`` draws a world with :func:`make_world` and edits it so the customer's story is
true (an unshipped order with a wrong address, a delivered order with a defective item, a parcel stuck with the
courier...), then returns the goal DAG, the business preconditions it relies on (from the contracts), the
high-risk actions to avoid, and the optimal step count (one call per subgoal; the DAG already orders every
contract precondition). The same ``(family, task_seed)`` always gives the same world and task.

Validation tasks use a fixed, disjoint seed range (:func:`validation_seeds`); training seeds are drawn below
:data:`VALIDATION_SEED_BASE`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.envs.goal_dag import Goal
from agentic_ray.skills.domains.ecommerce.world import ADDRESSES, Order, Product, ShopWorld, make_world

FAMILIES: tuple[str, ...] = (
    "address_error",
    "quality_refund",
    "logistics_exception",
    "wrong_item_exchange",
    "late_delivery",
    "cancellation",
    "stock_inquiry",
    "composite",
)
"""Task families; ``composite`` combines two different simple families on different orders."""

VALIDATION_SEED_BASE = 1_000_000_000
"""Task seeds at or above this value are reserved for validation; training draws below it."""


@dataclass(frozen=True)
class RiskRule:
    """A high-risk action: calling ``skill`` (on ``args``) before ``before`` has succeeded (on the same args)."""

    skill: str
    before: str
    same: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class Task:
    """One customer request.

    Attributes:
        family: one of FAMILIES.
        seed: the task seed (world and task are a pure function of ``(family, seed)``).
        query: the customer's words (hashed into the intent id).
        goals: the goal DAG.
        preconditions: the contract rules the plan must respect, ``skill -> [after, ...]``.
        risk_rules: high-risk actions of this task (e.g. a refund before the inventory check).
        optimal_steps: fewest calls that satisfy every goal without faults.
        protected_skus: products the task needs in stock (background drift never empties them).
        entities: ids the customer mentioned (order ids, skus, the user), for memory recall.
        subtasks: families of a composite task (empty otherwise).
    """

    family: str
    seed: int
    query: str
    goals: tuple[Goal, ...]
    preconditions: dict[str, list[str]]
    risk_rules: tuple[RiskRule, ...]
    optimal_steps: int
    protected_skus: frozenset[str]
    entities: tuple[str, ...]
    subtasks: tuple[str, ...] = ()

    def goal_index(self) -> dict[str, int]:
        return {g.id: i for i, g in enumerate(self.goals)}


@dataclass
class _Ctx:
    world: ShopWorld
    rng: np.random.Generator
    used_orders: set[str] = field(default_factory=set)
    used_skus: set[str] = field(default_factory=set)

    def free_order(self) -> Order:
        for o in self.world.orders:
            if o.id not in self.used_orders:
                self.used_orders.add(o.id)
                self.used_skus.update(o.skus)
                return o
        raise RuntimeError("no free order")  # worlds have 3 orders and tasks use at most 2

    def free_product(self, exclude: set[str] | None = None) -> Product:
        taken = self.used_skus | (exclude or set())
        cands = [p for p in self.world.products if p.sku not in taken]
        p = cands[int(self.rng.integers(len(cands)))]
        self.used_skus.add(p.sku)
        return p


def _in_stock(p: Product, rng: np.random.Generator) -> None:
    p.stock = max(p.stock, int(rng.integers(25, 300)))


def _address_error(c: _Ctx, pre: str) -> tuple[list[Goal], str, set[str], list[str]]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "paid", "none"
    o.address = next(a for a in ADDRESSES if a != w.user.address)
    source = "pickup_point" if c.rng.random() < 0.3 else "profile"
    u = w.user.id
    goals = [
        Goal(f"{pre}verify", "user.verify", {"user_id": u}, description="verify the customer"),
        Goal(
            f"{pre}address",
            "order.update_address",
            {"order_id": o.id, "source": source},
            deps=(f"{pre}verify",),
            description=f"fix the address of {o.id} ({source})",
        ),
        Goal(
            f"{pre}erp", "erp.sync", {"order_id": o.id}, deps=(f"{pre}address",), description="sync the ERP"
        ),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "address_confirm"},
            deps=(f"{pre}erp",),
            description="confirm by SMS",
        ),
    ]
    where = "a parcel locker" if source == "pickup_point" else "my profile address"
    return goals, f"The address on order {o.id} is wrong, please send it to {where}.", set(), [o.id]


def _quality_refund(c: _Ctx, pre: str) -> tuple[list[Goal], str, set[str], list[str]]:
    w, o = c.world, c.free_order()
    o.status, o.tracking, o.refunded = "delivered", "delivered", 0.0
    it = o.items[int(c.rng.integers(len(o.items)))]
    p = w.product(it.sku)
    assert p is not None
    _in_stock(p, c.rng)
    u = w.user.id
    goals = [
        Goal(f"{pre}check", "inventory.check", {"sku": p.sku}, description="check stock of the item"),
        Goal(
            f"{pre}refund",
            "refund.trigger",
            {"order_id": o.id, "sku": p.sku, "reason_code": "quality"},
            numeric={"amount": it.price},
            deps=(f"{pre}check",),
            priority=2,
            description="refund one unit",
        ),
        Goal(f"{pre}erp", "erp.sync", {"order_id": o.id}, deps=(f"{pre}refund",), description="sync the ERP"),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "refund_notice"},
            deps=(f"{pre}erp",),
            description="tell the customer",
        ),
    ]
    return (
        goals,
        f"Item {p.sku} in order {o.id} arrived broken, I want my money back.",
        {p.sku},
        [o.id, p.sku],
    )


def _logistics_exception(c: _Ctx, pre: str) -> tuple[list[Goal], str, set[str], list[str]]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "shipped", "exception"
    u = w.user.id
    goals = [
        Goal(f"{pre}get", "order.get", {"order_id": o.id}, description="look the order up"),
        Goal(
            f"{pre}express",
            "express.contact",
            {"order_id": o.id, "action": "trace"},
            deps=(f"{pre}get",),
            priority=2,
            description="open a trace with the courier",
        ),
        Goal(
            f"{pre}waybill",
            "waybill.generate",
            {"order_id": o.id, "kind": "reship"},
            deps=(f"{pre}express",),
            description="issue a reship waybill",
        ),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "logistics_update"},
            deps=(f"{pre}waybill",),
            description="send the tracking update",
        ),
    ]
    return goals, f"My parcel for order {o.id} has been stuck for days.", set(), [o.id]


def _wrong_item_exchange(c: _Ctx, pre: str) -> tuple[list[Goal], str, set[str], list[str]]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "delivered", "delivered"
    wrong = w.product(o.items[0].sku)
    assert wrong is not None
    right = c.free_product()
    right.category = wrong.category
    _in_stock(right, c.rng)
    u = w.user.id
    goals = [
        Goal(
            f"{pre}check", "inventory.check", {"sku": right.sku}, description="check the right item's stock"
        ),
        Goal(
            f"{pre}exchange",
            "exchange.create",
            {"order_id": o.id, "sku": right.sku},
            deps=(f"{pre}check",),
            priority=2,
            description="ship the right item",
        ),
        Goal(
            f"{pre}pickup",
            "express.contact",
            {"order_id": o.id, "action": "return_pickup"},
            deps=(f"{pre}exchange",),
            description="book the return pickup",
        ),
        Goal(
            f"{pre}waybill",
            "waybill.generate",
            {"order_id": o.id, "kind": "exchange"},
            deps=(f"{pre}pickup",),
            description="issue the exchange waybill",
        ),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "exchange_notice"},
            deps=(f"{pre}waybill",),
            description="confirm the exchange",
        ),
    ]
    q = f"Order {o.id} came with {wrong.sku} but I ordered {right.sku}."
    return goals, q, {right.sku}, [o.id, wrong.sku, right.sku]


def _late_delivery(c: _Ctx, pre: str) -> tuple[list[Goal], str, set[str], list[str]]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "shipped", "in_transit"
    o.days_late = int(c.rng.integers(2, 9))
    value = 20.0 if w.user.level >= 4 else 10.0
    u = w.user.id
    goals = [
        Goal(f"{pre}get", "order.get", {"order_id": o.id}, description="look the order up"),
        Goal(
            f"{pre}coupon",
            "coupon.issue",
            {"user_id": u, "kind": "delay"},
            numeric={"value": value},
            deps=(f"{pre}get",),
            priority=2,
            description=f"compensate with a {value:.0f} coupon",
        ),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "delay_apology"},
            deps=(f"{pre}coupon",),
            description="apologise",
        ),
    ]
    return goals, f"Order {o.id} is {o.days_late} days late. This is unacceptable.", set(), [o.id]


def _cancellation(c: _Ctx, pre: str) -> tuple[list[Goal], str, set[str], list[str]]:
    w, o = c.world, c.free_order()
    o.status, o.tracking, o.refunded = "paid", "none", 0.0
    u = w.user.id
    goals = [
        Goal(f"{pre}get", "order.get", {"order_id": o.id}, description="look the order up"),
        Goal(
            f"{pre}cancel",
            "order.cancel",
            {"order_id": o.id, "reason": "customer_request"},
            deps=(f"{pre}get",),
            priority=2,
            description="cancel it",
        ),
        Goal(f"{pre}erp", "erp.sync", {"order_id": o.id}, deps=(f"{pre}cancel",), description="sync the ERP"),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "cancel_notice"},
            deps=(f"{pre}erp",),
            description="confirm the cancellation",
        ),
    ]
    return goals, f"Please cancel order {o.id}, I no longer need it.", set(), [o.id]


def _stock_inquiry(c: _Ctx, pre: str) -> tuple[list[Goal], str, set[str], list[str]]:
    w = c.world
    p = c.free_product()
    u = w.user.id
    goals = [
        Goal(f"{pre}check", "inventory.check", {"sku": p.sku}, description="check the stock"),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "stock_info"},
            deps=(f"{pre}check",),
            description="tell the customer",
        ),
    ]
    return goals, f"Is {p.sku} available? Text me please.", set(), [p.sku]


_SIMPLE: dict[str, Callable[[_Ctx, str], tuple[list[Goal], str, set[str], list[str]]]] = {
    "address_error": _address_error,
    "quality_refund": _quality_refund,
    "logistics_exception": _logistics_exception,
    "wrong_item_exchange": _wrong_item_exchange,
    "late_delivery": _late_delivery,
    "cancellation": _cancellation,
    "stock_inquiry": _stock_inquiry,
}

_RISK_RULES: dict[str, RiskRule] = {
    "refund.trigger": RiskRule(
        "refund.trigger", "inventory.check", ("sku",), "a refund before the inventory check"
    ),
    "order.cancel": RiskRule(
        "order.cancel", "order.get", ("order_id",), "a cancellation before reading the order"
    ),
    "coupon.issue": RiskRule("coupon.issue", "order.get", (), "compensation before reading the order"),
    "exchange.create": RiskRule(
        "exchange.create", "inventory.check", ("sku",), "an exchange before the check"
    ),
}

MAX_GOALS = 10
"""Upper bound on goals per task (a composite of the two largest simple families has 9)."""


def generate_task(
    family: str, task_seed: int, preconditions: dict[str, list[str]] | None = None
) -> tuple[ShopWorld, Task]:
    """Draw the world and the task of ``(family, task_seed)``.

    Args:
        family: one of :data:`FAMILIES`.
        task_seed: any non-negative int; validation uses :func:`validation_seeds`.
        preconditions: ``skill -> [after skills]`` from the contracts (recorded in the task).

    Returns:
        ``(world, task)``; the world is fresh and owned by the caller.
    """
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng([task_seed, FAMILIES.index(family)])
    subtasks: tuple[str, ...]
    if family == "composite":
        simple = list(_SIMPLE)
        i, j = rng.choice(len(simple), size=2, replace=False)
        subtasks = (simple[int(i)], simple[int(j)])
    else:
        subtasks = (family,)
    for _ in range(50):
        world = make_world(rng)
        ctx = _Ctx(world, rng)
        goals: list[Goal] = []
        queries, protected, entities = [], set(), [world.user.id]
        for k, fam in enumerate(subtasks):
            pre = f"{'ab'[k]}." if len(subtasks) > 1 else ""
            gs, q, prot, ents = _SIMPLE[fam](ctx, pre)
            if len(subtasks) > 1 and k == 0:  # the first issue the customer raised goes first
                gs = [
                    Goal(
                        g.id, g.skill, g.args, g.numeric, g.deps, g.priority + 10, g.tolerance, g.description
                    )
                    for g in gs
                ]
            goals += gs
            queries.append(q)
            protected |= prot
            entities += ents
        # Two subgoals one call could satisfy would make the optimal step count ambiguous: redraw.
        keys = [(g.skill, tuple(sorted(g.args.items()))) for g in goals]
        if len(set(keys)) == len(keys):
            break
    _check_dag(goals)
    skills = {g.skill for g in goals}
    risk = tuple(r for s, r in _RISK_RULES.items() if s in skills)
    pre_map = {s: list(v) for s, v in (preconditions or {}).items() if s in skills}
    task = Task(
        family=family,
        seed=int(task_seed),
        query=" Also, ".join(queries),
        goals=tuple(goals),
        preconditions=pre_map,
        risk_rules=risk,
        optimal_steps=len(goals),
        protected_skus=frozenset(protected),
        entities=tuple(dict.fromkeys(entities)),
        subtasks=subtasks if family == "composite" else (),
    )
    return world, task


def _check_dag(goals: list[Goal]) -> None:
    """Every dependency names an earlier goal: acyclic by construction (``goal_graph`` checks in general)."""
    seen: set[str] = set()
    for g in goals:
        if g.id in seen or any(d not in seen for d in g.deps):
            raise ValueError(f"malformed goal DAG at {g.id}")
        seen.add(g.id)


def validation_seeds(family: str, n: int = 25) -> list[int]:
    """The fixed validation seeds of one family (disjoint from any training seed)."""
    return [VALIDATION_SEED_BASE + FAMILIES.index(family) * 100_000 + i for i in range(n)]


def draw_training_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, VALIDATION_SEED_BASE))


def goal_feasible(goal: Goal, world: ShopWorld, done: set[str]) -> bool:
    """Whether a pending goal can still be satisfied from this world state (False = unrecoverable)."""
    oid = goal.args.get("order_id")
    o = world.order(oid) if oid is not None else None
    s = goal.skill
    if s == "order.update_address" or s == "order.cancel":
        return o is not None and o.status == "paid"
    if s == "refund.trigger":
        return (
            o is not None
            and o.status != "cancelled"
            and o.refunded + goal.numeric["amount"] <= o.total + 1e-6
        )
    if s == "exchange.create":
        p = world.product(goal.args["sku"])
        return o is not None and o.status == "delivered" and p is not None and p.stock > 0
    if s == "express.contact":
        if goal.args["action"] == "return_pickup":
            return o is not None and o.status in ("delivered", "exchange_pending")
        return o is not None and o.status == "shipped"
    if s == "waybill.generate":
        if goal.args["kind"] == "reship":
            return o is not None and o.status == "shipped"
        return o is not None and o.status in ("delivered", "exchange_pending")
    if s == "coupon.issue":
        return goal.numeric["value"] <= 10.0 * world.user.level + 1e-6
    return True


def entity_ids(task: Task) -> list[Any]:
    return list(task.entities)
