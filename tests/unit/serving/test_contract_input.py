"""Contracts enforced on what clients send, on every route: bounds, enums, strict types and budgets, each a 422
that names the field and the contract's bound (in-process service, no Ray)."""

from __future__ import annotations

import json

import pytest

from agentic_ray.domains import get_domain
from agentic_ray.serving.client import act_body, transcript_entry
from agentic_ray.skills.param_validation import InvalidParams, validate_params
from tests.helpers.serving import AUTH

DOMAIN = get_domain("ecommerce")
JSON_HEADERS = {**AUTH, "content-type": "application/json"}


@pytest.fixture
def app(shared_app):
    return shared_app


def refund_body() -> dict:
    """quality_refund: goal 1 is refund.trigger with numeric amount (contract: 0.01 to 10,000)."""
    _w, task = DOMAIN.make_task("quality_refund", 1)
    return act_body("ecommerce", task)


def errors(c, body, path="/v1/act", method="post", raw: str | None = None) -> list[tuple[list, str]]:
    content = raw if raw is not None else json.dumps(body, allow_nan=True)
    r = getattr(c, method)(path, content=content.encode(), headers=JSON_HEADERS)
    assert r.status_code == 422, r.text
    return [(e["loc"], e["msg"]) for e in r.json()["detail"]]


def test_the_refund_contract_bounds_goal_targets(app):
    _svc, c = app
    ok = refund_body()
    assert ok["task"]["goals"][1]["numeric"] == {"amount": 30.4}
    assert c.post("/v1/act", json=ok, headers=AUTH).status_code == 200
    where = ["body", "task", "goals", 1, "numeric", "amount"]
    for amount in (-5, 0, 1e308, 10_000.5):
        body = refund_body()
        body["task"]["goals"][1]["numeric"]["amount"] = amount
        ((loc, msg),) = errors(c, body)
        assert loc == where and "outside the contract's bounds [0.01, 10000]" in msg, msg
    for token in ("NaN", "Infinity", "-Infinity", "1e400"):
        raw = json.dumps(refund_body()).replace('"amount": 30.4', f'"amount": {token}')
        ((loc, msg),) = errors(c, None, raw=raw)
        assert loc == where and msg == "Input should be a finite number"


def test_goal_arguments_are_enums_and_strict_types(app):
    _svc, c = app
    cases = [
        (("goals", 1, "args", "reason_code"), "sometimes", "'sometimes' is not one of ['quality', "),
        (("goals", 1, "args", "order_id"), 17, "expected a order id"),
        (("goals", 1, "args", "amount"), 3, "numeric targets go under `numeric`"),
        (("goals", 1, "args", "colour"), "red", "unknown parameter(s) ['colour']"),
        (("goals", 0, "safety_check"), "yes", "Input should be a valid boolean"),
        (("goals", 0, "priority"), "1", "Input should be a valid integer"),
        (("goals", 0, "priority"), True, "Input should be a valid integer"),
        (("goals", 0, "priority"), 2.5, "Input should be a valid integer"),
        (("goals", 0, "tolerance"), "0.1", "Input should be a valid number"),
        (("optimal_steps",), 0, "Input should be greater than or equal to 1"),
    ]
    body = refund_body()
    body["task"]["goals"][0]["priority"] = 2.0  # an integer to JSON Schema, as 2 is
    assert c.post("/v1/act", json=body, headers=AUTH).status_code == 200
    for path, value, want in cases:
        body = refund_body()
        node = body["task"]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        ((loc, msg),) = errors(c, body)
        assert loc == ["body", "task", *path] and want in msg, (path, loc, msg)


def test_transcript_calls_and_results_are_checked_strictly(app):
    _svc, c = app
    ok = refund_body()
    found = transcript_entry(
        "inventory.check", {"sku": "SKU9448"}, payload={"sku": "SKU9448", "in_stock": True, "stock": 4}
    )
    assert c.post("/v1/act", json={**ok, "transcript": [found]}, headers=AUTH).status_code == 200
    cases = [
        (
            {
                "skill": "refund.trigger",
                "params": {"order_id": "O1", "sku": "S", "amount": -5, "reason_code": "quality"},
            },
            ["params", "amount"],
            "-5 is outside the contract's bounds [0.01, 10000]",
        ),
        ({"skill": "inventory.check", "params": {"sku": True}}, ["params", "sku"], "expected a product id"),
        ({"skill": "inventory.check", "params": {}}, ["params"], "missing required parameter 'sku'"),
        (
            {
                "skill": "inventory.check",
                "params": {"sku": "S"},
                "payload": {"sku": "S", "in_stock": "yes", "stock": 4},
            },
            ["payload"],
            "in_stock: str where bool expected",
        ),
        (
            {
                "skill": "inventory.check",
                "params": {"sku": "S"},
                "payload": {"sku": "S", "in_stock": True, "stock": 4.0},
            },
            ["payload"],
            "stock: float where int expected",
        ),
        ({"skill": "inventory.check", "result_code": "ok"}, ["result_code"], "String should match pattern"),
    ]
    for call, loc, want in cases:
        ((got_loc, msg),) = errors(c, {**ok, "transcript": [{**found, **call}]})
        assert got_loc == ["body", "transcript", 0, *loc] and want in msg, (got_loc, msg)


