"""Seeded e-commerce task families: each a goal DAG over a world set up to match the customer's story.

``generate_task(family, task_seed)`` draws a world with :func:`make_world` and edits it so the customer's story is
true (an unshipped order with a wrong address, a delivered order with a broken item, a parcel stuck with the
courier...), then returns the :class:`~agentic_ray.domains.protocol.Task`: the goal DAG (ground truth in each
goal's ``args``; the agent sees only the goal's skill, enum constraints and hints), the request (its text, the
facts the customer gave such as an email, the ids it names) and the optimal step count, lookups included.

Partial information is the point: the customer is identified by email (or by name and zip code) through a
lookup; items, prices and shipping fees come from ``order.get``; an order the customer does not name comes from
``order.list``. The same ``(family, task_seed)`` always gives the same world and task. Validation tasks use a
fixed, disjoint seed range (:func:`validation_seeds`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agentic_ray.domains.ecommerce.world import ADDRESSES, CATEGORIES, Order, Product, ShopWorld, make_world
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.protocol import EntityRef, Request, Task

FAMILIES: tuple[str, ...] = (
    "address_error",
    "quality_refund",
    "logistics_exception",
    "wrong_item_exchange",
    "late_delivery",
    "cancellation",
    "stock_inquiry",
    "multi_item_return",
    "chargeback_dispute",
    "composite",
)
"""Task families; ``composite`` combines two different non-terminal simple families on different orders."""

TERMINAL_FAMILIES = frozenset({"stock_inquiry", "chargeback_dispute"})
"""Families that end with a terminal skill (an answer, a handoff); never part of a composite."""

VALIDATION_SEED_BASE = 1_000_000_000
"""Task seeds at or above this value are reserved for validation; training draws below it."""

MAX_GOALS = 10

ENTITY_ARGS = frozenset({"user_id", "order_id", "sku", "item_ids"})
"""Goal arguments that name entities (what the task is about)."""


@dataclass
class _Ctx:
    world: ShopWorld
    rng: np.random.Generator
    used_orders: set[str] = field(default_factory=set)
    used_skus: set[str] = field(default_factory=set)
    lookups: set[tuple[str, str]] = field(default_factory=set)  # (skill, entity) lookups the plan needs
    mentioned: list[EntityRef] = field(default_factory=list)
    composite: bool = False
    safety_reads: set[str] = field(default_factory=set)
    frozen: set[str] = field(default_factory=set)
    protected: set[str] = field(default_factory=set)
    extra: dict[str, str] = field(default_factory=dict)

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

    def mention_order(self, o: Order) -> None:
        self.mentioned.append(EntityRef("order", o.id))

    def identify(self) -> None:
        self.lookups.add(("identify", self.world.user.id))

    def read(self, o: Order) -> None:
        self.lookups.add(("order.get", o.id))


def _in_stock(p: Product, rng: np.random.Generator) -> None:
    p.stock = max(p.stock, int(rng.integers(25, 300)))


def _distinct_categories(c: _Ctx, o: Order) -> None:
    """Give the order's items pairwise different categories (so a category hint names exactly one)."""
    cats = list(c.rng.permutation(CATEGORIES))
    for it, cat in zip(o.items, cats, strict=False):
        p = c.world.product(it.sku)
        assert p is not None
        p.category = str(cat)


Family = Callable[[_Ctx, str], tuple[list[Goal], str]]


