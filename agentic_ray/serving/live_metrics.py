"""Live service metrics: latency percentiles and request counts for ``/v1/metrics``, and the same numbers as
Prometheus metrics through ``ray.util.metrics`` (exported by Ray's metrics agent, tagged by route, status and
arm)."""

from __future__ import annotations

from collections import Counter, deque
from typing import Any, Protocol

import numpy as np

__all__ = ["LatencyWindow", "LiveMetrics", "MetricsSink", "NullSink", "RayMetricsSink"]

LATENCY_BOUNDARIES_MS = [
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    30.0,
    50.0,
    75.0,
    100.0,
    150.0,
    200.0,
    300.0,
    500.0,
    1e3,
    2e3,
    5e3,
]


class MetricsSink(Protocol):
    """Where metrics go besides ``/v1/metrics``."""

    def request(self, route: str, status: int, ms: float) -> None: ...

    def outcome(self, arm: str, ok: bool) -> None: ...

    def gauges(self, values: dict[str, dict[str, float]]) -> None: ...


class NullSink:
    """No export (unit tests, no Ray)."""

    def request(self, route: str, status: int, ms: float) -> None:
        pass

    def outcome(self, arm: str, ok: bool) -> None:
        pass

    def gauges(self, values: dict[str, dict[str, float]]) -> None:
        pass


class RayMetricsSink:
    """Prometheus metrics through ``ray.util.metrics`` (only inside a Ray worker, e.g. a Serve replica)."""

    def __init__(self) -> None:
        from ray.util.metrics import Counter as RayCounter
        from ray.util.metrics import Gauge, Histogram

        self._requests = RayCounter(
            "agentic_serve_requests", "HTTP requests by route and status.", tag_keys=("route", "status")
        )
        self._latency = Histogram(
            "agentic_serve_latency_ms",
            "Request latency in the gateway (ms).",
            boundaries=LATENCY_BOUNDARIES_MS,
            tag_keys=("route",),
        )
        self._calls = RayCounter(
            "agentic_serve_tool_calls", "Tool-call outcomes by deciding arm.", tag_keys=("arm", "ok")
        )
        self._gauges: dict[str, Any] = {
            name: Gauge(f"agentic_serve_{name}", desc, tag_keys=("arm",))
            for name, desc in (
                ("tcsr", "Live tool-call success rate by arm."),
                ("dvr", "Live DAG validity rate by arm."),
                ("traffic_share", "Share of new traffic by arm."),
                ("strategy_rules", "1 while strategy_mode is rules."),
            )
        }

    def request(self, route: str, status: int, ms: float) -> None:
        self._requests.inc(tags={"route": route, "status": str(status)})
        self._latency.observe(ms, tags={"route": route})

    def outcome(self, arm: str, ok: bool) -> None:
        self._calls.inc(tags={"arm": arm, "ok": str(ok).lower()})

    def gauges(self, values: dict[str, dict[str, float]]) -> None:
        for name, by_arm in values.items():
            for arm, v in by_arm.items():
                self._gauges[name].set(v, tags={"arm": arm})


class LatencyWindow:
    """The last ``size`` latencies of one route."""

    def __init__(self, size: int = 4096) -> None:
        self._ms: deque[float] = deque(maxlen=size)
        self.count = 0

    def add(self, ms: float) -> None:
        self._ms.append(ms)
        self.count += 1

    def summary(self) -> dict[str, float | int | None]:
        if not self._ms:
            return {"count": self.count, "p50": None, "p90": None, "p99": None}
        a = np.fromiter(self._ms, dtype=np.float64)
        p50, p90, p99 = np.percentile(a, [50, 90, 99])
        return {"count": self.count, "p50": float(p50), "p90": float(p90), "p99": float(p99)}


class LiveMetrics:
    """Per-route latency windows and status counts (what ``/v1/metrics`` reports), mirrored to a sink."""

    def __init__(self, sink: MetricsSink | None = None) -> None:
        self.sink: MetricsSink = sink or NullSink()
        self.latency: dict[str, LatencyWindow] = {}
        self.status: Counter[str] = Counter()

    def request(self, route: str, status: int, ms: float) -> None:
        self.latency.setdefault(route, LatencyWindow()).add(ms)
        self.status[f"{route} {status}"] += 1
        self.sink.request(route, status, ms)

    def summary(self) -> dict[str, Any]:
        return {
            "latency_ms": {r: w.summary() for r, w in sorted(self.latency.items())},
            "requests": dict(sorted(self.status.items())),
        }
