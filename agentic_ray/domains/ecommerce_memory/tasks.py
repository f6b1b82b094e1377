"""E-commerce tasks where memory matters: the customer refers to what they told the shop in an earlier conversation,
or earlier in this one.

``order_from_last_time``: "Please cancel the order with the blender whose box arrived crushed; I told you about it
last time." The customer has two or three unshipped orders, each holding the same kind of product (similar
products: one category, the same word), alike in what a listing shows; each was the subject of an earlier
conversation about a different problem, and only the one about the problem the customer names now is recent. The
earlier conversations sit in long-term memory, in the customer's namespace; another customer's look-alike memory
(the same words, that customer's own order) sits in another namespace. A ``memory.search`` with the customer's
words (request fact ``recall``) reveals the remembered orders with their ``memory_score`` and ``memory_age_h``; the
meant one is the best hit. The goals are the cancellation's: read the order (the cancellation's safety read),
cancel it, sync the ERP, confirm by SMS. Once the search has said which order is meant, the agent writes that to
memory (``memory.write``: the customer's words, the order). The key fact: slot ``order_id``, the meant order,
stated before this conversation (turn 0), first needed by the read (turn 3 of the optimal plan: identify, recall,
write, read, cancel, sync, SMS), last confirmed when that earlier conversation took place (negative hours).

``order_said_earlier``: "My orders O1, O2 and O3 have not shipped yet; O2 is the one with the blender whose box
arrived crushed. First, order O4 came with the wrong item, I ordered SKU1234. After that, please cancel the order
with the blender whose box arrived crushed." The customer names two or three unshipped orders, alike in what a
lookup shows (each holds the same kind of product; named in random order), and says which one they mean. The
cancellation depends on the exchange of the wrong item first (check the right item's stock, create the exchange,
book the return pickup, issue the waybill, confirm: five calls on another order), so the meant order is needed 8
turns after the customer named it, and the task's short-term window
(:data:`~agentic_ray.memory.short_term_window.DEFAULT_K` = 6 turns) has dropped the request by then: the named
orders stay known, but nothing in the observation says which one is meant any more. Only memory does, if the agent
wrote it while the request named it. Long-term memory holds distractors: earlier conversations about the other
named orders (other problems with the same kind of product), an older, delivered order of the same customer about
the very problem the customer names now (its words, 700 hours old), and another customer's order filed under
exactly the customer's words (another namespace). The key fact: slot ``order_id``, stated at turn 0, needed by the
read (turn 8 of the optimal plan: identify, write, check, exchange, pickup, waybill, SMS, recall, read, cancel,
sync, SMS), confirmed at the start of this conversation; its ``distractors`` are the other named orders and the
older one, so the exchange's calls on the wrong item's order are not uses of it (neither recall nor forgetting).

``same_place_as_last_time``: "The address on order O1 is wrong: please send it to the same place as my last
parcel." An address preference from an earlier conversation: the parcel locker or the profile address, which the
request does not state (a hidden goal argument) and memory holds about the customer's earlier orders, beside an
older, different preference (see :func:`_same_place_as_last_time`).

Validation seeds are a fixed range disjoint from training (the e-commerce convention).
"""

from __future__ import annotations

import random

import numpy as np

from agentic_ray.domains.ecommerce.tasks import SIMPLE, _Ctx
from agentic_ray.domains.ecommerce.world import ADDRESSES, Order, ShopWorld, make_world
from agentic_ray.domains.ecommerce_memory.world import DELIVERED_TO, ShopMemoryWorld
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.protocol import EntityRef, Request, Task
from agentic_ray.memory.memory_world import earlier_memories, key_fact, memory_record, with_memory
from agentic_ray.memory.short_term_window import DEFAULT_K

FAMILIES: tuple[str, ...] = ("order_from_last_time", "order_said_earlier", "same_place_as_last_time")

RECALL_FACT = "recall"
"""Request fact holding the customer's words about what they mean (a memory search's query, a note)."""

