"""Gateway benchmark: overhead, task-level success under transient faults, HTTP round trip.

Prints one JSON line:
  overhead_p50_us / overhead_p99_us  per-call gateway time on an in-process no-op skill (handler time subtracted)
  tcsr_at_10pct / tcsr_at_30pct     share of agent-level calls that end successful after retries and fallback,
                                    default contract (2 retries) + one fallback skill, that share of transient faults
  http_p50_ms                       round trip through the real skill server on loopback (executor included)
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.skills.backends import FaultConfig, HttpBackend, PythonBackend
from agentic_ray.skills.contracts import DomainContracts, load_contracts
from agentic_ray.skills.executor import RealClock, SimClock, ToolExecutor
from agentic_ray.skills.server import skill_server_process

CONTRACTS = {
    "domain": "bench",
    "skills": [
        {
            "name": "bench.primary",
            "description": "A no-op skill with the default contract and one fallback.",
            "handler": "agentic_ray.skills.builtin:noop",
            "input": {
                "x": {"type": "float", "min": 0.0, "max": 1.0},
                "mode": {"type": "enum", "choices": ["a", "b"]},
            },
            "output": {"fields": {"done": "bool"}},
            "fallback": [{"skill": "bench.backup"}],
        },
        {
            "name": "bench.backup",
            "description": "The fallback skill.",
            "handler": "agentic_ray.skills.builtin:noop",
            "input": {
                "x": {"type": "float", "min": 0.0, "max": 1.0},
                "mode": {"type": "enum", "choices": ["a", "b"]},
            },
            "output": {"fields": {"done": "bool"}},
        },
    ],
}
PARAMS = {"x": 0.5, "mode": "a"}


def overhead_us(n: int = 20000) -> tuple[float, float]:
    ex = ToolExecutor(DomainContracts.model_validate(CONTRACTS), PythonBackend(), clock=SimClock())
    handler = ex.backend._handler(ex.contracts["bench.primary"])
    for _ in range(2000):
        ex.call("bench.primary", PARAMS, intent_id="warm")
    times = np.empty(n)
    pc = time.perf_counter_ns
    for i in range(n):
        t = pc()
        ex.call("bench.primary", PARAMS, intent_id="bench")
        times[i] = pc() - t
    base = np.empty(n)
    for i in range(n):
        t = pc()
        handler(None, PARAMS)
        base[i] = pc() - t
    ov = (times - np.median(base)) / 1000.0
    return float(np.percentile(ov, 50)), float(np.percentile(ov, 99))


def tcsr(rate: float, n: int = 20000) -> float:
    faults = FaultConfig(failure_rate=rate, seed=1)
    ex = ToolExecutor(
        DomainContracts.model_validate(CONTRACTS), PythonBackend(faults=faults), clock=SimClock()
    )
    ok = sum(ex.call("bench.primary", PARAMS, intent_id="t").ok for _ in range(n))
    return ok / n


def http_p50_ms(n: int = 300) -> float:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "bench.yaml"
        p.write_text(yaml.safe_dump(CONTRACTS))
        with skill_server_process(["--contracts", str(p)]) as url:
            ex = ToolExecutor(load_contracts(p), HttpBackend(url), clock=RealClock())
            for _ in range(30):
                ex.call("bench.primary", PARAMS, intent_id="warm")
            lat = []
            for _ in range(n):
                t = time.perf_counter()
                r = ex.call("bench.primary", PARAMS, intent_id="h")
                lat.append((time.perf_counter() - t) * 1000.0)
                assert r.ok, r
            ex.close()
    return float(np.median(lat))


def main() -> None:
    p50, p99 = overhead_us()
    out = {
        "overhead_p50_us": round(p50, 2),
        "overhead_p99_us": round(p99, 2),
        "tcsr_at_10pct": round(tcsr(0.10), 5),
        "tcsr_at_30pct": round(tcsr(0.30), 5),
        "http_p50_ms": round(http_p50_ms(), 3),
    }
    publish("executor", [out])


if __name__ == "__main__":
    main()
