"""The skill server as a gateway of its own: the real FastAPI app, called in-process through Starlette's client."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agentic_ray.cli import app as cli_app
from agentic_ray.domains import get_domain, sample_world
from agentic_ray.domains.ecommerce.world import ShopWorld
from agentic_ray.skills.backends import PythonBackend
from agentic_ray.skills.contracts import DomainContracts, load_contracts
from agentic_ray.skills.executor import SimClock, ToolExecutor
from agentic_ray.skills.handoff_queue import HandoffQueue
from agentic_ray.skills.requirements import MissingRequirementError
from agentic_ray.skills.server import create_app
from tests.unit.skills import fixtures


def _toy(**kw: Any) -> TestClient:
    client = TestClient(create_app(fixtures.contracts(), **kw))
    client.put("/worlds/default", json={"stock": {"A": 3, "B": 0}, "balance": 0.0}).raise_for_status()
    return client


def call(
    client: TestClient, skill: str, params: Any, world: str = "default", intent: str = ""
) -> dict[str, Any]:
    r = client.post(f"/skills/{skill}", json={"world_id": world, "intent_id": intent, "params": params})
    r.raise_for_status()
    return dict(r.json())


@pytest.mark.parametrize(
    "params",
    [
        {"confidence": "high"},
        {"confidence": True},
        {},
        {"confidence": 0.5, "mode": "turbo"},
        {"confidence": 0.5, "extra": 1},
        {"confidence": 0.5, "max_detections": 2.5},
        {"confidence": 0.5, "note": "x" * 17},
        "not a dict",
        [1, 2],
    ],
)
def test_direct_bad_input_is_rejected_exactly_as_in_process(params):
    server = call(_toy(), "detect.run", params)
    local = ToolExecutor(fixtures.contracts(), PythonBackend(), clock=SimClock(), rules=fixtures.RULES).call(
        "detect.run", params, intent_id=""
    )
    assert server["ok"] is False and server["error_code"] == local.error_code == "INVALID_INPUT"
    assert server["message"] == local.message


def test_direct_out_of_range_numbers_are_clipped_with_the_same_warning():
    server = call(_toy(), "detect.run", {"confidence": 1.2, "max_detections": 500})
    local = ToolExecutor(fixtures.contracts(), PythonBackend(), clock=SimClock(), rules=fixtures.RULES).call(
        "detect.run", {"confidence": 1.2, "max_detections": 500}, intent_id=""
    )
    assert server["ok"] and server["params"] == local.params and server["warnings"] == local.warnings
    assert server["payload"] == {"count": 25, "confidence": 0.9}


def test_business_rules_hold_on_direct_calls_per_world_and_intent():
    client = _toy()
    r = call(client, "refund.pay", {"sku": "A", "amount": -500})
    assert r["error_code"] == "PRECONDITION_FAILED" and "stock.check" in r["message"]
    assert client.get("/worlds/default").json()["balance"] == 0.0
    assert call(client, "stock.check", {"sku": "B"})["payload"] == {"in_stock": False}
    assert call(client, "refund.pay", {"sku": "B", "amount": 5})["error_code"] == "PRECONDITION_FAILED"
    assert call(client, "stock.check", {"sku": "A"})["ok"]
    assert (
        call(client, "refund.pay", {"sku": "A", "amount": 5}, intent="other")["error_code"]
        == "PRECONDITION_FAILED"
    )
    r = call(client, "refund.pay", {"sku": "A", "amount": -500})
    assert r["ok"] and r["params"]["amount"] == 0.01 and "amount=-500 clipped to 0.01" in r["warnings"][0]
    assert client.get("/worlds/default").json()["balance"] == 0.01  # never negative
    client.delete("/worlds/default")  # a dropped world takes its history with it
    client.put("/worlds/default", json={"stock": {"A": 3}, "balance": 0.0})
    assert call(client, "refund.pay", {"sku": "A", "amount": 1})["error_code"] == "PRECONDITION_FAILED"


def test_skills_off_the_whitelist_are_refused():
    r = call(_toy(), "admin.wipe", {})
    assert r["error_code"] == "NOT_WHITELISTED" and r["ok"] is False
    assert call(_toy(), "nope.skill", {})["error_code"] == "NOT_WHITELISTED"


def test_refund_of_minus_500_on_the_shop_never_makes_the_balance_negative():
    d = get_domain("ecommerce")
    world = sample_world(d, 7)
    order = world.orders[0]
    order.status = "delivered"
    sku = next(s for s in order.skus if world.product(s).stock > 0)  # type: ignore[union-attr]
    client = TestClient(create_app(load_contracts(d.contracts_path), world_from_dict=d.world_from_dict))
    client.put("/worlds/w", json=world.to_dict()).raise_for_status()
    refund = {"order_id": order.id, "sku": sku, "amount": -500, "reason_code": "quality"}
    assert call(client, "refund.trigger", refund, "w")["error_code"] == "PRECONDITION_FAILED"
    assert call(client, "user.find", {"email": world.user.email}, "w")["ok"]
    assert call(client, "order.get", {"order_id": order.id}, "w")["ok"]
    assert call(client, "inventory.check", {"sku": sku}, "w")["ok"]
    r = call(client, "refund.trigger", refund, "w")
    assert r["ok"] and r["payload"]["amount"] == 0.01
    after = ShopWorld.from_dict(client.get("/worlds/w").json())
    assert after.user.balance == pytest.approx(world.user.balance + 0.01)


def test_bad_world_body_is_a_422_that_names_the_problem():
    d = get_domain("ecommerce")
    client = TestClient(create_app(load_contracts(d.contracts_path), world_from_dict=d.world_from_dict))
    r = client.put("/worlds/x", json={"user": {"id": "U1"}})
    assert (
        r.status_code == 422
        and "bad world body for x" in r.json()["detail"]
        and "orders" in r.json()["detail"]
    )


def test_faults_are_per_world():
    client = _toy()
    client.put("/worlds/other", json={"stock": {"A": 3}}).raise_for_status()
    client.put("/worlds/other/faults", json={"failure_rate": 1.0}).raise_for_status()
    assert client.get("/worlds/other/faults").json()["failure_rate"] == 1.0
    assert client.get("/worlds/default/faults").json()["failure_rate"] == 0.0
    assert call(client, "stock.check", {"sku": "A"}, "other")["error_code"] == "UPSTREAM_ERROR"
    assert call(client, "stock.check", {"sku": "A"}, "default")["ok"]
    client.delete("/worlds/other")
    assert client.get("/worlds/other/faults").json()["failure_rate"] == 0.0


def test_handoff_queue_is_served(tmp_path):
    audit = tmp_path / "audit.sqlite"
    q = HandoffQueue(audit)
    hid = q.push(
        trace_id="t", intent_id="i", skill="detect.run", reason="UPSTREAM_ERROR", message="m", payload={}
    )
    client = _toy(audit_path=audit)
    items = client.get("/handoffs").json()
    assert [(h["id"], h["trace_id"], h["skill"], h["status"]) for h in items] == [
        (hid, "t", "detect.run", "open")
    ]
    assert client.post(f"/handoffs/{hid}/resolve", json={"resolution": "refunded by hand"}).json() == {
        "ok": True
    }
    assert client.get("/handoffs").json() == []
    assert client.get("/handoffs", params={"status": "all"}).json()[0]["resolution"] == "refunded by hand"
    assert client.post(f"/handoffs/{hid}/resolve", json={}).status_code == 404
    assert _toy().get("/handoffs").status_code == 404  # no --audit: no queue, said so
    q.close()


def _contract_file(tmp_path: Path, mutate: Any) -> Path:
    data = copy.deepcopy(fixtures.CONTRACTS)
    mutate(data)
    p = tmp_path / "toy.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_server_refuses_to_start_on_a_missing_requirement_or_handler(tmp_path):
    def need_db(d: dict) -> None:
        d["skills"][4]["requires"] = [{"kind": "file", "target": "data/shop.db"}]

    p = _contract_file(tmp_path, need_db)
    with pytest.raises(
        MissingRequirementError, match=r"skill db.write: required file .*data/shop.db is missing"
    ):
        create_app(load_contracts(p))
    r = CliRunner().invoke(cli_app, ["skills", "serve", "--contracts", str(p), "--port", "1"])
    assert r.exit_code == 2 and "data/shop.db" in r.output and "db.write" in r.output
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "shop.db").touch()  # relative to the contract file
    assert create_app(load_contracts(p)) is not None

    def bad_handler(d: dict) -> None:
        d["skills"][2]["handler"] = "tests.unit.skills.fixtures:no_such_function"

    with pytest.raises(MissingRequirementError, match=r"stock\.check: handler .*no_such_function"):
        create_app(
            DomainContracts.model_validate(
                copy.deepcopy(fixtures.CONTRACTS) | {"skills": _mutated(bad_handler)}
            )
        )


def _mutated(fn: Any) -> list[dict]:
    d = copy.deepcopy(fixtures.CONTRACTS)
    fn(d)
    return list(d["skills"])
