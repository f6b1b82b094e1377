"""The executor's rolling SLA windows (issue 32) read what the deques they replaced read: the sorted latency window
is ``sorted(window)`` element for element (equal values, signed zeros and NaN included), and a flag window's rate is
``sum(window) / len(window)``, through many evictions."""

from __future__ import annotations

import math
import random

from agentic_ray.skills.executor import _FlagWindow, _LatencyWindow, _pct


def _same(xs: list[float], ys: list[float]) -> bool:
    return len(xs) == len(ys) and all(
        (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))
        for x, y in zip(xs, ys, strict=True)
    )


def test_the_latency_window_is_its_values_sorted() -> None:
    r = random.Random(0)
    for size in (5, 50):
        w = _LatencyWindow(size)
        pool = [0.0, -0.0, 1.5, 2.0, 25.0, 1e6]
        for i in range(3000):
            x = r.choice(pool) if r.random() < 0.5 else round(r.expovariate(0.05), 1)
            if 1000 <= i < 1100 and r.random() < 0.1:
                x = math.nan  # a NaN for a while: the window sorts on read, then drops it
            w.append(x)
            want = sorted(w.values)
            assert _same(w.sorted(), want), i
            assert math.copysign(1, _pct(w.sorted(), 0.5)) == math.copysign(1, _pct(want, 0.5))


def test_the_flag_window_counts_its_flags() -> None:
    r = random.Random(1)
    w = _FlagWindow(20)
    assert w.rate() == 0.0
    for i in range(500):
        w.append(r.random() < 0.3)
        assert w.rate() == sum(w.values) / len(w.values), i