ITEMS: tuple[str, ...] = ("blender", "desk lamp", "pair of headphones", "rice cooker")
"""Kinds of product a customer may have ordered several times (similar products, one category)."""
ISSUES: tuple[tuple[str, str], ...] = (
    # (what the customer said in the earlier conversation, how they refer to it now)
    ("The box with my {item} arrived crushed.", "the {item} whose box arrived crushed"),
    ("I was charged twice for the {item}.", "the {item} I was charged twice for"),
    ("The {item} I ordered is listed in the wrong colour.", "the {item} listed in the wrong colour"),
    ("The {item} was sent to my old address.", "the {item} that was sent to my old address"),
    ("The seller said the {item} would take a month to arrive.", "the {item} that would take a month"),
)
RECENT_H = (2.0, 20.0)
"""Hours before this conversation that the meant order was last talked about."""
OLDER_H = (100.0, 600.0)
"""Hours before this conversation of the other conversations (older distractors)."""
PLACES: dict[str, tuple[str, ...]] = {
    # what the customer said when they asked for an earlier parcel to go there, per address source
    "pickup_point": (
        "Please leave the parcel with my {item} in the parcel locker at the community gate.",
        "I would rather pick up the {item} from the parcel locker by the gate.",
    ),
    "profile": (
        "Please deliver the {item} to my home address, not the locker.",
        "Send the {item} to the address in my profile, I will be at home.",
    ),
}
SAME_PLACE = "the same place as my last parcel"
"""How the customer refers to the address they want now (the memory search's query)."""
OLD_ORDER_H = 700.0
"""Age of the conversation about the older order with the same problem (order_said_earlier)."""


def generate_task(family: str, seed: int) -> tuple[ShopMemoryWorld, Task]:
    """Draw the world (with its memory) and the task of ``(family, seed)``."""
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng([seed, 9_000 + FAMILIES.index(family)])
    r = random.Random(int(rng.integers(1 << 62)))
    n_alike = r.choice((2, 3))
    n_orders = n_alike + 2 if family == "order_said_earlier" else 3  # + the wrong item's, + the older one
    base = make_world(rng, n_orders=n_orders)
    w = with_memory(ShopMemoryWorld, base, {"customer": base.user.id, "conversation": f"{family}/{seed}"})
    make = {
        "order_from_last_time": _order_from_last_time,
        "order_said_earlier": _order_said_earlier,
        "same_place_as_last_time": _same_place_as_last_time,
    }[family]
    return w, make(w, rng, r, family, int(seed), n_alike)


def _alike(w: ShopWorld, orders: list[Order]) -> None:
    """Make ``orders`` alike in what a listing or a read shows but for ids, dates and amounts: unshipped, and each
    with a product of one category first (the kind of item the customer names)."""
    first = w.product(orders[0].items[0].sku)
    assert first is not None
    for o in orders:
        o.status, o.tracking, o.refunded, o.days_late = "paid", "none", 0.0, 0
        p = w.product(o.items[0].sku)
        assert p is not None
        p.category = first.category


def _cancel_goals(user: str, order: str, after: tuple[str, ...]) -> list[Goal]:
    return [
        Goal(
            "cancel",
            "order.cancel",
            {"order_id": order, "reason": "customer_request"},
            deps=after,
            priority=2,
        ),
        Goal("erp", "erp.sync", {"order_id": order}, deps=("cancel",), description="sync the ERP"),
        Goal(
            "sms",
            "sms.send",
            {"user_id": user, "template": "cancel_notice"},
            deps=("erp",),
            description="confirm the cancellation",
        ),
    ]


def _identity(w: ShopWorld, r: random.Random) -> dict[str, str]:
    u = w.user
    return {"email": u.email} if r.random() < 0.7 else {"name": u.name, "zip": u.zip}


def _other_customer(w: ShopWorld, r: random.Random) -> tuple[str, str]:
    """Another customer's id and one of their order ids (not in this world: another namespace)."""
    return f"U{r.randint(10_000, 99_999)}", f"O{r.randint(100_000, 999_998)}9"


