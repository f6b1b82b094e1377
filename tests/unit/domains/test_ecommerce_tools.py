"""E-commerce tools: real effects on the shop world, typed errors on bad business calls, and the contracts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentic_ray.domains import available_domains, get_domain, sample_world
from agentic_ray.domains.ecommerce import tools
from agentic_ray.domains.ecommerce.world import PICKUP_POINT, ShopWorld, make_world
from agentic_ray.skills.backends import PythonBackend, ToolError
from agentic_ray.skills.executor import SimClock, ToolExecutor


@pytest.fixture
def world() -> ShopWorld:
    w = make_world(np.random.default_rng(7))
    a, b, c = w.orders
    a.status, a.tracking = "paid", "none"
    b.status, b.tracking = "delivered", "delivered"
    c.status, c.tracking = "shipped", "exception"
    for p in w.products:
        p.stock = 10
    w.user.verified = False
    return w


def test_contracts_cover_the_tools_with_handlers() -> None:
    dom = get_domain("ecommerce")
    dc = dom.contracts()
    names = [s.name for s in dc.skills]
    assert len(names) == 18
    for required in (
        "inventory.check",
        "sms.send",
        "order.update_address",
        "refund.trigger",
        "express.contact",
        "waybill.generate",
        "erp.sync",
        "exchange.create",
        "user.verify",
        "coupon.issue",
        "human.handoff",
        "order.cancel",
        "order.get",
        "order.list",
        "user.find",
        "lookup_customer_by_name",
        "return.create",
        "answer.stock",
    ):
        assert required in names
    by = dc.by_name()
    assert by["refund.trigger"].input["amount"].max_from == "total"
    assert by["refund.trigger"].input["reason_code"].choices == ["quality", "wrong_item", "late_delivery"]
    assert by["refund.trigger"].risk.high_risk and by["order.cancel"].risk.high_risk
    assert by["coupon.issue"].risk.high_risk
    assert by["express.contact"].sla.p95_ms >= 1000
    assert by["inventory.check"].fallback[0].rule == "conservative_stock"
    assert by["sms.send"].fallback[0].rule == "queue_for_retry"
    assert [p.after for p in by["refund.trigger"].preconditions] == ["order.get", "inventory.check"]
    assert by["order.get"].preconditions[0].any_of == ["user.find", "lookup_customer_by_name"]
    assert by["return.create"].input["item_ids"].type == "list"
    assert not by["human.handoff"].input["user_id"].required
    assert [p.after for p in by["waybill.generate"].preconditions] == ["express.contact"]
    assert [p.after for p in by["order.update_address"].preconditions] == ["user.verify"]
    assert "ecommerce" in available_domains()


def test_refund_changes_order_and_balance(world: ShopWorld) -> None:
    o = world.orders[1]
    bal = world.user.balance
    sku = o.items[0].sku
    out = tools.refund_trigger(world, {"order_id": o.id, "sku": sku, "amount": 3.5, "reason_code": "quality"})
    assert out["amount"] == 3.5 and out["order_refunded"] == 3.5
    assert o.refunded == 3.5
    assert world.user.balance == pytest.approx(bal + 3.5)
    assert o.erp_dirty
    with pytest.raises(ToolError) as e:  # over-refund: a value above its limit
        tools.refund_trigger(
            world, {"order_id": o.id, "sku": sku, "amount": o.total, "reason_code": "quality"}
        )
    assert e.value.code == "INVALID_INPUT"
    assert o.refunded == 3.5
    with pytest.raises(ToolError) as e:  # quality refund on an unshipped order
        tools.refund_trigger(
            world,
            {
                "order_id": world.orders[0].id,
                "sku": world.orders[0].items[0].sku,
                "amount": 1.0,
                "reason_code": "quality",
            },
        )
    assert e.value.code == "CONFLICT"
    with pytest.raises(ToolError) as e:
        tools.refund_trigger(world, {"order_id": "nope", "sku": sku, "amount": 1.0, "reason_code": "quality"})
    assert e.value.code == "NOT_FOUND"


def test_exchange_decrements_stock_and_sets_state(world: ShopWorld) -> None:
    o, p = world.orders[1], world.products[-1]
    out = tools.exchange_create(world, {"order_id": o.id, "sku": p.sku})
    assert p.stock == 9 and out["stock_left"] == 9
    assert o.status == "exchange_pending" and o.exchange_sku == p.sku
    with pytest.raises(ToolError) as e:  # no longer delivered
        tools.exchange_create(world, {"order_id": o.id, "sku": p.sku})
    assert e.value.code == "CONFLICT"
    p.stock = 0
    o2 = world.orders[1]
    o2.status = "delivered"
    with pytest.raises(ToolError) as e:
        tools.exchange_create(world, {"order_id": o2.id, "sku": p.sku})
    assert e.value.code == "CONFLICT" and p.stock == 0


def test_cancel_refunds_and_restocks(world: ShopWorld) -> None:
    o = world.orders[0]
    bal = world.user.balance
    stock = {it.sku: world.product(it.sku).stock for it in o.items}  # type: ignore[union-attr]
    out = tools.order_cancel(world, {"order_id": o.id, "reason": "customer_request"})
    assert o.status == "cancelled" and out["refunded_amount"] == pytest.approx(o.total)
    assert world.user.balance == pytest.approx(bal + o.total)
    for it in o.items:
        assert world.product(it.sku).stock == stock[it.sku] + it.qty  # type: ignore[union-attr]
    with pytest.raises(ToolError) as e:
        tools.order_cancel(world, {"order_id": world.orders[2].id, "reason": "customer_request"})
    assert e.value.code == "CONFLICT"


def test_address_needs_verification_and_unshipped_order(world: ShopWorld) -> None:
    o = world.orders[0]
    o.address = "somewhere wrong"
    with pytest.raises(ToolError) as e:
        tools.order_update_address(world, {"order_id": o.id, "source": "profile"})
    assert e.value.code == "PRECONDITION_FAILED" and o.address == "somewhere wrong"
    tools.user_verify(world, {"user_id": world.user.id, "method": "sms_otp"})
    assert world.user.verified
    tools.order_update_address(world, {"order_id": o.id, "source": "pickup_point"})
    assert o.address == PICKUP_POINT
    tools.order_update_address(world, {"order_id": o.id, "source": "profile"})
    assert o.address == world.user.address
    with pytest.raises(ToolError) as e:
        tools.order_update_address(world, {"order_id": world.orders[2].id, "source": "profile"})
    assert e.value.code == "CONFLICT"


def test_logistics_chain_and_erp(world: ShopWorld) -> None:
    o = world.orders[2]
    with pytest.raises(ToolError) as e:
        tools.waybill_generate(world, {"order_id": o.id, "kind": "reship"})
    assert e.value.code == "PRECONDITION_FAILED"
    out = tools.express_contact(world, {"order_id": o.id, "action": "trace"})
    assert out["resolved"] and o.tracking == "in_transit" and o.express_ticket == out["ticket_id"]
    wb = tools.waybill_generate(world, {"order_id": o.id, "kind": "reship"})
    assert o.waybill == wb["waybill_id"] and o.erp_dirty
    s1 = tools.erp_sync(world, {"order_id": o.id})
    assert s1 == {"synced": True, "version": 1} and not o.erp_dirty
    assert tools.erp_sync(world, {"order_id": o.id}) == {"synced": False, "version": 1}


def test_inventory_sms_coupon_handoff(world: ShopWorld) -> None:
    p = world.products[0]
    p.stock = 0
    assert tools.inventory_check(world, {"sku": p.sku}) == {"sku": p.sku, "in_stock": False, "stock": 0}
    assert world.session.checked[p.sku] == 0
    tools.sms_send(world, {"user_id": world.user.id, "template": "stock_info"})
    assert world.session.sms[-1]["template"] == "stock_info"
    world.user.level = 1
    with pytest.raises(ToolError) as e:
        tools.coupon_issue(world, {"user_id": world.user.id, "value": 20.0, "kind": "delay"})
    assert e.value.code == "INVALID_INPUT" and world.user.coupons == []
    tools.coupon_issue(world, {"user_id": world.user.id, "value": 10.0, "kind": "delay"})
    assert world.user.coupons[0]["value"] == 10.0
    with pytest.raises(ToolError) as e:
        tools.sms_send(world, {"user_id": "U0", "template": "stock_info"})
    assert e.value.code == "NOT_FOUND"
    tools.human_handoff(world, {"user_id": world.user.id, "reason": "complex"})
    assert world.session.handoff is not None and world.session.handoff["reason"] == "complex"
    world.user.device = "web"
    with pytest.raises(ToolError) as e:
        tools.user_verify(world, {"user_id": world.user.id, "method": "app_push"})
    assert e.value.code == "PRECONDITION_FAILED"


def test_world_roundtrip_and_drift() -> None:
    w = make_world(np.random.default_rng(3))
    d = json.loads(json.dumps(w.to_dict()))
    w2 = ShopWorld.from_dict(d)
    assert w2.to_dict() == w.to_dict()
    assert make_world(np.random.default_rng(3)).to_dict() == w.to_dict()
    protected = frozenset({w.products[0].sku})
    w.products[0].stock = 1
    before = [h.latency_ms for h in w.tool_health.values()]
    rng = np.random.default_rng(0)
    for _ in range(200):
        w.drift(rng, protected)
    assert w.products[0].stock >= 1
    assert w.tick == 200
    assert [h.latency_ms for h in w.tool_health.values()] != before
    assert all(0.0 <= h.failure_rate <= 0.5 for h in w.tool_health.values())


def test_tools_through_the_gateway_enforce_preconditions() -> None:
    dom = get_domain("ecommerce")
    dc = dom.contracts()
    be = PythonBackend()
    ex = ToolExecutor(dc, be, clock=SimClock(), rules=dom.fallback_rules())
    w = sample_world(dom, 11)
    o = w.orders[0]
    o.status = "delivered"
    sku = o.items[0].sku
    w.product(sku).stock = 5  # type: ignore[union-attr]
    be.put_world("w", w)
    args = {"order_id": o.id, "sku": sku, "amount": 1.0, "reason_code": "quality"}
    r = ex.call("refund.trigger", args, intent_id="i", world_id="w")
    assert not r.ok and r.error_code == "PRECONDITION_FAILED" and o.refunded == 0.0
    assert ex.call("user.find", {"email": w.user.email}, intent_id="i", world_id="w").ok
    assert ex.call("order.get", {"order_id": o.id}, intent_id="i", world_id="w").ok
    r = ex.call("refund.trigger", args, intent_id="i", world_id="w")
    assert not r.ok and r.error_code == "PRECONDITION_FAILED"  # still: the inventory check
    assert ex.call("inventory.check", {"sku": sku}, intent_id="i", world_id="w").ok
    r = ex.call("refund.trigger", args, intent_id="i", world_id="w")
    assert r.ok and o.refunded == 1.0
    r = ex.call("refund.trigger", {**args, "amount": 99999.0}, intent_id="i", world_id="w")
    # clipped to the contract max, then refused as above the refundable amount
    assert not r.ok and r.error_code == "INVALID_INPUT" and r.warnings
