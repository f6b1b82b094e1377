"""A per-skill circuit breaker that trips on the contract's *error budget* (a rate), not a failure streak.

Why not pybreaker: pybreaker opens after ``fail_max`` *consecutive* failures. A contract states an error budget
("≤0.3% errors over the window", seed 000), and a skill failing 40% of the time with a success in between
never trips a streak counter. This breaker keeps a rolling window of call outcomes and opens when the window
holds at least ``min_calls`` calls and its error rate exceeds the budget; after ``reset_s`` it half-opens and lets
exactly one probe through: success closes it (and clears the window), failure re-opens it. Time comes from an
injected clock so simulated time works too.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable


class CircuitBreaker:
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"

    def __init__(
        self, error_budget: float, window: int, min_calls: int, reset_s: float, now: Callable[[], float]
    ):
        self.error_budget = error_budget
        self.min_calls = min_calls
        self.reset_s = reset_s
        self._now = now
        self._window: deque[bool] = deque(maxlen=window)  # True = error
        self._errors = 0
        self._state = self.CLOSED
        self._opened_at = 0.0
        self._probe_out = False
        self._lock = threading.Lock()
        self.transitions: list[tuple[float, str]] = []

    @property
    def state(self) -> str:
        with self._lock:
            self._maybe_half_open()
            return self._state

    def _set(self, state: str) -> None:
        self._state = state
        self.transitions.append((self._now(), state))

    def _maybe_half_open(self) -> None:
        if self._state == self.OPEN and self._now() - self._opened_at >= self.reset_s:
            self._set(self.HALF_OPEN)
            self._probe_out = False

    def allow(self) -> bool:
        """Whether a call may go through now (a half-open breaker admits one probe at a time)."""
        with self._lock:
            self._maybe_half_open()
            if self._state == self.CLOSED:
                return True
            if self._state == self.HALF_OPEN and not self._probe_out:
                self._probe_out = True
                return True
            return False

    def record(self, error: bool) -> None:
        """Record the outcome of a call that :meth:`allow` admitted."""
        with self._lock:
            if self._state == self.HALF_OPEN:
                self._probe_out = False
                if error:
                    self._opened_at = self._now()
                    self._set(self.OPEN)
                else:
                    self._window.clear()
                    self._errors = 0
                    self._set(self.CLOSED)
                return
            if len(self._window) == self._window.maxlen and self._window[0]:
                self._errors -= 1
            self._window.append(error)
            self._errors += error
            n = len(self._window)
            if self._state == self.CLOSED and n >= self.min_calls and self._errors / n > self.error_budget:
                self._opened_at = self._now()
                self._set(self.OPEN)

    @property
    def error_rate(self) -> float:
        with self._lock:
            return self._errors / len(self._window) if self._window else 0.0
