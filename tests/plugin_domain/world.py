"""The simulated shop of the plug-in domain: one customer, their payment methods, orders and items.

Written as a third-party package would write it: plain dataclasses with ``to_dict``/``from_dict`` (so a world can
travel to a skill server), and the ground truth a full lookup reveals (:func:`entity_fields`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.protocol import ToolError

TIERS: tuple[str, ...] = ("basic", "gold")
PAYMENT_KINDS: tuple[str, ...] = ("credit_card", "gift_card", "paypal")
ORDER_STATUSES: tuple[str, ...] = ("pending", "processed", "delivered", "cancelled")
ITEM_STATUSES: tuple[str, ...] = ("normal", "refunded", "returned")
CATEGORIES: tuple[str, ...] = ("shirt", "shoes", "lamp", "book")
CASE_OUTCOMES: tuple[str, ...] = ("resolved", "not_cancellable")
CANCEL_REASONS: tuple[str, ...] = ("no_longer_needed", "ordered_by_mistake")
ENTITY_TYPES: tuple[str, ...] = ("customer", "payment_method", "order", "item")
QUESTIONS: dict[str, tuple[str, ...]] = {
    "express_fee": ("yes", "no"),
    "refund_to": ("credit_card", "gift_card"),
}
"""What the agent may ask the customer (``ask_customer:`` in ``skills.yaml``) and the answers."""
EXPRESS_FEE = 9.5


@dataclass
class PaymentMethod:
    id: str
    kind: str  # one of PAYMENT_KINDS
    balance: float


@dataclass
class Item:
    id: str
    category: str  # one of CATEGORIES
    price: float
    status: str = "normal"  # one of ITEM_STATUSES


@dataclass
class Order:
    id: str
    status: str  # one of ORDER_STATUSES
    paid_with: str  # a payment method id
    items: list[Item]
    cancel_reason: str = ""
    address: str = ""  # where it ships (a text field: string arguments copy it once a lookup revealed it)
    tracking: str = ""  # the carrier's tracking number (an answer copies it)
    shipping: str = "standard"  # or "express"

    @property
    def total(self) -> float:
        return round(sum(i.price for i in self.items), 2)


@dataclass
class Customer:
    id: str
    email: str
    tier: str  # one of TIERS
    payment_methods: list[PaymentMethod]
    orders: list[Order]


@dataclass
class RetailWorld:
    """The world: the customer and what they own; ``refunds`` and ``case`` record what the tools did."""

    customer: Customer
    refunds: list[dict[str, Any]] = field(default_factory=list)
    case: str = ""  # the outcome the case was closed with, "" while open
    answers: dict[str, str] = field(default_factory=dict)
    """The simulated customer's mind: ``"<question>:<order id>" -> answer`` (hidden until asked)."""

    def answer_customer(self, question: str, about: str) -> str | None:
        """The simulated customer (the ``ask_customer`` hook): what they decided; never an express fee they did not
        ask about, the default (the first option) for any other question. An order they do not have is NOT_FOUND."""
        if self.order(about) is None:
            raise ToolError("NOT_FOUND", f"the customer has no order {about}")
        return self.answers.get(f"{question}:{about}", "no" if question == "express_fee" else None)

    def order(self, oid: str) -> Order | None:
        return next((o for o in self.customer.orders if o.id == oid), None)

    def item(self, iid: str) -> tuple[Order, Item] | None:
        return next(((o, i) for o in self.customer.orders for i in o.items if i.id == iid), None)

    def payment_method(self, pid: str) -> PaymentMethod | None:
        return next((p for p in self.customer.payment_methods if p.id == pid), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RetailWorld:
        c = d["customer"]
        customer = Customer(
            id=c["id"],
            email=c["email"],
            tier=c["tier"],
            payment_methods=[PaymentMethod(**p) for p in c["payment_methods"]],
            orders=[Order(**{**o, "items": [Item(**i) for i in o["items"]]}) for o in c["orders"]],
        )
        return cls(customer, [dict(r) for r in d["refunds"]], d["case"], dict(d.get("answers", {})))

    def state(self) -> tuple[Any, ...]:
        """What ``end: world_state`` tasks are judged on: order and item statuses, refunds, the closed case."""
        orders = tuple((o.id, o.status, tuple(i.status for i in o.items)) for o in self.customer.orders)
        return orders, len(self.refunds), self.case


STREETS: tuple[str, ...] = ("Elm St", "Oak Ave", "Pine Rd", "Lake Dr", "Hill Ln")


def shipping_of(oid: str) -> tuple[str, str]:
    """An order's address and tracking number, derived from its id (no draw: older families' worlds stay)."""
    n = int(oid[2:])
    return f"{n % 900 + 100} {STREETS[n % len(STREETS)]}, Springfield", f"1Z{n * 7919 % 10**10:010d}"


def make_world(rng: np.random.Generator, items_per_order: int) -> RetailWorld:
    """A customer with two or three payment methods and three orders of ``items_per_order`` items each."""
    cid = f"cust_{int(rng.integers(10_000, 99_999))}"
    kinds = list(PAYMENT_KINDS[: 2 + int(rng.integers(0, 2))])
    pms = [
        PaymentMethod(f"{k}_{int(rng.integers(1000, 9999))}", k, round(float(rng.uniform(0, 500)), 2))
        for k in kinds
    ]
    orders = []
    for j in range(3):
        oid = f"#W{int(rng.integers(100_000, 999_999))}{j}"
        cats = rng.permutation(len(CATEGORIES))[:items_per_order]
        items = [
            Item(f"item_{oid[2:]}_{n}", CATEGORIES[int(c)], round(float(rng.uniform(10, 200)), 2))
            for n, c in enumerate(cats)
        ]
        status = ORDER_STATUSES[int(rng.integers(0, 3))]
        orders.append(Order(oid, status, pms[int(rng.integers(len(pms)))].id, items))
        orders[-1].address, orders[-1].tracking = shipping_of(oid)
    email = f"{cid.replace('_', '.')}@example.com"
    return RetailWorld(Customer(cid, email, TIERS[int(rng.integers(2))], pms, orders))


def entity_ids(world: RetailWorld, entity_type: str) -> list[str]:
    c = world.customer
    if entity_type == "customer":
        return [c.id]
    if entity_type == "payment_method":
        return [p.id for p in c.payment_methods]
    if entity_type == "order":
        return [o.id for o in c.orders]
    if entity_type == "item":
        return [i.id for o in c.orders for i in o.items]
    raise KeyError(entity_type)


def entity_fields(world: RetailWorld, entity_type: str, entity_id: str) -> dict[str, Any] | None:
    """The fields a full lookup reveals now (ground truth)."""
    c = world.customer
    if entity_type == "customer":
        return {"tier": c.tier} if entity_id == c.id else None
    if entity_type == "payment_method":
        p = world.payment_method(entity_id)
        return None if p is None else {"kind": p.kind, "balance": p.balance}
    if entity_type == "order":
        o = world.order(entity_id)
        if o is None:
            return None
        return {"status": o.status, "total": o.total, "address": o.address, "tracking": o.tracking}
    if entity_type == "item":
        hit = world.item(entity_id)
        return (
            None
            if hit is None
            else {"price": hit[1].price, "status": hit[1].status, "category": hit[1].category}
        )
    return None
