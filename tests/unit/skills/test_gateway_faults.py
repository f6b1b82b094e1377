"""The gateway under faults: degraded fallbacks, a breaker whose probe raises, the human-handoff queue."""

from __future__ import annotations

import copy
import random
import sqlite3
from typing import Any

import pytest
from typer.testing import CliRunner

from agentic_ray.cli import app
from agentic_ray.domains import get_domain, sample_world
from agentic_ray.skills.backends import FaultConfig, FaultInjector, PythonBackend, RawOutcome
from agentic_ray.skills.circuit_breaker import CircuitBreaker
from agentic_ray.skills.contracts import DomainContracts, SkillContract
from agentic_ray.skills.executor import SimClock, ToolExecutor
from agentic_ray.skills.handoff_queue import HandoffQueue
from tests.unit.skills import fixtures


def _shop(seed: int = 7) -> tuple[ToolExecutor, Any]:
    d = get_domain("ecommerce")
    world = sample_world(d, seed)
    ex = ToolExecutor(d.contracts(), PythonBackend(), clock=SimClock(), rules=d.fallback_rules())
    ex.backend.put_world("w", world)
    return ex, world


def test_canned_fallback_reply_is_degraded_and_unlocks_no_precondition():
    # A rule whose canned reply WOULD satisfy refund.pay's precondition (stock.check with in_stock: true).
    data = copy.deepcopy(fixtures.CONTRACTS)
    data["skills"][2]["fallback"] = [{"rule": "optimistic_stock"}]
    rules = {**fixtures.RULES, "optimistic_stock": lambda skill, params: {"in_stock": True}}
    ex = ToolExecutor(DomainContracts.model_validate(data), PythonBackend(), clock=SimClock(), rules=rules)
    ex.backend.put_world("default", {"stock": {"A": 3}, "balance": 0.0})
    ex.backend.set_faults(FaultConfig(per_skill={"stock.check": FaultConfig(failure_rate=1.0)}, seed=0))
    r = ex.call("stock.check", {"sku": "A"}, intent_id="i")
    assert (
        r.ok and r.degraded and r.fallback_used == "rule:optimistic_stock" and r.payload["in_stock"] is True
    )
    assert ex.history("i") == []
    r = ex.call("refund.pay", {"sku": "A", "amount": 5.0}, intent_id="i")
    assert r.error_code == "PRECONDITION_FAILED" and r.attempts == 0  # the canned reply does not count
    ex.backend.set_faults(FaultConfig())
    assert ex.call("stock.check", {"sku": "A"}, intent_id="i").degraded is False
    r = ex.call("refund.pay", {"sku": "A", "amount": 5.0}, intent_id="i")
    assert r.ok and not r.degraded
    assert [h.skill for h in ex.history("i")] == ["stock.check", "refund.pay"]
    rows = ex.audit.rows()
    assert [(x["skill"], x["result_code"], x["degraded"]) for x in rows] == [
        ("stock.check", "OK", 1),
        ("refund.pay", "PRECONDITION_FAILED", 0),
        ("stock.check", "OK", 0),
        ("refund.pay", "OK", 0),
    ]


def test_every_shipped_fallback_rule_fits_its_skills_output_contract():
    ex, world = _shop()
    ex.backend.set_faults(FaultConfig(failure_rate=1.0, seed=0))
    calls = {
        "inventory.check": {"sku": world.products[0].sku},
        "sms.send": {"user_id": world.user.id, "template": "refund_notice"},
    }
    assert {c.name for c in ex.contracts.values() if any(f.rule for f in c.fallback)} == set(calls)
    for skill, params in calls.items():
        r = ex.call(skill, params, intent_id="rules", world_id="w")
        assert r.ok and r.degraded and r.fallback_used and r.fallback_used.startswith("rule:"), (skill, r)


def _with_rule(rule: str) -> DomainContracts:
    data = copy.deepcopy(fixtures.CONTRACTS)
    data["skills"][0]["fallback"] = [{"rule": rule}]  # detect.run's output is {count: int, confidence: float}
    return DomainContracts.model_validate(data)


def test_fallback_reply_that_breaks_the_output_contract_is_skipped_then_handed_off():
    ex = ToolExecutor(
        _with_rule("conservative_stock"),
        PythonBackend(faults=FaultConfig(failure_rate=1.0)),
        clock=SimClock(),
        rules=fixtures.RULES,
    )
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i", trace_id="t1")
    assert not r.ok and r.handoff and r.fallback_used is None and not r.degraded
    assert any("rule:conservative_stock reply breaks detect.run's output contract" in w for w in r.warnings)
    assert "missing field 'count'" in r.message


def test_fallback_skill_checks_its_own_preconditions_and_is_recorded_as_itself():
    data = copy.deepcopy(fixtures.CONTRACTS)
    backup = data["skills"][1]
    backup["preconditions"] = [{"after": "stock.check", "where": {"in_stock": True}}]
    dc = DomainContracts.model_validate(data)
    ex = ToolExecutor(
        dc,
        PythonBackend(faults=_only("detect.run", failure_rate=1.0)),
        clock=SimClock(),
        rules=fixtures.RULES,
    )
    ex.backend.put_world("default", {"stock": {"A": 3}})
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert r.handoff and any("fallback detect.backup skipped: precondition" in w for w in r.warnings)
    assert ex.call("stock.check", {"sku": "A"}, intent_id="i").ok
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert r.ok and r.degraded and r.fallback_used == "detect.backup"
    assert [h.skill for h in ex.history("i")] == ["stock.check", "detect.backup"]  # what actually ran


def _only(skill: str, **kw: Any) -> FaultConfig:
    return FaultConfig(per_skill={skill: FaultConfig(**kw)}, seed=0)


