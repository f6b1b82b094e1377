"""The plug-in domain's tools: ``handler(world, params) -> payload`` with real effects on a RetailWorld.

Parameters arrive validated by the gateway (``skills.yaml``). Each handler still checks what it depends on and
raises ``ToolError`` with a typed code, as a real service would. Payloads are shaped the way the retail tools that
motivated issue 26 return them: payment methods keyed by id, order items as nested objects with an ``item_id``.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.protocol import ToolError
from tests.plugin_domain.world import EXPRESS_FEE, Item, Order, PaymentMethod, RetailWorld


def _world(world: Any) -> RetailWorld:
    if not isinstance(world, RetailWorld):
        raise ToolError("NOT_FOUND", "no retail world is loaded for this world_id")
    return world


def _order(w: RetailWorld, oid: str) -> Order:
    o = w.order(oid)
    if o is None:
        raise ToolError("NOT_FOUND", f"order {oid} not found")
    return o


def _customer(w: RetailWorld, cid: str) -> None:
    if cid != w.customer.id:
        raise ToolError("NOT_FOUND", f"customer {cid} not found")


def find_customer_by_email(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The customer with this email and their payment methods (keyed by id)."""
    w = _world(world)
    c = w.customer
    if params["email"].strip().lower() != c.email:
        raise ToolError("NOT_FOUND", "no customer with that email")
    return {
        "customer_id": c.id,
        "tier": c.tier,
        "payment_methods": {p.id: {"kind": p.kind, "balance": p.balance} for p in c.payment_methods},
    }


def list_orders(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The customer's orders keyed by id, with status and total."""
    w = _world(world)
    _customer(w, params["customer_id"])
    return {
        "customer_id": w.customer.id,
        "orders": {o.id: {"status": o.status, "total": o.total} for o in w.customer.orders},
    }


def _item(i: Item) -> dict[str, Any]:
    return {"item_id": i.id, "price": i.price, "status": i.status, "category": i.category}


def get_order(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """One order: its customer, status, total and items (nested objects with an ``item_id``)."""
    w = _world(world)
    o = _order(w, params["order_id"])
    return {
        "order_id": o.id,
        "customer_id": w.customer.id,
        "status": o.status,
        "total": o.total,
        "address": o.address,
        "tracking": o.tracking,
        "items": [_item(i) for i in o.items],
    }


def _payment_method(w: RetailWorld, pid: str) -> PaymentMethod:
    p = w.payment_method(pid)
    if p is None:
        raise ToolError("NOT_FOUND", f"payment method {pid} not found")
    return p


def refund_item(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Refund one item of a delivered or processed order to one of the customer's payment methods."""
    w = _world(world)
    _customer(w, params["customer_id"])
    o = _order(w, params["order_id"])
    item = next((i for i in o.items if i.id == params["item_id"]), None)
    if item is None:
        raise ToolError("NOT_FOUND", f"item {params['item_id']} is not in order {o.id}")
    p = _payment_method(w, params["payment_method_id"])
    if o.status not in ("processed", "delivered"):
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}: nothing to refund")
    if item.status == "refunded":
        raise ToolError("CONFLICT", f"item {item.id} is already refunded")
    amount = float(params["amount"])
    if amount > item.price + 1e-9:  # the contract's max_from bound: the item's price
        raise ToolError("INVALID_INPUT", f"amount {amount:.2f} is above the item's price {item.price:.2f}")
    item.status = "refunded"
    p.balance = round(p.balance + amount, 2)
    refund = {"order_id": o.id, "item_id": item.id, "payment_method_id": p.id, "amount": amount}
    w.refunds.append(refund)
    return {"refund_id": f"rf_{len(w.refunds)}", "amount": amount, "payment_method_id": p.id}


def refund_items(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Refund several items in full, item ``i`` to payment method ``i`` (the gateway checked the pairing)."""
    w = _world(world)
    _customer(w, params["customer_id"])
    o = _order(w, params["order_id"])
    items = {i.id: i for i in o.items}
    if len(params["item_ids"]) != len(params["payment_method_ids"]):
        raise ToolError("INVALID_INPUT", "one payment method per item")
    pairs = [
        (items.get(i), _payment_method(w, p))
        for i, p in zip(params["item_ids"], params["payment_method_ids"], strict=True)
    ]
    if any(i is None for i, _p in pairs):
        raise ToolError("NOT_FOUND", f"an item is not in order {o.id}")
    if o.status not in ("processed", "delivered") or any(
        i is not None and i.status != "normal" for i, _p in pairs
    ):
        raise ToolError("CONFLICT", "only normal items of a processed or delivered order can be refunded")
    total = 0.0
    for item, p in pairs:
        assert item is not None
        item.status = "refunded"
        p.balance = round(p.balance + item.price, 2)
        w.refunds.append(
            {"order_id": o.id, "item_id": item.id, "payment_method_id": p.id, "amount": item.price}
        )
        total += item.price
    return {"refunds": len(pairs), "total": round(total, 2)}


def return_items(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Start the return of items of a delivered order; the items' new status comes back as nested objects."""
    w = _world(world)
    _customer(w, params["customer_id"])
    o = _order(w, params["order_id"])
    items = {i.id: i for i in o.items}
    chosen = [items.get(i) for i in params["item_ids"]]
    if any(i is None for i in chosen):
        raise ToolError("NOT_FOUND", f"an item is not in order {o.id}")
    if o.status != "delivered" or any(i.status != "normal" for i in chosen if i is not None):
        raise ToolError("CONFLICT", "only normal items of a delivered order can be returned")
    for i in chosen:
        if i is not None:
            i.status = "returned"
    return {"return_id": f"rt_{o.id}", "items": [{"item_id": i.id, "status": i.status} for i in chosen if i]}


def _pending_order(world: Any, params: dict[str, Any], what: str) -> Order:
    """The customer's order the call names, which must be pending for ``what``."""
    w = _world(world)
    _customer(w, params["customer_id"])
    o = _order(w, params["order_id"])
    if o.status != "pending":
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}: only a pending order {what}")
    return o


def cancel_order(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Cancel a pending order."""
    o = _pending_order(world, params, "can be cancelled")
    o.status, o.cancel_reason = "cancelled", params["reason"]
    return {"status": o.status}


def close_case(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Close the case, telling the customer the outcome."""
    w = _world(world)
    _customer(w, params["customer_id"])
    w.case = params["outcome"]
    return {"outcome": w.case}


def transfer_to_human(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Hand the case to a human agent."""
    w = _world(world)
    w.case = "transferred"
    return {"ticket": f"h_{params['reason']}"}


def expedite_order(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Ship a pending order express, charging the fee (the gateway checked that the customer agreed to it)."""
    w = _world(world)
    _customer(w, params["customer_id"])
    o = _order(w, params["order_id"])
    if o.status != "pending" or o.shipping == "express":
        raise ToolError("CONFLICT", f"order {o.id} is {o.status}, shipping {o.shipping}: cannot expedite")
    o.shipping = "express"
    return {"shipping": o.shipping, "fee": EXPRESS_FEE}


def update_address(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Ship a pending order to another address (a string the caller copied from a revealed order)."""
    o = _pending_order(world, params, "can change its address")
    o.address = params["address"]
    return {"address": o.address}


def answer_tracking(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Tell the customer a tracking number (the answer is recorded; any string is accepted, as a chat would)."""
    w = _world(world)
    _customer(w, params["customer_id"])
    w.case = f"told:{params['tracking_number']}"
    return {"told": params["tracking_number"]}
