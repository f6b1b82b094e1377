"""Task families of the plug-in domain, its options schema, and the seeds.

A family is a builder in :data:`BUILDERS` (``_Ctx -> _Spec``), so another family is one more function: the
world, the request and the goal DAG are built there, the rest (facts, relevance, validation) is shared.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from agentic_ray.domains.protocol import EntityRef, Goal, Request, Task
from tests.plugin_domain.world import CANCEL_REASONS, QUESTIONS, Item, RetailWorld, make_world

VALIDATION_SEED_BASE = 1_000_000
"""Task seeds at or above this value are validation seeds; training draws below it."""


class RetailOptions(BaseModel):
    """The domain's options (``env.domain_options``)."""

    model_config = ConfigDict(extra="forbid")

    items_per_order: int = Field(default=2, ge=1, le=4, description="Items in each of the customer's orders.")
    refund_to: Literal["requested", "original"] = Field(
        default="requested",
        description="Judging regime of refunds: to the payment method the customer asks for, or always back to "
        "the one the order was paid with (the request then asks for that).",
    )


@dataclass
class _Ctx:
    world: RetailWorld
    rng: np.random.Generator
    options: RetailOptions


@dataclass
class _Spec:
    text: str
    goals: tuple[Goal, ...]
    mentioned: tuple[EntityRef, ...]
    relevant: tuple[str, ...]
    optimal_steps: int
    end: Literal["goals", "world_state"] = "goals"
    end_skill: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, str | tuple[str, ...]] | None = None  # None: the customer's email


def _pick(ctx: _Ctx, n: int) -> int:
    return int(ctx.rng.integers(n))


def refund_item(ctx: _Ctx) -> _Spec:
    """Refund one item of a delivered order to a payment method (membership preconditions, keyed outputs)."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "delivered"
    item = o.items[_pick(ctx, len(o.items))]
    if ctx.options.refund_to == "original":
        pm = next(p for p in c.payment_methods if p.id == o.paid_with)
        where = f"back to the {pm.kind.replace('_', ' ')} I paid with"
    else:
        pm = c.payment_methods[_pick(ctx, len(c.payment_methods))]
        where = f"to my {pm.kind.replace('_', ' ')}"
    args = {"customer_id": c.id, "order_id": o.id, "item_id": item.id, "payment_method_id": pm.id}
    goal = Goal(
        "refund",
        "refund_item",
        args=args,
        numeric={"amount": item.price},
        description="refund the item",
        hints={"category": item.category, "kind": pm.kind},
    )
    text = f"Hi, this is {c.email}. Please refund the {item.category} from order {o.id} {where}."
    return _Spec(text, (goal,), (EntityRef("order", o.id),), (c.id, o.id, item.id, pm.id), 3)


def refund_items(ctx: _Ctx) -> _Spec:
    """Refund two items of a delivered order, each to a payment method the customer names for it (a list paired by
    position with another, whose members may repeat: the goal matches the pairs, in any order)."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "delivered"
    if len(o.items) < 2:
        o.items.append(Item(f"item_{o.id[2:]}_x", "book", round(float(ctx.rng.uniform(10, 200)), 2)))
    items = [o.items[int(j)] for j in ctx.rng.permutation(len(o.items))[:2]]
    pms = [c.payment_methods[_pick(ctx, len(c.payment_methods))] for _ in items]
    goal = Goal(
        "refunds",
        "refund_items",
        args={
            "customer_id": c.id,
            "order_id": o.id,
            "item_ids": [i.id for i in items],
            "payment_method_ids": [p.id for p in pms],
        },
        description="refund both items",
        hints={"category": items[0].category, "kind": pms[0].kind},
    )
    what = " and ".join(
        f"the {i.category} ({i.id}) to my {p.kind.replace('_', ' ')}" for i, p in zip(items, pms, strict=True)
    )
    text = f"Hi, this is {c.email}. Please refund {what}, from order {o.id}."
    mentioned = (EntityRef("order", o.id), *(EntityRef("item", i.id) for i in items))
    return _Spec(text, (goal,), mentioned, (c.id, o.id, *(i.id for i in items), *(p.id for p in pms)), 3)