def _order_from_last_time(
    w: ShopMemoryWorld, rng: np.random.Generator, r: random.Random, family: str, seed: int, n: int
) -> Task:
    u, item = w.user, r.choice(ITEMS)
    same = w.orders[:n]
    _alike(w, same)
    for o in w.orders[n:]:  # any other order has shipped: not one the customer could cancel
        o.status, o.tracking = "shipped", "in_transit"
    target = same[r.randrange(n)]
    issues = r.sample(ISSUES, n)
    at_target = -round(r.uniform(*RECENT_H), 2)
    said_then = [(o.id, said.format(item=item)) for o, (said, _) in zip(same, issues, strict=True)]
    w.history += earlier_memories(
        u.id, f"{family}/{seed}/earlier", "order", said_then, r, OLDER_H, {target.id: at_target}
    )
    said, refer = issues[same.index(target)]
    other, theirs = _other_customer(w, r)
    w.history.append(
        memory_record(other, f"{family}/{seed}/other", said.format(item=item), "order", theirs, at_target)
    )
    recall = refer.format(item=item)
    fact = key_fact("order_id", target.id, 3, at_target, [o.id for o in same if o is not target])
    return Task(
        family=family,
        seed=seed,
        request=Request(
            text=f"Please cancel the order with {recall}; I told you about it last time.",
            facts={**_identity(w, r), RECALL_FACT: recall},
        ),
        goals=tuple(_cancel_goals(u.id, target.id, ())),
        optimal_steps=7,  # identify, recall, write, read, cancel, sync, SMS
        optimal_steps_soft=6,  # the read is the cancellation's safety read
        relevant=(u.id, target.id, target.items[0].sku),  # the item the customer names, seen on the read
        extra={"lookups": [("memory.search", u.id), ("order.get", target.id)]},
        key_facts=(fact,),
    )


def _order_said_earlier(
    w: ShopMemoryWorld, rng: np.random.Generator, r: random.Random, family: str, seed: int, n: int
) -> Task:
    u, item = w.user, r.choice(ITEMS)
    # the wrong item's order first (the e-commerce family's own goals), then the named orders, then the older one
    ctx = _Ctx(w, rng)
    exchange, exchange_text = SIMPLE["wrong_item_exchange"](ctx, "x.")
    wrong = w.orders[0]
    named, old = w.orders[1 : 1 + n], w.orders[1 + n]
    _alike(w, [*named, old])
    old.status, old.tracking, old.placed_days_ago = "delivered", "delivered", 40
    meant = r.randrange(n)
    target = named[meant]
    issues = r.sample(ISSUES, n)
    said, refer = issues[meant]
    recall = refer.format(item=item)
    # long-term memory: earlier conversations about the other named orders, the older order with the same
    # problem, and another customer's order filed under the very words the customer uses now
    said_then = [(o.id, other.format(item=item)) for o, (other, _) in zip(named, issues, strict=True)]
    w.history += earlier_memories(
        u.id, f"{family}/{seed}/earlier", "order", said_then, r, OLDER_H, {target.id: None}
    )
    w.history.append(
        memory_record(u.id, f"{family}/{seed}/older", said.format(item=item), "order", old.id, -OLD_ORDER_H)
    )
    other, theirs = _other_customer(w, r)
    w.history.append(memory_record(other, f"{family}/{seed}/other", recall, "order", theirs, -1.0))
    order = r.sample(named, n)  # the order the customer names them in says nothing
    goals = [*exchange, *_cancel_goals(u.id, target.id, (exchange[-1].id,))]
    # identify, write, the exchange's five calls, recall, read, cancel, sync, SMS
    optimal = 4 + len(goals)
    ids = ", ".join(o.id for o in order[:-1]) + f" and {order[-1].id}"
    text = (
        f"My orders {ids} have not shipped yet; {target.id} is the one with {recall}. First, {exchange_text[0].lower()}"
        f"{exchange_text[1:]} After that, please cancel the order with {recall}."
    )
    # needed by the read; the look-alikes: the other named orders and the older one (the wrong item's order is
    # another request)
    fact = key_fact("order_id", target.id, optimal - 4, 0.0, [o.id for o in [*named, old] if o is not target])
    assert wrong.id in {m.id for m in ctx.mentioned}
    return Task(
        family=family,
        seed=seed,
        request=Request(
            text=text,
            facts={**_identity(w, r), RECALL_FACT: recall},
            mentioned=(*(EntityRef("order", o.id) for o in order), *ctx.mentioned),
        ),
        goals=tuple(goals),
        optimal_steps=optimal,
        optimal_steps_soft=optimal - 2,  # the stock check and the cancellation's read are safety checks
        relevant=(u.id, target.id, target.items[0].sku, *(m.id for m in ctx.mentioned)),
        extra={
            "protected_skus": sorted(ctx.protected),
            "frozen_skus": [],
            "lookups": [("memory.search", u.id), ("order.get", target.id)],
        },
        key_facts=(fact,),
        short_term_window=DEFAULT_K,
    )


