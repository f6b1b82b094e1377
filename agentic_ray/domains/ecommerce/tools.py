"""The atomic e-commerce tools: ``handler(world, params) -> payload``, with real effects on a ShopWorld.

Each handler checks the business state and raises :class:`~agentic_ray.skills.backends.ToolError` with a typed
code on a bad call: ``NOT_FOUND`` (no such entity), ``CONFLICT`` (the entity's state forbids it, or it changed
since it was read), ``INVALID_INPUT`` (a value above its limit), ``PRECONDITION_FAILED``; parameters arrive already validated and
clipped by the gateway (see ``configs/skills/ecommerce.yaml``). Payload fields match the contracts' ``output``.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.ecommerce.world import PICKUP_POINT, Order, ShopWorld
from agentic_ray.skills.backends import ToolError

EPS = 1e-6


def _world(world: Any) -> ShopWorld:
    if not isinstance(world, ShopWorld):
        raise ToolError("NOT_FOUND", "no shop world is loaded for this world_id")
    return world


def _order(world: ShopWorld, order_id: str) -> Order:
    o = world.order(order_id)
    if o is None:
        raise ToolError("NOT_FOUND", f"order {order_id} not found")
    return o


def _order_for_write(world: ShopWorld, order_id: str) -> Order:
    """The order a write changes; CONFLICT when it changed since this session last read it (optimistic
    concurrency: the caller must read it again before writing)."""
    o = _order(world, order_id)
    seen = world.session.read_revisions.get(o.id, o.revision)
    if seen != o.revision:
        raise ToolError(
            "CONFLICT",
            f"order {o.id} changed since it was read (revision {seen} -> {o.revision}); read it again",
        )
    return o


def _user(world: ShopWorld, user_id: str) -> None:
    if world.user.id != user_id:
        raise ToolError("NOT_FOUND", f"user {user_id} not found")


def inventory_check(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Live stock of one SKU."""
    w = _world(world)
    p = w.product(params["sku"])
    if p is None:
        raise ToolError("NOT_FOUND", f"sku {params['sku']} not found")
    w.session.checked[p.sku] = p.stock
    return {"sku": p.sku, "in_stock": p.stock > 0, "stock": p.stock}