def return_items(ctx: _Ctx) -> _Spec:
    """Return one or two items of a delivered order, named by id (a list member that must belong to the order:
    the items are known from the start, the mask allows them once the order is read)."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "delivered"
    n = min(len(o.items), 1 + _pick(ctx, 2))
    items = [o.items[int(j)] for j in sorted(ctx.rng.permutation(len(o.items))[:n])]
    goal = Goal(
        "return",
        "return_items",
        args={"customer_id": c.id, "order_id": o.id, "item_ids": [i.id for i in items]},
        description="start the return",
        hints={"category": items[0].category},
    )
    what = " and ".join(f"the {i.category} ({i.id})" for i in items)
    text = f"Hi, this is {c.email}. I want to return {what} from order {o.id}."
    mentioned = (EntityRef("order", o.id), *(EntityRef("item", i.id) for i in items))
    return _Spec(text, (goal,), mentioned, (c.id, o.id, *(i.id for i in items)), 3)


def cancel_order(ctx: _Ctx) -> _Spec:
    """Cancel a pending order (membership of the order in the customer's listed orders, keyed by id)."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "pending"
    reason = CANCEL_REASONS[_pick(ctx, len(CANCEL_REASONS))]
    goal = Goal(
        "cancel",
        "cancel_order",
        args={"customer_id": c.id, "order_id": o.id, "reason": reason},
        description="cancel the order",
    )
    text = f"Hi, this is {c.email}. Please cancel order {o.id}, {reason.replace('_', ' ')}."
    return _Spec(text, (goal,), (EntityRef("order", o.id),), (c.id, o.id), 3)


def no_change(ctx: _Ctx) -> _Spec:
    """The customer asks to cancel an order that has already shipped: nothing may change; the case is closed
    telling them so. No goal: the task declares its end (``close_case``) and is judged on the final world."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "delivered"
    gold = ctx.world.state()
    text = f"Hi, this is {c.email}. Please cancel order {o.id}."
    extra = {"gold_state": json.dumps([gold[0], gold[1], "not_cancellable"])}
    return _Spec(text, (), (EntityRef("order", o.id),), (c.id, o.id), 2, "world_state", "close_case", extra)


def _ask(question: str, order_id: str) -> Goal:
    """The goal of asking the customer ``question`` about the order (the goals after it depend on the answer)."""
    return Goal(
        "ask", "ask_customer", args={"question": question, "order_id": order_id}, description=question
    )


def expedite_order(ctx: _Ctx) -> _Spec:
    """The customer asks for express shipping of a pending order, which costs a fee: the agent must ask whether they
    agree before it charges (``expedite_order`` requires ``ask_customer`` answered yes). On yes the order is
    expedited; on no the case is closed with nothing charged. Both branches are goals conditional on the answer,
    and take as many steps (the budget the policy sees must not tell the answer)."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "pending"
    answer = QUESTIONS["express_fee"][_pick(ctx, 2)]
    ctx.world.answers[f"express_fee:{o.id}"] = answer
    goals = (
        _ask("express_fee", o.id),
        Goal(
            "expedite",
            "expedite_order",
            args={"customer_id": c.id, "order_id": o.id},
            deps=("ask",),
            on_answer=("ask", "yes"),
            description="ship it express",
        ),
        Goal(
            "close",
            "close_case",
            args={"customer_id": c.id, "outcome": "resolved"},
            deps=("ask",),
            on_answer=("ask", "no"),
            description="leave it as it is",
        ),
    )
    text = f"Hi, this is {c.email}. Could order {o.id} ship express instead? What would it cost?"
    return _Spec(text, goals, (EntityRef("order", o.id),), (c.id, o.id), 3)


def refund_choice(ctx: _Ctx) -> _Spec:
    """Refund an item of a delivered order where the customer chooses: to their credit card or to a gift card. The
    request does not say; the agent asks (``refund_to``), and the refund goal of the chosen option is the one that
    stays (the other is conditional on the other answer)."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "delivered"
    item = o.items[_pick(ctx, len(o.items))]
    options = QUESTIONS["refund_to"]
    ctx.world.answers[f"refund_to:{o.id}"] = options[_pick(ctx, len(options))]
    pms = {k: next(p for p in c.payment_methods if p.kind == k) for k in options}
    refunds = tuple(
        Goal(
            f"refund_{k}",
            "refund_item",
            args={"customer_id": c.id, "order_id": o.id, "item_id": item.id, "payment_method_id": pms[k].id},
            numeric={"amount": item.price},
            deps=("ask",),
            on_answer=("ask", k),
            description=f"refund the item to the {k}",
            hints={"category": item.category, "kind": k},
        )
        for k in options
    )
    text = f"Hi, this is {c.email}. Please refund the {item.category} from order {o.id}."
    relevant = (c.id, o.id, item.id, *(p.id for p in pms.values()))
    return _Spec(text, (_ask("refund_to", o.id), *refunds), (EntityRef("order", o.id),), relevant, 4)


def ship_like_other(ctx: _Ctx) -> _Spec:
    """Ship a pending order to the address of another order: the address is copied from the other order once its
    lookup revealed it (a string argument copying a revealed field, ``source: order.address``)."""
    c = ctx.world.customer
    j = _pick(ctx, len(c.orders))
    o, other = c.orders[j], c.orders[(j + 1 + _pick(ctx, len(c.orders) - 1)) % len(c.orders)]
    o.status = "pending"
    if o.address == other.address:
        o.address = "PO Box " + o.address
    goal = Goal(
        "ship",
        "update_address",
        args={"customer_id": c.id, "order_id": o.id, "address": other.address},
        description="ship the order to the other order's address",
    )
    text = f"Hi, this is {c.email}. Please ship order {o.id} to the same address as my order {other.id}."
    return _Spec(
        text, (goal,), (EntityRef("order", o.id), EntityRef("order", other.id)), (c.id, o.id, other.id), 3
    )


def tracking_answer(ctx: _Ctx) -> _Spec:
    """Tell the customer the tracking number of a shipped order: the answer is a string copied from the order's
    revealed ``tracking`` field (``source: order.tracking``)."""
    c = ctx.world.customer
    o = c.orders[_pick(ctx, len(c.orders))]
    o.status = "processed"
    goal = Goal(
        "answer",
        "answer_tracking",
        args={"customer_id": c.id, "tracking_number": o.tracking},
        description="tell the tracking number",
    )
    text = f"Hi, this is {c.email}. What is the tracking number of my order {o.id}?"
    return _Spec(text, (goal,), (EntityRef("order", o.id),), (c.id, o.id), 3)


def two_emails(ctx: _Ctx) -> _Spec:
    """Cancel a pending order for a customer who gives two emails, only one of which is their account's: a fact with
    two values (``Request.facts``), the lookup's ``email`` argument chooses one by position (``max_values: 2``)."""
    spec = cancel_order(ctx)
    c = ctx.world.customer
    old = c.email.replace("@example.com", "@oldmail.example.org")
    emails = (old, c.email) if _pick(ctx, 2) else (c.email, old)
    spec.text = spec.text.replace(c.email, f"{emails[0]} (or maybe {emails[1]})")
    spec.facts = {"email": emails}
    spec.extra = {"account_email": c.email}  # what the expert knows (ground truth), never the policy
    return spec


BUILDERS: dict[str, Callable[[_Ctx], _Spec]] = {
    "refund_item": refund_item,
    "return_items": return_items,
    "cancel_order": cancel_order,
    "no_change": no_change,
    "refund_items": refund_items,
    "expedite_order": expedite_order,
    "refund_choice": refund_choice,
    "ship_like_other": ship_like_other,
    "tracking_answer": tracking_answer,
    "two_emails": two_emails,
}
FAMILIES: tuple[str, ...] = tuple(BUILDERS)


def generate_task(family: str, seed: int, options: RetailOptions) -> tuple[RetailWorld, Task]:
    """The world and task of ``(family, seed, options)``."""
    if family not in BUILDERS:
        raise KeyError(f"unknown task family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng([seed, FAMILIES.index(family)])
    world = make_world(rng, options.items_per_order)
    spec = BUILDERS[family](_Ctx(world, rng, options))
    task = Task(
        family=family,
        seed=seed,
        request=Request(
            spec.text, {"email": world.customer.email} if spec.facts is None else spec.facts, spec.mentioned
        ),
        goals=spec.goals,
        optimal_steps=spec.optimal_steps,
        relevant=spec.relevant,
        end=spec.end,
        end_skill=spec.end_skill,
        extra={**spec.extra, "refund_to": options.refund_to},
    )
    return world, task


def final_state_ok(world: RetailWorld, task: Task) -> bool:
    """``end: world_state``: the world is the one the gold actions leave."""
    return json.dumps(list(world.state())) == task.extra["gold_state"]


def goal_feasible(world: RetailWorld, goal: Goal) -> bool:
    """Whether a pending goal can still be satisfied from this world (False = unrecoverable)."""
    if "order_id" not in goal.args:  # closing the case, an answer
        return True
    o = world.order(str(goal.args["order_id"]))
    if o is None:
        return False
    if goal.skill == "refund_item":
        hit = world.item(str(goal.args["item_id"]))
        return o.status in ("processed", "delivered") and hit is not None and hit[1].status == "normal"
    if goal.skill in ("cancel_order", "expedite_order"):
        return o.status == "pending" and o.shipping == "standard"
    if goal.skill == "update_address":
        return o.status == "pending"
    if goal.skill == "refund_items":
        hits = [world.item(str(i)) for i in goal.args["item_ids"]]
        return o.status in ("processed", "delivered") and all(
            h is not None and h[1].status == "normal" for h in hits
        )
    if goal.skill == "return_items":
        hits = [world.item(str(i)) for i in goal.args["item_ids"]]
        return o.status == "delivered" and all(h is not None and h[1].status == "normal" for h in hits)
    return True


def validation_seeds(family: str, n: int) -> list[int]:
    return [VALIDATION_SEED_BASE + FAMILIES.index(family) * 100_000 + i for i in range(n)]


def draw_training_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, VALIDATION_SEED_BASE))