class RaisingBackend(PythonBackend):
    """A real in-process backend that raises (a bug, a dropped connection in a client library) while ``down``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.invoked: list[str] = []

    def invoke(self, contract: SkillContract, *args: Any, **kw: Any) -> RawOutcome:
        self.invoked.append(contract.name)
        if self.down:
            raise ConnectionResetError("peer reset the connection")
        return super().invoke(contract, *args, **kw)


def test_breaker_recovers_after_a_half_open_probe_raises():
    clock = SimClock()
    backend = RaisingBackend()
    ex = ToolExecutor(fixtures.contracts(), backend, clock=clock, rules=fixtures.RULES)
    backend.down = True
    for _ in range(5):  # breaker_min_calls=5, error_budget=0.2: it opens
        r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
        assert not r.ok and r.error_code == "UPSTREAM_ERROR" and "ConnectionResetError" in r.message
    assert ex.breaker_state("detect.run") == "open"
    clock.advance(2.01)  # breaker_reset_s: the next call is the probe, and it raises
    assert ex.breaker_state("detect.run") == "half_open"
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert not r.ok and r.handoff
    assert ex.breaker_state("detect.run") == "open"  # the raising probe was recorded as a failed probe
    backend.down = False
    clock.advance(2.01)
    backend.invoked.clear()
    r = ex.call("detect.run", {"confidence": 0.5}, intent_id="i")
    assert r.ok and r.fallback_used is None and backend.invoked == ["detect.run"]  # the primary runs again
    assert ex.breaker_state("detect.run") == "closed"


def test_a_lost_probe_reopens_the_breaker_instead_of_wedging_it():
    t = [0.0]
    b = CircuitBreaker(
        error_budget=0.0, window=5, min_calls=1, reset_s=1.0, now=lambda: t[0], probe_timeout_s=3.0
    )
    assert b.allow()
    b.record(True)
    assert b.state == "open" and not b.allow()
    t[0] = 1.0
    assert b.allow()  # the probe goes out ... and its caller never reports back
    assert not b.allow() and b.state == "half_open"
    t[0] = 4.5  # past probe_timeout_s: the probe is lost
    assert b.state == "open" and not b.allow()
    t[0] = 5.5
    assert b.allow()
    b.record(False)
    assert b.state == "closed" and b.allow()
    assert [s for _, s in b.transitions] == ["open", "half_open", "open", "half_open", "closed"]


def test_handoffs_are_queued_in_the_audit_file_listed_and_resolved(tmp_path):
    audit = tmp_path / "audit.sqlite"
    ex = ToolExecutor(
        fixtures.contracts(),
        PythonBackend(faults=FaultConfig(failure_rate=1.0)),
        audit_path=audit,
        clock=SimClock(),
        rules=fixtures.RULES,
    )
    r1 = ex.call("detect.run", {"confidence": 0.5}, intent_id="i1", trace_id="tr-1")
    r2 = ex.call("detect.backup", {"confidence": 0.7, "mode": "accurate"}, intent_id="i2", trace_id="tr-2")
    assert r1.handoff and r2.handoff and r1.handoff_id != r2.handoff_id
    ex.close()

    q = HandoffQueue(audit)  # another process (a person's console) opens the same file
    items = q.list()
    assert [(h.id, h.trace_id, h.skill, h.reason, h.status) for h in items] == [
        (r1.handoff_id, "tr-1", "detect.run", "UPSTREAM_ERROR", "open"),
        (r2.handoff_id, "tr-2", "detect.backup", "UPSTREAM_ERROR", "open"),
    ]
    assert items[1].payload == {"confidence": 0.7, "max_detections": 10, "mode": "accurate"}

    runner = CliRunner()
    out = runner.invoke(app, ["skills", "handoffs", "--audit", str(audit)])
    assert out.exit_code == 0 and "tr-1" in out.output and "2 open handoff(s)" in out.output
    out = runner.invoke(app, ["skills", "handoffs", "--audit", str(audit), "--resolve", str(r1.handoff_id)])
    assert out.exit_code == 0
    assert runner.invoke(
        app, ["skills", "handoffs", "--audit", str(audit), "--resolve", str(r1.handoff_id)]
    ).exit_code
    out = runner.invoke(app, ["skills", "handoffs", "--audit", str(audit), "--json", "--status", "all"])
    assert [line.count('"resolved"') > 0 for line in out.output.splitlines()] == [True, False]
    assert [h.id for h in q.list()] == [r2.handoff_id]
    assert runner.invoke(app, ["skills", "handoffs", "--audit", str(tmp_path / "none.sqlite")]).exit_code == 2

    db = sqlite3.connect(audit)
    with pytest.raises(sqlite3.DatabaseError, match="never deleted"):
        db.execute("DELETE FROM handoffs")
    with pytest.raises(sqlite3.DatabaseError, match="open to resolved"):
        db.execute("UPDATE handoffs SET skill = 'x'")
    q.close()


def test_fault_injector_seeds_its_generator_lazily_to_the_same_draws():
    """The injector seeds its generator at the first draw that needs one: a seeded config draws what a generator
    seeded up front would (latency and kind per call), and a config with no faults never builds one."""
    cfg = FaultConfig(failure_rate=0.3, timeout_rate=0.2, latency_ms=50.0, latency_std_ms=20.0, seed=11)
    inj, r = FaultInjector(cfg), random.Random(11)
    for _ in range(200):
        u, lat = r.random(), max(0.0, r.gauss(50.0, 20.0))
        want = "timeout" if u < 0.2 else ("failure" if u < 0.5 else None)
        assert inj.draw("order.get") == (want, lat)
    idle = FaultInjector(FaultConfig())
    assert idle.draw("order.get") == (None, 0.0) and idle._rng is None