def _same_place_as_last_time(
    w: ShopMemoryWorld, rng: np.random.Generator, r: random.Random, family: str, seed: int, n: int
) -> Task:
    """``same_place_as_last_time``: "The address on order O1 is wrong: please send it to the same place as my last
    parcel." The customer's two earlier orders went to different places (one to the parcel locker, one to the
    profile address, in random order); the conversation about the more recent one is recent (2-20 h), the other old
    (100-600 h: the older address preference, a distractor), and another customer's conversation with the other
    preference sits in another namespace. The address source is a goal argument the request does not state
    (``Goal.hidden_args``): only memory says it, a search revealing what memory holds about the earlier orders
    (``order_recalled``: ``delivered_to``) beside their hits' ages. The goals are the address fix's: verify, change the
    address, sync, confirm. The key fact: slot ``source`` (a value, not an entity), needed by the address change
    (turn 3 of the optimal plan: identify, verify, recall, change, sync, SMS), its distractor the other source."""
    u, item = w.user, r.choice(ITEMS)
    o, earlier = w.orders[0], w.orders[1:3]
    o.status, o.tracking = "paid", "none"
    o.address = next(a for a in ADDRESSES if a != u.address)
    for e in earlier:
        e.status, e.tracking = "delivered", "delivered"
    sources = r.sample(list(PLACES), 2)  # the recent conversation's source first
    at = [-round(r.uniform(*RECENT_H), 2), -round(r.uniform(*OLDER_H), 2)]
    for i, (e, src, at_h) in enumerate(zip(earlier, sources, at, strict=True)):
        said = r.choice(PLACES[src]).format(item=item)
        w.history.append(
            memory_record(
                u.id, f"{family}/{seed}/earlier-{i}", said, "order", e.id, at_h, {DELIVERED_TO: src}
            )
        )
    other, theirs = _other_customer(w, r)
    said = r.choice(PLACES[sources[1]]).format(item=item)
    w.history.append(
        memory_record(
            other, f"{family}/{seed}/other", said, "order", theirs, -1.0, {DELIVERED_TO: sources[1]}
        )
    )
    source = sources[0]
    goals = [
        Goal("verify", "user.verify", {"user_id": u.id}, description="verify the customer"),
        Goal(
            "address",
            "order.update_address",
            {"order_id": o.id, "source": source},
            deps=("verify",),
            hidden_args=("source",),
            description="send it where the last parcel went",
        ),
        Goal("erp", "erp.sync", {"order_id": o.id}, deps=("address",), description="sync the ERP"),
        Goal(
            "sms",
            "sms.send",
            {"user_id": u.id, "template": "address_confirm"},
            deps=("erp",),
            description="confirm by SMS",
        ),
    ]
    fact = key_fact("source", source, 3, at[0], [sources[1]])
    return Task(
        family=family,
        seed=seed,
        request=Request(
            text=f"The address on order {o.id} is wrong: please send it to {SAME_PLACE}.",
            facts={**_identity(w, r), RECALL_FACT: SAME_PLACE},
            mentioned=(EntityRef("order", o.id),),
        ),
        goals=tuple(goals),
        optimal_steps=6,  # identify, verify, recall, change the address, sync, SMS
        relevant=(u.id, o.id, *(e.id for e in earlier)),
        extra={"lookups": [("memory.search", u.id)]},
        key_facts=(fact,),
    )


def sentences() -> list[str]:
    """Every sentence the families write to memory or search it with."""
    places = [x for said in PLACES.values() for x in said]
    return [x.format(item=i) for i in ITEMS for x in (*(x for pair in ISSUES for x in pair), *places)] + [
        SAME_PLACE
    ]
