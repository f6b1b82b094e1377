"""A closed-loop HTTP load generator for the policy service (the benchmark and the integration tests use it).

``concurrency`` clients each send a request, wait for its answer and send the next, until ``duration_s`` ends
(or ``stop`` is set). Every answer is recorded with its completion time, status and (for JSON answers) body, so
callers can see when a switch took effect and whether any request failed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

__all__ = ["LoadResult", "closed_loop", "episode_loop"]


@dataclass
class LoadResult:
    """What a load run saw."""

    duration_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: int = 0
    """Failed requests: a status other than 200, or no answer at all."""
    answers: list[tuple[float, int, Any]] = field(default_factory=list)
    """``(completion time, status, JSON body or None)`` when recorded."""

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.duration_s if self.duration_s else 0.0

    def pct(self, q: float) -> float | None:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else None


async def closed_loop(
    base_url: str,
    path: str,
    bodies: Sequence[dict[str, Any]],
    concurrency: int,
    duration_s: float,
    headers: dict[str, str],
    record: bool = False,
    stop: asyncio.Event | None = None,
    timeout_s: float = 60.0,
    into: LoadResult | None = None,
) -> LoadResult:
    """POST ``bodies`` (round-robin) to ``path`` from ``concurrency`` clients (``into``: a result to fill, which
    a caller can watch while the load runs)."""
    res = into if into is not None else LoadResult()
    cycle = itertools.cycle(bodies)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout_s, limits=limits) as c:
        t0 = time.perf_counter()
        deadline = t0 + duration_s

        async def client() -> None:
            while time.perf_counter() < deadline and not (stop and stop.is_set()):
                body = next(cycle)
                t = time.perf_counter()
                try:
                    r = await c.post(path, json=body)
                    status = r.status_code
                    data = r.json() if record else None
                except (httpx.HTTPError, json.JSONDecodeError):
                    status, data = 0, None
                done = time.perf_counter()
                res.latencies_ms.append((done - t) * 1e3)
                res.statuses[status] += 1
                res.errors += int(status != 200)
                if record:
                    res.answers.append((done, status, data))

        await asyncio.gather(*(client() for _ in range(concurrency)))
        res.duration_s = time.perf_counter() - t0
    return res


async def episode_loop(
    base_url: str,
    body: Callable[[int], dict[str, Any]],
    concurrency: int,
    duration_s: float,
    headers: dict[str, str],
    stop: Callable[[], bool] = lambda: False,
    timeout_s: float = 120.0,
) -> LoadResult:
    """Stream agent-mode episodes (``POST /v1/episodes``) from ``concurrency`` clients; ``body(i)`` is the i-th
    episode's request. Each answer records ``(time, status, [step events])``; an episode that does not end with
    a ``done`` step counts as an error."""
    res = LoadResult()
    counter = itertools.count()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout_s, limits=limits) as c:
        t0 = time.perf_counter()
        deadline = t0 + duration_s

        async def client() -> None:
            while time.perf_counter() < deadline and not stop():
                t = time.perf_counter()
                steps: list[dict[str, Any]] = []
                status = 0
                try:
                    async with c.stream("POST", "/v1/episodes", json=body(next(counter))) as r:
                        status = r.status_code
                        event = ""
                        async for line in r.aiter_lines():
                            if line.startswith("event: "):
                                event = line[7:]
                            elif line.startswith("data: ") and event == "step":
                                steps.append(json.loads(line[6:]))
                except (httpx.HTTPError, json.JSONDecodeError):
                    status = 0
                ok = status == 200 and bool(steps) and bool(steps[-1].get("done"))
                done = time.perf_counter()
                res.latencies_ms.append((done - t) * 1e3)
                res.statuses[status] += 1
                res.errors += int(not ok)
                res.answers.append((done, status, steps))

        await asyncio.gather(*(client() for _ in range(concurrency)))
        res.duration_s = time.perf_counter() - t0
    return res