def test_a_transcript_over_the_step_budget_is_refused(app):
    """The probe's case: 20 calls with a budget of 8 answered `step 20, budget 8, valid: true`."""
    _svc, c = app
    call = transcript_entry("inventory.check", {"sku": "SKU9448"}, result_code="NOT_FOUND")
    for n, budget in ((20, 8), (8, 8)):
        body = {**refund_body(), "transcript": [call] * n}
        body["task"]["budget"] = budget
        ((loc, msg),) = errors(c, body)
        assert loc == ["body", "transcript"] and f"step budget ({budget}) is spent" in msg
    body = {**refund_body(), "transcript": [call] * 7}
    body["task"]["budget"] = 8
    d = c.post("/v1/act", json=body, headers=AUTH).json()
    assert (d["step"], d["budget"]) == (7, 8)
    # the default budget (the env's rule on optimal_steps) counts too
    default = c.post("/v1/act", json=refund_body(), headers=AUTH).json()["budget"]
    assert errors(c, {**refund_body(), "transcript": [call] * default})[0][0] == ["body", "transcript"]


def test_every_other_route_enforces_its_contract(app):
    svc, c = app
    assert errors(c, {"domain": "ecommerce", "seed": False}, "/v1/sessions") == [
        (["body", "seed"], "Input should be a valid integer")
    ]
    assert errors(c, {"domain": "ecommerce", "seed": -1}, "/v1/episodes")[0][0] == ["body", "seed"]
    assert errors(c, {"domain": "ecommerce", "seed": 2**31}, "/v1/sessions")[0][0] == ["body", "seed"]
    assert errors(c, {"domain": "ecommerce", "family": "heist"}, "/v1/sessions")[0][0] == ["body", "family"]
    assert errors(c, {"domain": "helpdesk"}, "/v1/episodes")[0][0] == ["body", "domain"]
    assert errors(c, {"trace_id": "t", "outcome": "meh"}, "/v1/feedback")[0][0] == ["body", "outcome"]
    assert errors(c, {"trace_id": "t", "outcome": "failure"}, "/v1/feedback")[0][1].startswith(
        "reason: required"
    )
    assert errors(c, {"trace_id": "t", "outcome": "success", "reason": 1}, "/v1/feedback")[0][0] == [
        "body",
        "reason",
    ]
    assert errors(c, {"strategy_mode": "random"}, "/v1/strategy", "put")[0][0] == ["body", "strategy_mode"]
    sid = c.post("/v1/sessions", json={"domain": "ecommerce"}, headers=AUTH).json()["session_id"]
    assert errors(c, {"skill": "refund.trigger"}, f"/v1/sessions/{sid}/step")[0][0] == ["body", "skill"]
    assert errors(c, None, "/v1/sessions/NOT-AN-ID/step", raw="{}")[0][0] == ["path", "session_id"]
    r = c.delete("/v1/sessions/xyz", headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "session_id"]
    svc.close_session(sid)


def test_strict_mode_of_the_gateways_own_check(app):
    """The gateway clips what the policy proposes; in strict mode (what a client asserts) the bound is named."""
    refund = app[0].builder.contracts["refund.trigger"]
    args = {"order_id": "O1", "sku": "S", "amount": 20_000.0, "reason_code": "quality"}
    clean, warnings = validate_params(refund, args)
    assert clean["amount"] == 10_000 and warnings
    with pytest.raises(
        InvalidParams, match=r"amount: 20000 is outside the contract's bounds \[0.01, 10000\]"
    ):
        validate_params(refund, args, strict=True)
    assert validate_params(refund, {"amount": 5.0}, strict=True, partial=True) == ({"amount": 5.0}, [])
