"""A per-skill circuit breaker that trips on the contract's *error budget* (a rate), not a failure streak.

Why not pybreaker (measured and read in pybreaker 1.4.1):

* ``CircuitBreaker.call`` holds the breaker's lock for the whole guarded call, so calls of one skill run one at
  a time: four concurrent 200 ms calls took 0.80 s through ``pybreaker.call`` instead of 0.20 s, which would
  make a contract's ``max_concurrency`` meaningless.
* It opens after ``fail_max`` *consecutive* failures. A contract states an error budget ("≤0.3% errors over the
  window", seed 000); a skill failing 40% of the time with a success in between never trips a streak counter.
* Its open timeout reads ``datetime.now``; simulated training runs the executor on a virtual clock.

This breaker keeps a rolling window of call outcomes and opens when the window holds at least ``min_calls``
calls and its error rate exceeds the budget. After ``reset_s`` it half-opens and admits one probe at a time:
success closes it (and clears the window), failure re-opens it. Like pybreaker's half-open state, a probe that
never reports back cannot wedge it: a probe out for longer than ``probe_timeout_s`` counts as failed, the breaker
re-opens, and the next probe goes out ``reset_s`` later. Time comes from an injected clock.
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
        self,
        error_budget: float,
        window: int,
        min_calls: int,
        reset_s: float,
        now: Callable[[], float],
        probe_timeout_s: float | None = None,
    ):
        """Args:
        error_budget: share of failed calls in the window above which the breaker opens.
        window: calls in the rolling window.
        min_calls: calls in the window before it may open.
        reset_s: open time before a half-open probe.
        now: the clock (seconds).
        probe_timeout_s: how long a probe may stay out without a :meth:`record` (default: ``reset_s``).
        """
        self.error_budget = error_budget
        self.min_calls = min_calls
        self.reset_s = reset_s
        self.probe_timeout_s = reset_s if probe_timeout_s is None else probe_timeout_s
        self._now = now
        self._window: deque[bool] = deque(maxlen=window)  # True = error
        self._errors = 0
        self._state = self.CLOSED
        self._opened_at = 0.0
        self._probe_since: float | None = None  # when the outstanding half-open probe was admitted
        self._lock = threading.Lock()
        self.transitions: list[tuple[float, str]] = []

    @property
    def state(self) -> str:
        with self._lock:
            self._tick()
            return self._state

    def _set(self, state: str) -> None:
        self._state = state
        self.transitions.append((self._now(), state))

    def _open(self) -> None:
        self._opened_at = self._now()
        self._probe_since = None
        self._set(self.OPEN)

    def _tick(self) -> None:
        """Time-driven moves: open → half-open after ``reset_s``; a lost probe re-opens."""
        now = self._now()
        if (
            self._state == self.HALF_OPEN
            and self._probe_since is not None
            and now - self._probe_since > self.probe_timeout_s
        ):
            self._open()
        if self._state == self.OPEN and now - self._opened_at >= self.reset_s:
            self._set(self.HALF_OPEN)
            self._probe_since = None

    def allow(self) -> bool:
        """Whether a call may go through now (a half-open breaker admits one probe at a time).

        Every admitted call must be followed by exactly one :meth:`record`.
        """
        with self._lock:
            self._tick()
            if self._state == self.CLOSED:
                return True
            if self._state == self.HALF_OPEN and self._probe_since is None:
                self._probe_since = self._now()
                return True
            return False

    def record(self, error: bool) -> None:
        """Record the outcome of a call that :meth:`allow` admitted."""
        with self._lock:
            if self._state == self.HALF_OPEN:
                if error:
                    self._open()
                else:
                    self._window.clear()
                    self._errors = 0
                    self._probe_since = None
                    self._set(self.CLOSED)
                return
            if len(self._window) == self._window.maxlen and self._window[0]:
                self._errors -= 1
            self._window.append(error)
            self._errors += error
            n = len(self._window)
            if self._state == self.CLOSED and n >= self.min_calls and self._errors / n > self.error_budget:
                self._open()

    @property
    def error_rate(self) -> float:
        with self._lock:
            return self._errors / len(self._window) if self._window else 0.0
