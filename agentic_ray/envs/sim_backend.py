"""An in-process backend whose reported latency is the *simulated* latency only.

:class:`~agentic_ray.skills.backends.PythonBackend` reports measured wall time plus simulated latency. In a
simulated env the wall time of a Python handler (microseconds, but milliseconds on a first import or a GC pause)
is noise that would leak into the executor's SLA statistics, hence into observations and masks, and break
seeded reproducibility. This subclass keeps everything else (handlers, worlds, fault injection, garbling) and
reports only what the fault injector drew.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.skills.backends import FaultConfig, FaultInjector, PythonBackend, RawOutcome
from agentic_ray.skills.contracts import SkillContract


class _RecordingInjector(FaultInjector):
    """A fault injector that remembers the latency of its last draw."""

    def __init__(self, cfg: FaultConfig | None = None) -> None:
        super().__init__(cfg)
        self.last_ms = 0.0

    def draw(self, skill: str) -> tuple[str | None, float]:
        kind, ms = super().draw(skill)
        self.last_ms = ms
        return kind, ms


class SimulatedLatencyBackend(PythonBackend):
    """:class:`PythonBackend` with deterministic, simulated-only latency (never sleeps)."""

    def __init__(self, handlers: dict[str, Any] | None = None, faults: FaultConfig | None = None) -> None:
        super().__init__(handlers, faults, realtime=False)
        self._recorder = _RecordingInjector(faults)
        self.faults = self._recorder

    def set_faults(self, faults: FaultConfig) -> None:
        self._recorder = _RecordingInjector(faults)
        self.faults = self._recorder

    def invoke(
        self, contract: SkillContract, params: dict[str, Any], world_id: str, timeout_s: float
    ) -> RawOutcome:
        out = super().invoke(contract, params, world_id, timeout_s)
        sim = self._recorder.last_ms
        # An injected timeout already reports simulated time only (at least 1.5 x the timeout).
        out.latency_ms = out.latency_ms if out.error_code == "TOOL_TIMEOUT" else sim
        return out