def sms_send(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Send a templated SMS to the customer."""
    w = _world(world)
    _user(w, params["user_id"])
    mid = w.next_id("SMS")
    w.session.sms.append({"message_id": mid, "template": params["template"]})
    return {"message_id": mid, "delivered": True}


def _user_record(w: ShopWorld) -> dict[str, Any]:
    u = w.user
    return {
        "user_id": u.id,
        "level": u.level,
        "verified": u.verified,
        "complaint_rate": u.complaint_rate,
        "balance": u.balance,
        "device": u.device,
    }


def user_find(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Identify the customer by the email they gave."""
    w = _world(world)
    if params["email"].strip().lower() != w.user.email.lower():
        raise ToolError("NOT_FOUND", "no customer with that email")
    return _user_record(w)


def lookup_customer_by_name(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Identify the customer by name and zip code."""
    w = _world(world)
    if params["name"].strip().lower() != w.user.name.lower() or params["zip"].strip() != w.user.zip:
        raise ToolError("NOT_FOUND", "no customer with that name and zip code")
    return _user_record(w)


def order_list(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The customer's orders, newest first, with their status."""
    w = _world(world)
    _user(w, params["user_id"])
    orders = sorted(w.orders, key=lambda o: o.placed_days_ago)
    return {
        "user_id": w.user.id,
        "orders": [{"id": o.id, "status": o.status, "placed_days_ago": o.placed_days_ago} for o in orders],
    }


def order_get(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Read an order: status, amounts, tracking, and its items (each a product with price and category)."""
    w = _world(world)
    o = _order(w, params["order_id"])
    if o.id not in w.session.viewed_orders:
        w.session.viewed_orders.append(o.id)
    w.session.read_revisions[o.id] = o.revision
    items = []
    for it in o.items:
        p = w.product(it.sku)
        items.append({"id": it.sku, "price": it.price, "category": p.category if p else "unknown"})
    return {
        "order_id": o.id,
        "user_id": o.user_id,
        "status": o.status,
        "total": o.total,
        "refunded": o.refunded,
        "tracking": o.tracking,
        "days_late": o.days_late,
        "shipping_fee": o.shipping_fee,
        "placed_days_ago": o.placed_days_ago,
        "revision": o.revision,
        "items": items,
    }


def return_create(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Open a return for several items of a delivered order."""
    w = _world(world)
    o = _order_for_write(w, params["order_id"])
    skus = list(params["item_ids"])
    missing = [s for s in skus if s not in o.skus]
    if missing:
        raise ToolError("NOT_FOUND", f"items {missing} are not in order {o.id}")
    if len(set(skus)) != len(skus):
        raise ToolError("INVALID_INPUT", "an item is listed twice")
    if o.status not in ("delivered", "exchange_pending"):
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}; only delivered items can be returned")
    rid = w.next_id("RT")
    o.returns.append({"return_id": rid, "items": sorted(skus), "reason": params["reason"]})
    o.erp_dirty = True
    return {"return_id": rid, "order_id": o.id, "items": len(skus)}


def answer_stock(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Tell the customer how many units of a product are in stock (ends the conversation)."""
    w = _world(world)
    p = w.product(params["sku"])
    if p is None:
        raise ToolError("NOT_FOUND", f"sku {params['sku']} not found")
    w.session.answers.append({"sku": p.sku, "quantity": int(params["quantity"])})
    return {"answered": True}


def order_update_address(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Change the delivery address of an order that has not shipped (the user must be verified)."""
    w = _world(world)
    o = _order_for_write(w, params["order_id"])
    if not w.user.verified:
        raise ToolError("PRECONDITION_FAILED", "the user is not verified")
    if o.status != "paid":
        raise ToolError(
            "CONFLICT", f"order {o.id} is {o.status}; the address can only change before shipping"
        )
    o.address = w.user.address if params["source"] == "profile" else PICKUP_POINT
    o.erp_dirty = True
    return {"order_id": o.id, "address": o.address}


def order_cancel(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Cancel an unshipped order: money back to the wallet, items back to stock."""
    w = _world(world)
    o = _order_for_write(w, params["order_id"])
    if o.status != "paid":
        raise ToolError(
            "CONFLICT", f"order {o.id} is {o.status}; only paid, unshipped orders can be cancelled"
        )
    back = round(o.total - o.refunded, 2)
    o.refunded = o.total
    w.user.balance = round(w.user.balance + back, 2)
    for it in o.items:
        p = w.product(it.sku)
        if p is not None:
            p.stock += it.qty
    o.status = "cancelled"
    o.erp_dirty = True
    return {"order_id": o.id, "status": o.status, "refunded_amount": back}


def refund_trigger(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Refund part of an order for one of its items: the order's refunded amount and the wallet go up."""
    w = _world(world)
    o = _order_for_write(w, params["order_id"])
    sku, amount, reason = params["sku"], float(params["amount"]), params["reason_code"]
    if not amount > 0:
        raise ToolError("INVALID_INPUT", f"refund amount must be positive, got {amount}")
    if sku not in o.skus:
        raise ToolError("NOT_FOUND", f"sku {sku} is not in order {o.id}")
    if o.status == "cancelled":
        raise ToolError("CONFLICT", f"order {o.id} is cancelled")
    if reason in ("quality", "wrong_item") and o.status not in ("delivered", "exchange_pending"):
        raise ToolError("CONFLICT", f"a {reason} refund needs a delivered order; {o.id} is {o.status}")
    if reason == "late_delivery" and o.days_late <= 0:
        raise ToolError("CONFLICT", f"order {o.id} is not late")
    if o.refunded + amount > o.total + EPS:  # a value above its limit: an invalid input, not a state conflict
        raise ToolError(
            "INVALID_INPUT", f"refund {amount:.2f} exceeds the refundable {o.total - o.refunded:.2f}"
        )
    amount = round(amount, 2)
    o.refunded = round(o.refunded + amount, 2)
    w.user.balance = round(w.user.balance + amount, 2)
    o.erp_dirty = True
    return {"refund_id": w.next_id("RF"), "order_id": o.id, "amount": amount, "order_refunded": o.refunded}


def express_contact(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Open a ticket with the courier: trace or expedite a parcel, or book a return pickup."""
    w = _world(world)
    o = _order_for_write(w, params["order_id"])
    action = params["action"]
    if action in ("trace", "expedite") and o.status != "shipped":
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}; nothing in transit to {action}")
    if action == "return_pickup" and o.status not in ("delivered", "exchange_pending"):
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}; no parcel to pick up")
    resolved = False
    if action == "trace" and o.tracking == "exception":
        o.tracking = "in_transit"
        resolved = True
    elif action == "expedite" and o.days_late > 0:
        o.days_late = max(0, o.days_late - 1)
        resolved = True
    elif action == "return_pickup":
        resolved = True
    o.express_ticket = w.next_id("EXP")
    return {"ticket_id": o.express_ticket, "carrier_status": o.tracking, "resolved": resolved}


def waybill_generate(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Issue a waybill for a reship, a return or an exchange (needs a courier ticket)."""
    w = _world(world)
    o = _order_for_write(w, params["order_id"])
    kind = params["kind"]
    if o.express_ticket is None:
        raise ToolError("PRECONDITION_FAILED", f"order {o.id} has no courier ticket")
    if kind == "exchange" and o.status != "exchange_pending":
        raise ToolError("CONFLICT", f"order {o.id} has no pending exchange")
    if kind == "reship" and o.status != "shipped":
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}; only shipped parcels are reshipped")
    o.waybill = w.next_id("WB")
    o.waybill_kind = kind
    o.erp_dirty = True
    return {"waybill_id": o.waybill, "kind": kind}


def erp_sync(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Push an order's changes to the ERP."""
    w = _world(world)
    o = _order(w, params["order_id"])
    changed = o.erp_dirty
    if changed:
        o.erp_version += 1
        o.erp_dirty = False
    return {"synced": changed, "version": o.erp_version}


def exchange_create(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Ship a replacement SKU for a delivered order: stock goes down by one, the order is exchange-pending."""
    w = _world(world)
    o = _order_for_write(w, params["order_id"])
    p = w.product(params["sku"])
    if p is None:
        raise ToolError("NOT_FOUND", f"sku {params['sku']} not found")
    if o.status != "delivered":
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}; only delivered orders can be exchanged")
    if p.stock <= 0:
        raise ToolError("CONFLICT", f"sku {p.sku} is out of stock")
    p.stock -= 1
    o.status = "exchange_pending"
    o.exchange_sku = p.sku
    o.erp_dirty = True
    return {"exchange_id": w.next_id("EX"), "order_id": o.id, "sku": p.sku, "stock_left": p.stock}


def user_verify(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Verify the customer's identity; app push needs the mobile app."""
    w = _world(world)
    _user(w, params["user_id"])
    if params["method"] == "app_push" and w.user.device == "web":
        raise ToolError("PRECONDITION_FAILED", "the user has no mobile app for a push challenge")
    w.user.verified = True
    return {"verified": True, "method": params["method"]}


def coupon_issue(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Issue a store coupon; its value is capped at 10 × the user's level."""
    w = _world(world)
    _user(w, params["user_id"])
    value = round(float(params["value"]), 2)
    if not value > 0:
        raise ToolError("INVALID_INPUT", f"coupon value must be positive, got {value}")
    if value > 10.0 * w.user.level + EPS:
        raise ToolError(
            "INVALID_INPUT", f"coupon {value:.2f} exceeds the level-{w.user.level} cap {10 * w.user.level}"
        )
    cid = w.next_id("CP")
    w.user.coupons.append({"coupon_id": cid, "value": value, "kind": params["kind"]})
    return {"coupon_id": cid, "value": value}


def human_handoff(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Escalate the conversation to a human agent (ends the automated session); the customer may be unknown."""
    w = _world(world)
    if params.get("user_id") is not None:
        _user(w, params["user_id"])
    tid = w.next_id("HO")
    w.session.handoff = {"ticket_id": tid, "reason": params["reason"]}
    return {"ticket_id": tid, "queued": True}
