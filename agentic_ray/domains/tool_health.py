"""Simulated backend health for a domain's world: per skill a latency and failure rate that wander around their
base values and revert to them (mean-reverting drift). A domain draws the base values per world
(:func:`draw_tool_health`), drifts them each tick (:func:`drift_tool_health`) and reports them through
``Domain.tool_health``; the env injects them as latency and failures when ``simulate_tool_health`` is on.

(The e-commerce world still carries its own copy of this from before it was shared; the help-desk world uses
this one.)
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ToolHealth", "draw_tool_health", "drift_tool_health", "health_tick"]


@dataclass
class ToolHealth:
    """Simulated health of one backend service."""

    latency_ms: float
    latency_std_ms: float
    failure_rate: float
    base_latency_ms: float
    base_failure_rate: float


def draw_tool_health(
    r: random.Random, base: Mapping[str, tuple[float, float, float]]
) -> dict[str, ToolHealth]:
    """Per skill, a base latency (lognormal around the mean, σ 0.15) and failure rate (lognormal, σ 0.5, at most
    0.5) drawn from ``base``: ``skill -> (mean latency ms, latency std ms, failure rate)``."""
    return {
        name: ToolHealth(
            latency_ms=(lat := mean * math.exp(r.gauss(0.0, 0.15))),
            latency_std_ms=std,
            failure_rate=(fr := min(0.5, rate * math.exp(r.gauss(0.0, 0.5)))),
            base_latency_ms=lat,
            base_failure_rate=fr,
        )
        for name, (mean, std, rate) in base.items()
    }


def drift_tool_health(health: Mapping[str, ToolHealth], rng: np.random.Generator) -> None:
    """One tick (in place): latency takes a lognormal step (σ 0.03) and the failure rate a normal one (σ 0.002),
    each pulled 2% back toward its base."""
    hs = list(health.values())
    lat = np.exp(rng.normal(0.0, 0.03, len(hs))).tolist()
    fr = rng.normal(0.0, 0.002, len(hs)).tolist()
    for h, a, b in zip(hs, lat, fr, strict=True):
        h.latency_ms, h.failure_rate = health_tick(h, a, b)


def health_tick(h: ToolHealth | Any, a: float, b: float) -> tuple[float, float]:
    """One tool's drifted ``(latency_ms, failure_rate)`` (a lognormal factor ``a``, a normal step ``b``).

    The same float operations, in the same order, as ``max(1.0, base * (lat / base) ** 0.98 * a)`` and
    ``min(0.5, max(0.0, base_fr + (fr - base_fr) * 0.98 + b))``, with the clamps written as comparisons (NaN
    and -0.0 included, they give what ``max``/``min`` give): the drift runs every env step for every tool, and
    the builtin calls were ~30% of its loop (a microbenchmark of the e-commerce world's 18 tools: ~24 us a
    tick)."""
    base = h.base_latency_ms
    lat = base * (h.latency_ms / base) ** 0.98 * a
    base_fr = h.base_failure_rate
    fr = base_fr + (h.failure_rate - base_fr) * 0.98 + b
    return (lat if lat > 1.0 else 1.0), ((fr if fr < 0.5 else 0.5) if fr > 0.0 else 0.0)