def _address_error(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "paid", "none"
    o.address = next(a for a in ADDRESSES if a != w.user.address)
    source = "pickup_point" if c.rng.random() < 0.3 else "profile"
    u = w.user.id
    c.identify()
    c.mention_order(o)
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
    return goals, f"The address on order {o.id} is wrong, please send it to {where}."


def _quality_refund(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking, o.refunded = "delivered", "delivered", 0.0
    _distinct_categories(c, o)
    it = o.items[int(c.rng.integers(len(o.items)))]
    p = w.product(it.sku)
    assert p is not None
    _in_stock(p, c.rng)
    c.protected.add(p.sku)
    u = w.user.id
    c.identify()
    c.read(o)
    c.mention_order(o)
    hint = {"category": p.category}
    goals = [
        Goal(
            f"{pre}check",
            "inventory.check",
            {"sku": p.sku},
            hints=hint,
            safety_check=True,
            description="check stock of the item",
        ),
        Goal(
            f"{pre}refund",
            "refund.trigger",
            {"order_id": o.id, "sku": p.sku, "reason_code": "quality"},
            numeric={"amount": it.price},
            deps=(f"{pre}check",),
            priority=2,
            hints=hint,
            description="refund the broken item's price",
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
    return goals, f"The {p.category} item in order {o.id} arrived broken, I want my money back."


def _logistics_exception(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "shipped", "exception"
    u = w.user.id
    c.identify()
    c.mention_order(o)
    goals = [
        Goal(
            f"{pre}express",
            "express.contact",
            {"order_id": o.id, "action": "trace"},
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
    return goals, f"My parcel for order {o.id} has been stuck for days."


def _wrong_item_exchange(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "delivered", "delivered"
    wrong = w.product(o.items[0].sku)
    assert wrong is not None
    right = c.free_product()
    right.category = wrong.category
    _in_stock(right, c.rng)
    c.protected.add(right.sku)
    u = w.user.id
    c.identify()
    c.mention_order(o)
    c.mentioned.append(EntityRef("product", right.sku))
    goals = [
        Goal(
            f"{pre}check",
            "inventory.check",
            {"sku": right.sku},
            safety_check=True,
            description="check the right item's stock",
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
    return goals, f"Order {o.id} came with the wrong item, I ordered {right.sku}."


def _late_delivery(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "shipped", "in_transit"
    o.days_late = int(c.rng.integers(2, 9))
    u = w.user.id
    c.identify()
    c.read(o)
    c.mention_order(o)
    c.extra[f"{pre}compensated_order"] = o.id
    goals = [
        Goal(
            f"{pre}coupon",
            "coupon.issue",
            {"user_id": u, "kind": "delay"},
            numeric={"value": o.shipping_fee},
            priority=2,
            description="refund the shipping fee as a coupon",
        ),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "delay_apology"},
            deps=(f"{pre}coupon",),
            description="apologise",
        ),
    ]
    return goals, f"Order {o.id} is {o.days_late} days late. I want my shipping fee back."


def _cancellation(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking, o.refunded = "paid", "none", 0.0
    named = c.composite or c.rng.random() < 0.5
    if not named:  # "my unshipped order": the only paid one, found with order.list
        for other in w.orders:
            if other.id != o.id and other.status == "paid":
                other.status, other.tracking = "shipped", "in_transit"
        c.lookups.add(("order.list", w.user.id))
    else:
        c.mention_order(o)
    u = w.user.id
    c.identify()
    c.read(o)
    c.safety_reads.add(o.id)  # the cancellation needs the order read only as a safety check
    goals = [
        Goal(
            f"{pre}cancel",
            "order.cancel",
            {"order_id": o.id, "reason": "customer_request"},
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
    what = f"order {o.id}" if named else "my order that has not shipped yet"
    return goals, f"Please cancel {what}, I no longer need it."


def _stock_inquiry(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    p = c.free_product()
    c.frozen.add(p.sku)
    c.mentioned.append(EntityRef("product", p.sku))
    goals = [
        Goal(f"{pre}check", "inventory.check", {"sku": p.sku}, description="check the stock"),
        Goal(
            f"{pre}answer",
            "answer.stock",
            {"sku": p.sku},
            numeric={"quantity": float(p.stock)},
            deps=(f"{pre}check",),
            tolerance=0.0,
            description="tell the customer how many are left",
        ),
    ]
    return goals, f"How many {p.sku} do you still have?"


def _multi_item_return(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "delivered", "delivered"
    while len(o.items) < 3:  # three lines: two of the hinted category, one of another
        extra = c.free_product(exclude=set(o.skus))
        o.items.append(type(o.items[0])(extra.sku, 1, extra.price))
    o.total = round(sum(it.qty * it.price for it in o.items), 2)
    cats = list(c.rng.permutation(CATEGORIES))
    chosen, other = str(cats[0]), str(cats[1])
    back = [it.sku for it in o.items[:2]]
    for it, cat in zip(o.items, (chosen, chosen, other), strict=True):
        p = w.product(it.sku)
        assert p is not None
        p.category = cat
    u = w.user.id
    c.identify()
    c.read(o)
    c.mention_order(o)
    hint = {"category": chosen}
    goals = [
        Goal(
            f"{pre}return",
            "return.create",
            {"order_id": o.id, "item_ids": sorted(back), "reason": "quality"},
            priority=2,
            hints=hint,
            description=f"return both {chosen} items",
        ),
        Goal(
            f"{pre}sms",
            "sms.send",
            {"user_id": u, "template": "return_notice"},
            deps=(f"{pre}return",),
            description="confirm the return",
        ),
    ]
    return goals, f"Both {chosen} items in order {o.id} are faulty, I am sending them back."


def _chargeback_dispute(c: _Ctx, pre: str) -> tuple[list[Goal], str]:
    w, o = c.world, c.free_order()
    o.status, o.tracking = "delivered", "delivered"
    c.identify()
    c.mention_order(o)
    goals = [
        Goal(
            f"{pre}handoff",
            "human.handoff",
            {"user_id": w.user.id, "reason": "risk"},
            priority=3,
            description="a dispute goes to a human",
        )
    ]
    return goals, f"I am filing a chargeback with my bank for order {o.id}."


SIMPLE: dict[str, Family] = {
    "address_error": _address_error,
    "quality_refund": _quality_refund,
    "logistics_exception": _logistics_exception,
    "wrong_item_exchange": _wrong_item_exchange,
    "late_delivery": _late_delivery,
    "cancellation": _cancellation,
    "stock_inquiry": _stock_inquiry,
    "multi_item_return": _multi_item_return,
    "chargeback_dispute": _chargeback_dispute,
}


def generate_task(family: str, task_seed: int) -> tuple[ShopWorld, Task]:
    """Draw the world and the task of ``(family, task_seed)``.

    Returns:
        ``(world, task)``; the world is fresh and owned by the caller.
    """
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng([task_seed, FAMILIES.index(family)])
    subtasks: tuple[str, ...]
    if family == "composite":
        simple = [f for f in SIMPLE if f not in TERMINAL_FAMILIES]
        i, j = rng.choice(len(simple), size=2, replace=False)
        subtasks = (simple[int(i)], simple[int(j)])
    else:
        subtasks = (family,)
    for _ in range(50):
        world = make_world(rng)
        ctx = _Ctx(world, rng, composite=len(subtasks) > 1)
        goals: list[Goal] = []
        texts = []
        for k, fam in enumerate(subtasks):
            pre = f"{'ab'[k]}." if len(subtasks) > 1 else ""
            gs, text = SIMPLE[fam](ctx, pre)
            if len(subtasks) > 1 and k == 0:  # the first issue the customer raised goes first
                gs = [
                    Goal(
                        g.id,
                        g.skill,
                        g.args,
                        g.numeric,
                        g.deps,
                        g.priority + 10,
                        g.tolerance,
                        g.description,
                        g.hints,
                        g.safety_check,
                    )
                    for g in gs
                ]
            goals += gs
            texts.append(text)
        # Two subgoals one call could satisfy would make the optimal step count ambiguous: redraw.
        keys = [(g.skill, tuple(sorted((a, str(v)) for a, v in g.args.items()))) for g in goals]
        if len(set(keys)) == len(keys):
            break
    _check_dag(goals)
    u = world.user
    by_email = family == "stock_inquiry" or rng.random() < 0.7
    facts = {"email": u.email} if by_email else {"name": u.name, "zip": u.zip}
    lookups = {x for x in ctx.lookups if x[0] != "identify"}
    identify = any(x[0] == "identify" for x in ctx.lookups)
    relevant = (
        [u.id]
        + [m.id for m in ctx.mentioned]
        + [
            str(v)
            for g in goals
            for k, v in g.args.items()
            for v in (v if isinstance(v, list) else [v])
            if k in ENTITY_ARGS
        ]
    )
    task = Task(
        family=family,
        seed=int(task_seed),
        request=Request(
            text=" Also, ".join(texts),
            facts=facts,
            mentioned=tuple(dict.fromkeys(ctx.mentioned)),
        ),
        goals=tuple(goals),
        optimal_steps=len(goals) + len(lookups) + int(identify),
        optimal_steps_soft=len(goals)
        + len(lookups)
        + int(identify)
        - sum(g.safety_check for g in goals)
        - len(ctx.safety_reads),
        relevant=tuple(dict.fromkeys(relevant)),
        subtasks=subtasks if family == "composite" else (),
        extra={
            "protected_skus": sorted(ctx.protected),
            "frozen_skus": sorted(ctx.frozen),
            "lookups": sorted(lookups),
            **ctx.extra,
        },
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


def goal_feasible(world: ShopWorld, task: Task, goal: Goal, done: set[str]) -> bool:
    """Whether a pending goal can still be satisfied from this world state (False = unrecoverable)."""
    oid = goal.args.get("order_id")
    o = world.order(oid) if isinstance(oid, str) else None
    s = goal.skill
    if s in ("order.update_address", "order.cancel"):
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
    if s == "return.create":
        return o is not None and o.status in ("delivered", "exchange_pending")
    if s == "coupon.issue":
        return goal.numeric["value"] <= 10.0 * world.user.level + 1e-6
    return True
