"""Per-client request rates: a token bucket per bearer token, with the wait a refused client is told.

A plain class with an injected clock (the gateway's guard middleware calls :meth:`RequestRate.admit` once per
request of a known client). Agent-mode sessions are counted per client by
:class:`~agentic_ray.serving.sessions.SessionManager`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["RequestRate", "retry_after"]


def retry_after(seconds: float) -> str:
    """The ``Retry-After`` header value (whole seconds, at least 1) for a wait of ``seconds``."""
    return str(max(1, math.ceil(seconds)))


class RequestRate:
    """``rate`` requests per second per client, ``burst`` at once.

    Args:
        rate: tokens added per second.
        burst: the bucket's size (a new client starts full).
        clock: monotonic seconds.
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()
        self.refused: dict[str, int] = {}

    def admit(self, client: str) -> float | None:
        """Take a token for one request of ``client``: None when admitted, else the seconds until one is free."""
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[client] = (tokens - 1.0, now)
                return None
            self._buckets[client] = (tokens, now)
            self.refused[client] = self.refused.get(client, 0) + 1
            return (1.0 - tokens) / self.rate
