"""Simulated backend health for a domain's world: per skill a latency and failure rate that wander around their
base values and revert to them (mean-reverting drift). A domain draws the base values per world
(:func:`draw_tool_health`), drifts them each tick (:func:`drift_tool_health`) and reports them through
``Domain.tool_health``; the env injects them as latency and failures when ``simulate_tool_health`` is on.

The e-commerce and help-desk worlds keep their tables in a :class:`DriftingToolHealth`, which applies the drift
when it is read; the inspection world keeps a plain dict, drifted at every tick.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DriftingToolHealth",
    "ToolHealth",
    "draw_tool_health",
    "drift_tool_health",
    "drifting_tool_health",
    "health_tick",
]

PENDING_MAX = 256
"""Drift ticks a :class:`DriftingToolHealth` keeps before it applies them unread (two ``(n,)`` arrays each)."""


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
    return _health_table(base, _health_draws(r, len(base)))


def drifting_tool_health(
    r: random.Random, base: Mapping[str, tuple[float, float, float]]
) -> DriftingToolHealth:
    """:func:`draw_tool_health` as a :class:`DriftingToolHealth`: the normal draws are made from ``r`` now (it
    draws on), the table is built from them at the first read (the same float operations on the same numbers)."""
    draws = _health_draws(r, len(base))
    return DriftingToolHealth(draw=functools.partial(_health_table, base, draws), size=len(base))


def _health_draws(r: random.Random, n: int) -> list[tuple[float, float]]:
    """Per tool, the latency's and the failure rate's normal draws, in that order."""
    return [(r.gauss(0.0, 0.15), r.gauss(0.0, 0.5)) for _ in range(n)]


def _health_table(
    base: Mapping[str, tuple[float, float, float]], draws: list[tuple[float, float]]
) -> dict[str, ToolHealth]:
    return {
        name: ToolHealth(
            latency_ms=(lat := mean * math.exp(g_lat)),
            latency_std_ms=std,
            failure_rate=(fr := min(0.5, rate * math.exp(g_fr))),
            base_latency_ms=lat,
            base_failure_rate=fr,
        )
        for (name, (mean, std, rate)), (g_lat, g_fr) in zip(base.items(), draws, strict=True)
    }


def drift_tool_health(health: Mapping[str, Any], rng: np.random.Generator) -> None:
    """One tick (in place): latency takes a lognormal step (σ 0.03) and the failure rate a normal one (σ 0.002),
    each pulled 2% back toward its base. A :class:`DriftingToolHealth` keeps the tick's draws until it is read."""
    if isinstance(health, DriftingToolHealth):
        health.drift(rng)
        return
    _apply_tick(
        list(health.values()), rng.normal(0.0, 0.03, len(health)), rng.normal(0.0, 0.002, len(health))
    )


def _apply_tick(hs: list[Any], lat_noise: np.ndarray, fr_noise: np.ndarray) -> None:
    """One drift tick on ``hs`` from its draws: ``lat_noise`` ~ N(0, 0.03) and ``fr_noise`` ~ N(0, 0.002)."""
    for h, a, b in zip(hs, np.exp(lat_noise).tolist(), fr_noise.tolist(), strict=True):
        h.latency_ms, h.failure_rate = health_tick(h, a, b)


class DriftingToolHealth(Mapping[str, Any]):
    """A world's tool health, ``skill -> ToolHealth``, whose drift ticks are applied when it is read.

    A world drifts its tool health every env step, but only the env's ``simulate_tool_health`` (off by default),
    a world's ``to_dict`` (the HTTP backend) and quantile fitting read it. So :meth:`drift` draws the tick's noise
    from the env's RNG, the same draws in the same order as an applied tick, and keeps them; the first read
    applies the kept ticks in order through :func:`health_tick`, so every value read is the value ticks applied
    at once would have left, bit for bit. The table itself may be drawn at the first read too (``draw``): the
    e-commerce world's is the last thing its world's stdlib RNG draws, so drawing it later draws the same numbers.
    Measured on e-commerce (random masked policy, 20k steps): the drift's per-tool loop and the table's draw
    were ~2.5% and ~1.5% of env time (py-spy); help-desk's drift loop ~2%.

    Args:
        table: the drawn table (a dict), or None with ``draw``.
        draw: draws the table at the first read (then ``size``, its number of tools, is required).
        size: the number of tools ``draw`` draws.
    """

    def __init__(
        self,
        table: dict[str, Any] | None = None,
        *,
        draw: Callable[[], dict[str, Any]] | None = None,
        size: int | None = None,
    ) -> None:
        if (table is None) == (draw is None) or (draw is not None and size is None):
            raise ValueError("give either a table, or draw and size")
        self._table = table
        self._draw = draw
        self._size = len(table) if table is not None else int(size or 0)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []

    def drift(self, rng: np.random.Generator) -> None:
        """One tick (see :func:`drift_tool_health`): its draws are made now and applied at the next read."""
        self._pending.append((rng.normal(0.0, 0.03, self._size), rng.normal(0.0, 0.002, self._size)))
        if len(self._pending) >= PENDING_MAX:
            self.table()

    def table(self) -> dict[str, Any]:
        """The current table (drawn and drifted up to now); its entries are live, later ticks update them."""
        if self._table is None:
            assert self._draw is not None
            self._table, self._draw = self._draw(), None
        if self._pending:
            hs = list(self._table.values())
            for lat_noise, fr_noise in self._pending:
                _apply_tick(hs, lat_noise, fr_noise)
            self._pending = []
        return self._table

    def __getitem__(self, skill: str) -> Any:
        return self.table()[skill]

    def __iter__(self) -> Iterator[str]:
        return iter(self.table())

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"DriftingToolHealth({self.table()!r})"


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
