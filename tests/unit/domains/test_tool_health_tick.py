"""``health_tick`` (the per-step tool-health drift, issue 32) gives bit for bit what the ``max``/``min`` formula
it replaced gives, on random values and at the clamps (NaN and -0.0 included)."""

from __future__ import annotations

import math
import random

from agentic_ray.domains.tool_health import ToolHealth, health_tick


def _reference(h: ToolHealth, a: float, b: float) -> tuple[float, float]:
    lat = max(1.0, h.base_latency_ms * (h.latency_ms / h.base_latency_ms) ** 0.98 * a)
    fr = min(0.5, max(0.0, h.base_failure_rate + (h.failure_rate - h.base_failure_rate) * 0.98 + b))
    return lat, fr


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))


def test_health_tick_equals_the_max_min_formula() -> None:
    r = random.Random(0)
    cases = [
        ToolHealth(r.uniform(0.5, 900), 1.0, r.uniform(-0.01, 0.6), r.uniform(0.5, 900), r.uniform(0, 0.5))
        for _ in range(3000)
    ]
    cases += [ToolHealth(1.0, 1.0, fr, 1.0, 0.0) for fr in (0.0, -0.0, 0.5, 0.51, -1e-12, math.nan)]
    clamped = 0
    for h in cases:
        for a, b in ((r.lognormvariate(0, 0.5), r.gauss(0, 0.2)), (1.0, 0.0), (0.5, -0.0), (1.0, math.nan)):
            got, want = health_tick(h, a, b), _reference(h, a, b)
            assert all(_same(x, y) for x, y in zip(got, want, strict=True)), (h, a, b, got, want)
            clamped += got[0] == 1.0 or got[1] in (0.0, 0.5)
    assert clamped > 500  # the clamps were exercised
