"""Every ToolExecutor behaviour, on a tiny in-code domain (no Ray, no network)."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_ray.skills.backends import FaultConfig, PythonBackend
from agentic_ray.skills.contracts import DomainContracts
from agentic_ray.skills.executor import RealClock, SimClock, ToolExecutor
from agentic_ray.skills.requirements import MissingRequirementError
from tests.unit.skills import fixtures


def make(faults: FaultConfig | None = None, clock=None, **kw) -> ToolExecutor:
    kw.setdefault("rules", fixtures.RULES)
    ex = ToolExecutor(fixtures.contracts(), PythonBackend(faults=faults), clock=clock or SimClock(), **kw)
    ex.backend.put_world("default", {"stock": {"A": 3, "B": 0}, "balance": 0.0})
    return ex


def only(skill: str, **kw) -> FaultConfig:
    return FaultConfig(per_skill={skill: FaultConfig(**kw)}, seed=kw.pop("seed", 0) if "seed" in kw else 0)


def test_whitelist_rejects_unknown_and_disallowed():
    ex = make()
    assert ex.call("nope.skill", {}, intent_id="i").error_code == "NOT_WHITELISTED"
    assert ex.call("admin.wipe", {}, intent_id="i").error_code == "NOT_WHITELISTED"
    narrow = make(whitelist={"stock.check"})
    assert narrow.call("detect.run", {"confidence": 0.5}, intent_id="i").error_code == "NOT_WHITELISTED"
    assert narrow.call("stock.check", {"sku": "A"}, intent_id="i").ok


def test_intent_and_trace_ids_are_carried_and_audited():
    ex = make()
    iid = ToolExecutor.intent_hash("Where is   my ORDER?")
    assert iid == ToolExecutor.intent_hash("where is my order?") and len(iid) == 16
    r = ex.call("stock.check", {"sku": "A"}, intent_id=iid, trace_id="t-1")
    assert (r.intent_id, r.trace_id) == (iid, "t-1")
    r2 = ex.call("stock.check", {"sku": "A"}, intent_id=iid)
    assert len(r2.trace_id) == 16 and r2.trace_id != "t-1"
    rows = ex.audit.rows()
    assert [(x["intent_id"], x["trace_id"], x["skill"], x["result_code"]) for x in rows] == [
        (iid, "t-1", "stock.check", "OK"),
        (iid, r2.trace_id, "stock.check", "OK"),
    ]


def test_out_of_range_numbers_are_clipped_with_a_warning():
    ex = make()
    r = ex.call("detect.run", {"confidence": 1.2, "max_detections": 500}, intent_id="i")
    assert r.ok and r.params["confidence"] == 0.9 and r.params["max_detections"] == 50
    assert r.payload == {"count": 25, "confidence": 0.9}
    assert any("confidence=1.2 clipped to 0.9" in w for w in r.warnings)
    assert "clipped" in ex.audit.rows()[-1]["warnings"]


@pytest.mark.parametrize(
    "params",
    [
        {"confidence": "high"},  # wrong type
        {"confidence": True},  # bool is not a number
        {},  # missing required
        {"confidence": 0.5, "mode": "turbo"},  # unknown enum
        {"confidence": 0.5, "extra": 1},  # unknown field
        {"confidence": float("nan")},
        {"confidence": 0.5, "max_detections": 2.5},
        {"confidence": 0.5, "note": "x" * 17},
        "not a dict",
    ],
)
def test_invalid_input_is_typed_and_not_retried(params):
    ex = make()
    r = ex.call("detect.run", params, intent_id="i")
    assert not r.ok and r.error_code == "INVALID_INPUT" and r.retryable is False
    assert r.attempts == 0 and not r.handoff and r.fallback_used is None


def test_handler_crash_never_escapes():
    ex = make()
    ex.backend.put_world("default", None)  # stock handler will hit a None world
    r = ex.call("refund.pay", {"sku": "A", "amount": 1.0}, intent_id="fresh")
    assert r.error_code == "PRECONDITION_FAILED"
    r = ex.call("stock.check", {"sku": "A"}, intent_id="i")
    assert not r.ok or r.fallback_used == "rule:conservative_stock"


def test_timeout_enforced_on_simulated_latency():
    ex = make(faults=only("detect.backup", latency_ms=500.0))  # backup's SLA timeout is 1000 ms
    ex2 = make(faults=FaultConfig(latency_ms=150.0))  # detect.run timeout is 100 ms
    r = ex2.call("detect.run", {"confidence": 0.5}, intent_id="i")
    # primary: 3 attempts all time out; the backup (timeout 1000 ms) succeeds
    assert r.ok and r.fallback_used == "detect.backup" and r.attempts == 4
    assert ex2.sla_stats()["detect.run"].attempt_error_rate == 1.0
    assert ex.call("detect.backup", {"confidence": 0.5}, intent_id="i").ok


def test_timeout_enforced_on_real_slow_handler():
    ex = make(faults=FaultConfig(latency_ms=150.0), clock=RealClock())
    ex.backend.realtime = True
    r = ex.call("detect.backup", {"confidence": 0.5}, intent_id="i")
    assert r.ok and 140 <= r.latency_ms < 1000
    r = ex.call("stock.check", {"sku": "A"}, intent_id="i")  # default timeout 1000 ms
    assert r.ok


def test_retries_only_for_retryable_errors():
    ex = make(faults=only("stock.check", failure_rate=1.0))
    r = ex.call("stock.check", {"sku": "A"}, intent_id="i")
    assert r.attempts == 3  # 1 + 2 default retries
    assert r.ok and r.fallback_used == "rule:conservative_stock" and r.payload["in_stock"] is False
    ex = make()
    r = ex.call("stock.check", {"sku": "ZZZ"}, intent_id="i")
    assert r.error_code == "NOT_FOUND" and r.attempts == 1 and r.fallback_used is None and not r.handoff


def test_backoff_is_exponential_on_the_clock():
    clock = SimClock()
    ex = make(faults=only("stock.check", failure_rate=1.0), clock=clock)
    ex.call("stock.check", {"sku": "A"}, intent_id="i")
    # default retry: 20 ms then 40 ms of backoff
    assert clock.now() == pytest.approx(0.02 + 0.04, rel=1e-6)


def test_garbled_payload_is_invalid_output_and_retried():
    ex = make(faults=only("detect.run", garbage_rate=1.0))
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert r.ok and r.fallback_used == "detect.backup" and r.attempts == 4
    assert ex.sla_stats()["detect.run"].attempt_error_rate == 1.0


def test_circuit_breaker_opens_on_budget_and_half_opens_to_probe():
    clock = SimClock()
    ex = make(faults=only("detect.run", failure_rate=1.0), clock=clock)
    for _ in range(5):  # breaker_min_calls=5, error_budget=0.2
        r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
        assert r.fallback_used == "detect.backup"
    assert ex.breaker_state("detect.run") == "open"
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert r.attempts == 2  # 1 CIRCUIT_OPEN (not retryable) + 1 on the backup
    clock.advance(2.01)  # breaker_reset_s
    assert ex.breaker_state("detect.run") == "half_open"
    ex.backend.set_faults(FaultConfig())  # the tool recovers
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert r.ok and r.fallback_used is None
    assert ex.breaker_state("detect.run") == "closed"
    states = [s for _, s in ex._state["detect.run"].breaker.transitions]
    assert states == ["open", "half_open", "closed"]


def test_half_open_failure_reopens():
    clock = SimClock()
    ex = make(faults=only("detect.run", failure_rate=1.0), clock=clock)
    for _ in range(5):
        ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    clock.advance(2.01)
    ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert ex.breaker_state("detect.run") == "open"


def test_concurrency_cap_rate_limits():
    gate, entered = threading.Event(), threading.Semaphore(0)

    def slow(world, params):
        entered.release()
        gate.wait(5)
        return {"count": 1, "confidence": params["confidence"]}

    ex = ToolExecutor(
        fixtures.contracts(),
        PythonBackend(handlers={"detect.run": slow}),
        clock=RealClock(),
        rules=fixtures.RULES,
    )
    threads = [
        threading.Thread(target=ex.call, args=("detect.run", {"confidence": 0.5}), kwargs={"intent_id": "i"})
        for _ in range(4)
    ]  # max_concurrency 4
    for t in threads:
        t.start()
    for _ in range(4):
        assert entered.acquire(timeout=5)
    st = ex._state["detect.run"]
    assert st.active == 4
    out = ex._attempt(
        ex.contracts["detect.run"], st, {"confidence": 0.5, "max_detections": 1, "mode": "fast"}, "default"
    )
    assert out.error_code == "RATE_LIMITED" and out.retryable
    gate.set()
    for t in threads:
        t.join()
    assert st.active == 0


def test_everything_fails_gives_human_handoff_with_trace_id():
    ex = make(faults=FaultConfig(failure_rate=1.0))
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i", trace_id="trace-42")
    assert not r.ok and r.handoff and r.error_code == "UPSTREAM_ERROR"
    assert r.payload == {
        "handoff": True,
        "handoff_id": r.handoff_id,
        "trace_id": "trace-42",
        "reason": "UPSTREAM_ERROR",
    }
    assert r.attempts == 6
    # ... and the call is waiting in the queue for a person, with what they need to pick it up.
    (h,) = ex.handoffs.list()
    assert (h.id, h.trace_id, h.intent_id, h.skill, h.reason) == (
        r.handoff_id,
        "trace-42",
        "i",
        "detect.run",
        "UPSTREAM_ERROR",
    )
    assert h.payload == r.params and "detect.backup failed: UPSTREAM_ERROR" in h.message


def test_preconditions_follow_successful_calls_of_the_same_intent():
    ex = make()
    r = ex.call("refund.pay", {"sku": "A", "amount": 5}, intent_id="i1")
    assert r.error_code == "PRECONDITION_FAILED" and "stock.check" in r.message
    assert ex.call("stock.check", {"sku": "B"}, intent_id="i1").payload == {"in_stock": False}
    assert (
        ex.call("refund.pay", {"sku": "B", "amount": 5}, intent_id="i1").error_code == "PRECONDITION_FAILED"
    )
    assert ex.call("stock.check", {"sku": "A"}, intent_id="i1").ok
    assert (
        ex.call("refund.pay", {"sku": "A", "amount": 5}, intent_id="i2").error_code == "PRECONDITION_FAILED"
    )
    r = ex.call("refund.pay", {"sku": "A", "amount": 5}, intent_id="i1")
    assert r.ok and ex.backend.get_world("default")["balance"] == 5.0
    ex.forget_intent("i1")
    assert ex.precondition_status("refund.pay", {"sku": "A"}, "i1")[0] is False


def test_missing_requirement_fails_at_startup_naming_skill_and_resource(monkeypatch):
    data = fixtures.CONTRACTS | {"skills": [dict(s) for s in fixtures.CONTRACTS["skills"]]}
    data["skills"][4]["requires"] = [
        {"kind": "file", "target": "/nonexistent/agentic_ray_test.db"},
        {"kind": "env", "target": "AGENTIC_RAY_TEST_DB_URL"},
        {"kind": "module", "target": "no_such_pkg.driver"},
    ]
    monkeypatch.delenv("AGENTIC_RAY_TEST_DB_URL", raising=False)
    dc = DomainContracts.model_validate(data)
    with pytest.raises(MissingRequirementError) as ei:
        ToolExecutor(dc, PythonBackend(), clock=SimClock(), rules=fixtures.RULES)
    msg = str(ei.value)
    for part in (
        "db.write",
        "/nonexistent/agentic_ray_test.db",
        "AGENTIC_RAY_TEST_DB_URL",
        "no_such_pkg.driver",
    ):
        assert part in msg, msg
    assert set(ei.value.missing) == {"db.write"} and len(ei.value.missing["db.write"]) == 3
    # Without the skill on the whitelist nothing needs it; once the variable is set, only the rest is missing.
    assert ToolExecutor(dc, PythonBackend(), rules=fixtures.RULES, whitelist={"stock.check"}).whitelist == {
        "stock.check"
    }
    monkeypatch.setenv("AGENTIC_RAY_TEST_DB_URL", "sqlite:///x")
    with pytest.raises(MissingRequirementError) as ei:
        ToolExecutor(dc, PythonBackend(), rules=fixtures.RULES)
    assert "AGENTIC_RAY_TEST_DB_URL" not in str(ei.value)


def test_sla_stats_track_latency_and_errors():
    ex = make(faults=only("detect.backup", latency_ms=10.0, latency_std_ms=0.0))
    for _ in range(10):
        ex.call("detect.backup", {"confidence": 0.5}, intent_id="i")
    s = ex.sla_stats()["detect.backup"]
    assert s.calls == 10 and s.error_rate == 0.0 and s.breaker_state == "closed"
    assert 10.0 <= s.p50_ms < 11.0 and s.p95_ms >= s.p50_ms


def test_audit_log_is_append_only_sqlite(tmp_path):
    ex = make(audit_path=tmp_path / "audit.sqlite")
    ex.call("stock.check", {"sku": "A"}, intent_id="i", trace_id="t")
    ex.call("detect.run", {"confidence": 2}, intent_id="i", trace_id="u")
    ex.audit.flush()
    db = sqlite3.connect(tmp_path / "audit.sqlite")
    rows = db.execute(
        "SELECT intent_id, trace_id, skill, params, result_code, attempts FROM audit"
    ).fetchall()
    assert rows[0] == ("i", "t", "stock.check", '{"sku": "A"}', "OK", 1)
    assert rows[1][2:] == ("detect.run", '{"confidence": 0.9, "max_detections": 10, "mode": "fast"}', "OK", 1)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("UPDATE audit SET result_code='X'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("DELETE FROM audit")


def test_an_in_memory_audit_keeps_its_window_and_a_file_keeps_every_call(tmp_path):
    """An in-memory log holds the latest ``audit_window`` calls (ids are call numbers, so the dropped ones show),
    readable by SQL after any number of appends; a file, the durable record, keeps them all."""
    ex = make(audit_window=3)
    for i in range(5):
        ex.call("stock.check", {"sku": f"S{i}"}, intent_id="i", trace_id=f"t{i}")
    rows = ex.audit.rows()
    assert [r["id"] for r in rows] == [3, 4, 5] and [r["trace_id"] for r in rows] == ["t2", "t3", "t4"]
    assert ex.audit.count() == 3 and ex.audit.dropped == 2
    ex.call("stock.check", {"sku": "S5"}, intent_id="i", trace_id="t5")  # the window moves after a read
    assert [r["trace_id"] for r in ex.audit.rows("trace_id > ?", ("t3",))] == ["t4", "t5"]
    assert make(audit_window=None).audit.dropped == 0
    f = make(audit_path=tmp_path / "a.sqlite", audit_window=3)
    for i in range(5):
        f.call("stock.check", {"sku": f"S{i}"}, intent_id="i", trace_id=f"t{i}")
    assert f.audit.count() == 5 and f.audit.dropped == 0


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["fast", "accurate", "turbo"]),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["confidence", "max_detections", "mode", "verbose", "note", "part", "zzz"]),
        _values,
        max_size=7,
    )
)
def test_property_params_validate_in_bounds_or_invalid_input(params):
    ex = _PROP_EX
    r = ex.call("detect.run", params, intent_id="p")
    if r.error_code == "INVALID_INPUT":
        return
    assert r.ok, r
    p = r.params
    assert (
        0.3 <= p["confidence"] <= 0.9 and 1 <= p["max_detections"] <= 50 and p["mode"] in ("fast", "accurate")
    )
    assert set(p) <= {"confidence", "max_detections", "mode", "verbose", "note", "part"}


_PROP_EX = make()


def test_retries_share_an_idempotency_key_so_effects_happen_once():
    calls = []

    def refund(world, params):
        calls.append(params)
        world["balance"] = world.get("balance", 0.0) + params["amount"]
        return {"refunded": params["amount"]}

    handlers = {"refund.pay": refund, "stock.check": fixtures.stock}
    # Every reply of refund.pay arrives garbled: the handler ran, the caller cannot tell.
    ex = ToolExecutor(
        fixtures.contracts(),
        PythonBackend(handlers=handlers, faults=only("refund.pay", garbage_rate=1.0)),
        clock=SimClock(),
        rules=fixtures.RULES,
    )
    ex.backend.put_world("default", {"stock": {"A": 3}, "balance": 0.0})
    assert ex.call("stock.check", {"sku": "A"}, intent_id="i").ok
    r = ex.call("refund.pay", {"sku": "A", "amount": 5.0}, intent_id="i")
    assert r.attempts == 3 and r.error_code == "INVALID_OUTPUT"
    assert len(calls) == 1 and ex.backend.get_world("default")["balance"] == 5.0
    ex.backend.set_faults(FaultConfig())
    assert ex.call("refund.pay", {"sku": "A", "amount": 5.0}, intent_id="i").ok  # a new call is a new key
    assert len(calls) == 2
