"""The real HTTP skill server in a subprocess on a free loopback port, driven through the executor."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import pytest
import yaml

from agentic_ray.skills.backends import HttpBackend
from agentic_ray.skills.contracts import load_contracts
from agentic_ray.skills.executor import RealClock, ToolExecutor
from agentic_ray.skills.server import skill_server_process
from tests.unit.skills import fixtures

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def toy_contract_file(tmp_path_factory) -> Path:
    data = yaml.safe_load(yaml.safe_dump(fixtures.CONTRACTS))
    # Fast backoff so the test spends its time on HTTP, not sleeping; breaker tuned for the test.
    for s in data["skills"]:
        s["retry"] = {"max_retries": 2, "backoff_initial_ms": 1.0, "backoff_max_ms": 4.0}
    data["skills"][0]["sla"] = {
        "timeout_ms": 500,
        "p95_ms": 200,
        "error_budget": 0.2,
        "window": 20,
        "breaker_min_calls": 10,
        "breaker_reset_s": 0.5,
    }
    p = tmp_path_factory.mktemp("contracts") / "toy.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_http_server_with_transient_faults(toy_contract_file, tmp_path):
    args = ["--contracts", str(toy_contract_file), "--failure-rate", "0.3", "--seed", "7"]
    with skill_server_process(args, cwd=str(REPO)) as url:
        backend = HttpBackend(url)
        backend.put_world("default", {"stock": {"A": 3}, "balance": 0.0})
        audit = tmp_path / "audit.sqlite"
        ex = ToolExecutor(
            load_contracts(toy_contract_file),
            backend,
            audit_path=audit,
            clock=RealClock(),
            rules=fixtures.RULES,
        )

        # 1) 30% transient failures: retries absorb nearly all of them.
        results = [ex.call("stock.check", {"sku": "A"}, intent_id="http") for _ in range(120)]
        attempts = Counter(r.attempts for r in results)
        assert attempts[1] > 50 and attempts[2] + attempts[3] > 15, attempts
        direct_ok = sum(r.ok and r.fallback_used is None for r in results)
        assert direct_ok >= 110, direct_ok  # 1 - 0.3**3 = 97.3% expected
        assert all(r.ok for r in results)  # the rest degrade to the conservative_stock rule
        assert {r.fallback_used for r in results} <= {None, "rule:conservative_stock"}
        assert all(r.latency_ms > 0 for r in results)

        # 2) An outage trips the breaker; recovery half-opens and closes it.
        httpx.put(
            f"{url}/faults", json={"per_skill": {"detect.run": {"failure_rate": 1.0}}}
        ).raise_for_status()
        for _ in range(10):
            r = ex.call("detect.run", {"confidence": 0.5}, intent_id="http")
            assert r.ok and r.fallback_used == "detect.backup"
        assert ex.breaker_state("detect.run") == "open"
        r = ex.call("detect.run", {"confidence": 0.5}, intent_id="http")
        assert r.fallback_used == "detect.backup" and r.attempts == 2  # CIRCUIT_OPEN short-circuits
        httpx.put(f"{url}/faults", json={}).raise_for_status()
        import time

        time.sleep(0.6)
        assert ex.breaker_state("detect.run") == "half_open"
        r = ex.call("detect.run", {"confidence": 0.5}, intent_id="http")
        assert r.ok and r.fallback_used is None and ex.breaker_state("detect.run") == "closed"

        # 3) Real effects over HTTP, and the world comes back.
        assert ex.call("refund.pay", {"sku": "A", "amount": 2.5}, intent_id="http").ok
        assert backend.get_world("default")["balance"] == 2.5

        # 4) The audit log has one row per agent-level call with its attempts.
        rows = ex.audit.rows()
        assert len(rows) == 120 + 10 + 1 + 1 + 1
        assert [r["attempts"] for r in rows[:120]] == [r.attempts for r in results]
        assert {r["intent_id"] for r in rows} == {"http"}
        assert len({r["trace_id"] for r in rows}) == len(rows)
        ex.close()
