"""The simulated shop: one customer session with the customer's orders, the products they touch, and tool health.

The agent sees none of this directly: it learns the customer, orders and products through lookups
(``user.find``, ``order.get``, ``inventory.check``...), and :func:`entity_fields` is the ground truth a full lookup
would reveal now.

Everything is a plain dataclass with a JSON-safe ``to_dict()`` / ``from_dict()``, so a world can travel to an HTTP
skill server and back (``Backend.put_world`` / ``get_world``). Generation is seeded (:func:`make_world`), and
:meth:`ShopWorld.drift` moves stock, balances and tool health a little per tick, so that nothing the policy sees
is static.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from agentic_ray.domains.draws import bits62, small_ints
from agentic_ray.domains.tool_health import (
    DriftingToolHealth,
    ToolHealth,
    draw_tool_health,
    drift_tool_health,
)

CATEGORIES: tuple[str, ...] = ("electronics", "apparel", "home", "beauty")
DEVICES: tuple[str, ...] = ("ios", "android", "web")
ORDER_STATUSES: tuple[str, ...] = ("paid", "shipped", "delivered", "cancelled", "exchange_pending")
TRACKING_STATES: tuple[str, ...] = ("none", "in_transit", "exception", "delivered")
PRICE_BANDS: tuple[tuple[float, float], ...] = ((5.0, 40.0), (40.0, 200.0), (200.0, 1500.0))
"""Price band index → price range."""

ADDRESSES: tuple[str, ...] = (
    "12 Harbour Rd, Shanghai",
    "88 Century Ave, Shanghai",
    "5 Tianfu St, Chengdu",
    "301 Nanjing Rd, Nanjing",
    "17 Binjiang Blvd, Hangzhou",
    "9 Zhongshan Rd, Xiamen",
)
PICKUP_POINT = "Parcel locker #42, community gate"


@dataclass
class User:
    id: str
    level: int  # 1 (new) .. 5 (VIP)
    complaint_rate: float  # complaints per order, historical
    verified: bool  # identity verified (KYC / OTP) in this session
    device: str  # one of DEVICES
    balance: float  # store-credit wallet; refunds land here
    address: str  # profile address (the correct one)
    phone: str
    email: str = ""
    name: str = ""
    zip: str = ""
    coupons: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Product:
    sku: str
    category: str
    stock: int
    price_band: int  # index into PRICE_BANDS
    price: float


@dataclass
class OrderItem:
    sku: str
    qty: int
    price: float


@dataclass
class Order:
    id: str
    user_id: str
    items: list[OrderItem]
    total: float
    status: str  # one of ORDER_STATUSES
    address: str
    refunded: float = 0.0
    tracking: str = "none"  # one of TRACKING_STATES
    days_late: int = 0
    express_ticket: str | None = None
    waybill: str | None = None
    waybill_kind: str | None = None
    exchange_sku: str | None = None
    erp_dirty: bool = False  # changed since the last ERP sync
    erp_version: int = 0
    shipping_fee: float = 5.0
    placed_days_ago: int = 1
    returns: list[dict[str, Any]] = field(default_factory=list)
    revision: int = 0  # bumped when someone else changes the order (an injected stale read, issue 13)

    @property
    def skus(self) -> list[str]:
        return [it.sku for it in self.items]


@dataclass
class Session:
    steps: int = 0
    checked: dict[str, int] = field(default_factory=dict)  # sku → stock seen by inventory.check
    viewed_orders: list[str] = field(default_factory=list)
    read_revisions: dict[str, int] = field(
        default_factory=dict
    )  # order id → revision order.get last returned
    sms: list[dict[str, str]] = field(default_factory=list)
    handoff: dict[str, str] | None = None
    answers: list[dict[str, Any]] = field(default_factory=list)
    counter: int = 0  # id generator for tickets, refunds, messages


@dataclass
class ShopWorld:
    """One customer, their orders, the products involved, tool health, and the session."""

    user: User
    products: list[Product]
    orders: list[Order]
    tool_health: Mapping[str, ToolHealth]  # a DriftingToolHealth: drifted when read
    session: Session = field(default_factory=Session)
    tick: int = 0

    # ------------------------------------------------------------------ lookups
    def product(self, sku: str) -> Product | None:
        for p in self.products:
            if p.sku == sku:
                return p
        return None

    def order(self, order_id: str) -> Order | None:
        for o in self.orders:
            if o.id == order_id:
                return o
        return None

    def next_id(self, prefix: str) -> str:
        self.session.counter += 1
        return f"{prefix}-{self.tick:04d}-{self.session.counter:03d}"

    # ------------------------------------------------------------------ dynamics
    def drift(
        self,
        rng: np.random.Generator,
        protected_skus: frozenset[str] = frozenset(),
        frozen_skus: frozenset[str] = frozenset(),
    ) -> None:
        """One tick of background change: other shoppers buy and restock products; tool health wanders.

        Args:
            rng: the env's RNG (seeded by ``reset``).
            protected_skus: products whose stock must not reach zero (a task depends on them being in stock).
            frozen_skus: products whose stock must not change (the customer is told the number).
        """
        self.tick += 1
        n = len(self.products)
        u = rng.random(n).tolist()
        restock = small_ints(rng, 1, 10, n)  # = rng.integers(1, 10, size=n).tolist(), half the cost
        for p, ui, r in zip(self.products, u, restock, strict=True):
            if p.sku in frozen_skus:
                continue
            if ui < 0.25 and p.stock > (1 if p.sku in protected_skus else 0):
                p.stock -= 1
            elif ui > 0.97:
                p.stock += r
        # Ornstein-Uhlenbeck-style drift: wanders, but reverts to the base (no divergence over long training).
        drift_tool_health(self.tool_health, rng)  # the shared tick: drawn now, applied when read

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        return asdict(replace(self, tool_health=dict(self.tool_health)))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShopWorld:
        orders = []
        for o in d["orders"]:
            o = dict(o)
            o["items"] = [OrderItem(**it) for it in o["items"]]
            orders.append(Order(**o))
        return cls(
            user=User(**d["user"]),
            products=[Product(**p) for p in d["products"]],
            orders=orders,
            tool_health=DriftingToolHealth({k: ToolHealth(**v) for k, v in d["tool_health"].items()}),
            session=Session(**d.get("session", {})),
            tick=int(d.get("tick", 0)),
        )


BASE_TOOL_HEALTH: dict[str, tuple[float, float, float]] = {
    # skill: (mean latency ms, std ms, failure rate). Seed 002: the logistics API takes 820 ± 340 ms.
    "inventory.check": (35.0, 10.0, 0.005),
    "sms.send": (120.0, 40.0, 0.01),
    "order.get": (25.0, 8.0, 0.002),
    "order.update_address": (60.0, 20.0, 0.005),
    "order.cancel": (80.0, 25.0, 0.005),
    "refund.trigger": (150.0, 50.0, 0.01),
    "express.contact": (820.0, 340.0, 0.03),
    "waybill.generate": (200.0, 60.0, 0.01),
    "erp.sync": (300.0, 100.0, 0.01),
    "exchange.create": (140.0, 40.0, 0.01),
    "user.verify": (90.0, 30.0, 0.005),
    "coupon.issue": (50.0, 15.0, 0.005),
    "human.handoff": (500.0, 200.0, 0.0),
    "user.find": (40.0, 12.0, 0.003),
    "lookup_customer_by_name": (60.0, 20.0, 0.003),
    "order.list": (45.0, 15.0, 0.003),
    "return.create": (120.0, 40.0, 0.01),
    "answer.stock": (5.0, 2.0, 0.0),
}

FIRST_NAMES: tuple[str, ...] = (
    "Li Wei",
    "Wang Fang",
    "Zhang Min",
    "Chen Jie",
    "Liu Yang",
    "Zhao Lei",
    "Sun Li",
)
ZIPS: tuple[str, ...] = ("200001", "200120", "610041", "210005", "310002", "361001")


def make_world(rng: np.random.Generator, n_products: int = 8, n_orders: int = 3) -> ShopWorld:
    """A fresh random shop world.

    Args:
        rng: seeded generator.
        n_products: products in the world (each order draws its items from them).
        n_orders: orders of the customer.

    Returns:
        A world whose customer has ``n_orders`` orders over ``n_products`` products.
    """
    # Scalar draws come from a stdlib RNG seeded by ``rng``: same reproducibility, ~10x cheaper per draw.
    r = random.Random(bits62(rng))  # = rng.integers(1 << 62)
    level = r.randint(1, 5)
    user = User(
        id=f"U{r.randint(10_000, 99_999)}",
        level=level,
        complaint_rate=round(r.betavariate(1.2, 8.0), 4),
        verified=r.random() < 0.35,
        device=r.choice(DEVICES),
        balance=round(r.gammavariate(1.5, 20.0 * level), 2),
        address=r.choice(ADDRESSES),
        phone=f"+86-13{r.randint(100_000_000, 999_999_999)}",
    )
    user.verified = False  # identity is verified per session (user.verify)
    user.name = r.choice(FIRST_NAMES)
    user.zip = r.choice(ZIPS)
    user.email = f"{user.name.split()[0].lower()}.{user.id[1:]}@example.com"
    skus = r.sample(range(1000, 9999), n_products)
    products = []
    for i in range(n_products):
        u = r.random()
        band = 0 if u < 0.45 else (1 if u < 0.85 else 2)
        lo, hi = PRICE_BANDS[band]
        u = r.random()
        stock = 0 if u < 0.1 else (r.randint(1, 7) if u < 0.3 else r.randint(20, 399))
        products.append(
            Product(
                sku=f"SKU{skus[i]}",
                category=r.choice(CATEGORIES),
                stock=stock,
                price_band=band,
                price=round(r.uniform(lo, hi), 2),
            )
        )
    orders = []
    for j in range(n_orders):
        idx = r.sample(range(n_products), r.randint(1, 3))
        items = [OrderItem(products[i].sku, r.randint(1, 2), products[i].price) for i in idx]
        total = round(sum(it.qty * it.price for it in items), 2)
        u = r.random()
        status = "paid" if u < 0.3 else ("shipped" if u < 0.65 else "delivered")
        orders.append(
            Order(
                id=f"O{r.randint(100_000, 999_998)}{j}",
                user_id=user.id,
                items=items,
                total=total,
                status=status,
                address=user.address,
                tracking={"paid": "none", "shipped": "in_transit", "delivered": "delivered"}[status],
                shipping_fee=round(r.uniform(3.0, 9.9), 2),
                placed_days_ago=r.randint(1, 40),
            )
        )
    # The tool health is the last thing ``r`` draws, so it is drawn when first read (see DriftingToolHealth).
    health = DriftingToolHealth(
        draw=functools.partial(draw_tool_health, r, BASE_TOOL_HEALTH), size=len(BASE_TOOL_HEALTH)
    )
    return ShopWorld(user=user, products=products, orders=orders, tool_health=health)


def entity_fields(world: ShopWorld, entity_type: str, entity_id: str) -> dict[str, Any] | None:
    """What a full lookup of one entity would reveal now (the field names of the contracts' outputs)."""
    if entity_type == "user":
        u = world.user
        if u.id != entity_id:
            return None
        return {
            "level": u.level,
            "verified": u.verified,
            "complaint_rate": u.complaint_rate,
            "balance": u.balance,
            "device": u.device,
        }
    if entity_type == "order":
        o = world.order(entity_id)
        if o is None:
            return None
        return {
            "user_id": o.user_id,
            "status": o.status,
            "total": o.total,
            "refunded": o.refunded,
            "tracking": o.tracking,
            "days_late": o.days_late,
            "shipping_fee": o.shipping_fee,
            "placed_days_ago": o.placed_days_ago,
            "revision": o.revision,
            "items": o.skus,
        }
    if entity_type == "product":
        p = world.product(entity_id)
        if p is None:
            return None
        return {"price": p.price, "category": p.category, "stock": p.stock, "in_stock": p.stock > 0}
    return None


def entity_ids(world: ShopWorld, entity_type: str) -> list[str]:
    """Every id of a type in the world."""
    if entity_type == "user":
        return [world.user.id]
    if entity_type == "order":
        return [o.id for o in world.orders]
    if entity_type == "product":
        return [p.sku for p in world.products]
    return []


def perturb_shop(world: ShopWorld, rng: np.random.Generator) -> ShopWorld:
    """Changes two to four hidden values of ``world`` in place (see ``EcommerceDomain.perturb_hidden``); returns it."""

    def other(choices: tuple[Any, ...], now: Any) -> Any:
        rest = [c for c in choices if c != now]
        return rest[int(rng.integers(len(rest)))]

    def order_total(o: Order) -> None:
        o.total = round(o.total * float(rng.uniform(1.2, 2.0)), 2)

    def order_status(o: Order) -> None:
        o.status = other(ORDER_STATUSES, o.status)

    def order_tracking(o: Order) -> None:
        o.tracking = other(TRACKING_STATES, o.tracking)

    def product_price(p: Product) -> None:
        p.price = round(p.price * float(rng.uniform(1.2, 2.0)), 2)

    def product_stock(p: Product) -> None:
        p.stock = p.stock + int(rng.integers(5, 50))

    u = world.user
    edits: list[Any] = [
        lambda: setattr(u, "level", other((1, 2, 3, 4, 5), u.level)),
        lambda: setattr(u, "complaint_rate", round(float(rng.uniform(0.3, 0.9)), 4)),
        lambda: setattr(u, "balance", round(u.balance + float(rng.uniform(10.0, 200.0)), 2)),
    ]
    for o in world.orders:
        edits += [lambda o=o, f=f: f(o) for f in (order_total, order_status, order_tracking)]
    for p in world.products:
        edits += [lambda p=p, f=f: f(p) for f in (product_price, product_stock)]
    for i in rng.choice(len(edits), size=int(rng.integers(2, 5)), replace=False):
        edits[int(i)]()
    return world
