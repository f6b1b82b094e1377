"""Error injection (seed 000): a share of episodes runs with one injected fault kind, decaying over training.

Kinds: ``garbage`` (garbled payloads in a valid JSON shell), ``transient`` (failures and timeouts), ``outage``
(some of the task's skills fully down). The share of faulty episodes decays from ``start_share`` to ``end_share``
with training progress. :func:`backend_faults` turns the episode's fault and the domain's simulated tool health
into the backend's :class:`~agentic_ray.skills.backends.FaultConfig`.

Caller errors (issue 13) are injected apart from tool faults: ``caller_error_share`` of episodes carry one wrong
call (a wrong entity, stale information or a parameter above its limit, or the control, a one-off failure of the
call's tool; weighted by ``caller_errors``), which the domain prepares at reset
(:meth:`~agentic_ray.domains.protocol.Domain.caller_error_setup`) and makes
(:meth:`~agentic_ray.domains.protocol.Domain.caller_error`) on the first call that can carry it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from agentic_ray.domains.caller_errors import CALLER_ERROR_CAUSES, INJECTED_CAUSES
from agentic_ray.skills.backends import FaultConfig

__all__ = ["FAULT_KINDS", "FaultScheduleConfig", "backend_faults", "draw_caller_error", "draw_faults"]

FAULT_KINDS = ("garbage", "transient", "outage")


class FaultScheduleConfig(BaseModel):
    """Error injection (seed 000): the share of episodes with injected faults decays over training progress."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="Inject faults at all (off in tests and benchmarks).")
    start_share: float = Field(default=1.0, ge=0, le=1, description="Share of faulty episodes at progress 0.")
    end_share: float = Field(default=0.05, ge=0, le=1, description="Share of faulty episodes at progress 1.")
    decay: Literal["linear", "exponential"] = Field(
        default="exponential", description="Shape of the decay between start and end share."
    )
    kinds: dict[str, float] = Field(
        default_factory=lambda: {"garbage": 1.0, "transient": 1.0, "outage": 1.0},
        description="Relative weights of fault kinds: garbled payloads, transient failures, a skill outage.",
    )
    garbage_rate: float = Field(
        default=0.3, ge=0, le=1, description="Garbled-payload rate in a garbage episode."
    )
    transient_rate: float = Field(default=0.3, ge=0, le=1, description="Failure rate in a transient episode.")
    timeout_rate: float = Field(default=0.1, ge=0, le=1, description="Timeout rate in a transient episode.")
    outage_skills: int = Field(
        default=1, ge=1, description="Skills (among the task's) fully down in an outage."
    )

    caller_error_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of episodes with one injected caller error (independent of `enabled` and the decay).",
    )
    caller_errors: dict[str, float] = Field(
        default_factory=lambda: dict.fromkeys(CALLER_ERROR_CAUSES, 1.0),
        description="Relative weights of the injected errors: the caller errors wrong_entity, stale_information and "
        "bad_parameters (the default, equal weights), and optionally tool_error (the call's tool fails once: the "
        "control whose fix is a plain retry; the demonstrations use it). A task that cannot carry the drawn kind "
        "gets another one it can carry.",
    )

    @field_validator("kinds", "caller_errors")
    @classmethod
    def _known_weights(cls, v: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        known = FAULT_KINDS if info.field_name == "kinds" else INJECTED_CAUSES
        if set(v) - set(known) or not v or sum(v.values()) <= 0:
            raise ValueError(f"{info.field_name} must weight {known} positively, got {v}")
        return v

    def share(self, progress: float) -> float:
        """Share of faulty episodes at training progress ``progress`` in [0, 1]."""
        p = min(max(progress, 0.0), 1.0)
        if self.decay == "linear" or self.start_share <= 0 or self.end_share <= 0:
            return self.start_share + (self.end_share - self.start_share) * p
        return self.start_share * (self.end_share / self.start_share) ** p


def draw_faults(
    cfg: FaultScheduleConfig, share: float, task_skills: list[str], rng: np.random.Generator
) -> tuple[str | None, frozenset[str]]:
    """The episode's fault kind (None: a clean episode) and, for an outage, the skills that are down."""
    kind: str | None = None
    if cfg.enabled and rng.random() < share:
        kinds = list(cfg.kinds)
        w = np.array([cfg.kinds[k] for k in kinds], dtype=np.float64)
        kind = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
    down: frozenset[str] = frozenset()
    if kind == "outage" and task_skills:
        skills = sorted(set(task_skills))
        n = min(cfg.outage_skills, len(skills))
        down = frozenset(skills[int(i)] for i in rng.choice(len(skills), size=n, replace=False))
    return kind, down


def draw_caller_error(cfg: FaultScheduleConfig, rng: np.random.Generator) -> str | None:
    """The root cause of the episode's injected caller error, or None for an episode without one."""
    if cfg.caller_error_share <= 0 or rng.random() >= cfg.caller_error_share:
        return None
    causes = list(cfg.caller_errors)
    w = np.array([cfg.caller_errors[c] for c in causes], dtype=np.float64)
    return causes[int(rng.choice(len(causes), p=w / w.sum()))]


_NO_FAULTS = FaultConfig()
"""The faults of an episode with none, built once: most resets push it, and building a pydantic model each time
was ~1.4 us of a ~4.5 us push (small: ~0.1% of env time). Only read (a :class:`FaultInjector` reads its config)."""


def backend_faults(
    cfg: FaultScheduleConfig,
    kind: str | None,
    down: frozenset[str],
    skills: tuple[str, ...],
    health: dict[str, tuple[float, float, float]] | None,
    seed: int,
) -> FaultConfig:
    """Backend faults: the episode's injected fault kind plus, if given, the domain's live tool health."""
    if kind is None and not health:
        return _NO_FAULTS
    per: dict[str, FaultConfig] = {}
    for s in skills:
        lat, std, fr = (health or {}).get(s, (0.0, 0.0, 0.0))
        tr = gr = 0.0
        if kind == "transient":
            fr, tr = min(1.0, fr + cfg.transient_rate), cfg.timeout_rate
        elif kind == "garbage":
            gr = cfg.garbage_rate
        if s in down:
            fr, tr, gr = 1.0, 0.0, 0.0
        per[s] = FaultConfig(
            failure_rate=fr, timeout_rate=tr, garbage_rate=gr, latency_ms=lat, latency_std_ms=std
        )
    return FaultConfig(per_skill=per, seed=seed)
