"""Pydantic settings of the reward layers and the :class:`RewardActorPool` (validated at load)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_ray.keys import ENV_CONTEXT_KEYS
from agentic_ray.rewards.layers import LAYER_CLASSES, Granularity, Stream

logger = logging.getLogger(__name__)

#: Seed 000: below 0.4 on the execution layer, tool stability collapsed.
MIN_EXECUTION_WEIGHT = 0.4


class LayerConfig(BaseModel):
    """One reward layer."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="Score this layer. A disabled layer is not required for settlement."
    )
    weight: float | None = Field(
        default=None,
        description="Weight in its stream's weighted sum; None uses the layer's declared default weight.",
    )
    normalize: Literal["auto", "none", "scale", "standard"] = Field(
        default="auto",
        description="Online normalisation: 'auto' = 'scale' for step-level and 'standard' for episode-level layers.",
    )
    timeout_s: float = Field(
        default=5.0, gt=0, description="Timeout of one scoring attempt (one HTTP request or call)."
    )
    retries: int = Field(default=2, ge=0, description="Extra attempts after a failed or timed-out attempt.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the layer constructor."
    )


class ActorGroupConfig(BaseModel):
    """A pool of Ray actors serving one layer group (cpu: model-based scorers; io: HTTP judges)."""

    model_config = ConfigDict(extra="forbid")

    num_actors: int = Field(default=1, ge=1, description="Actors in the group; calls go round-robin.")
    num_cpus: float = Field(
        default=0.0, ge=0, description="CPUs reserved per actor (0 for I/O-bound async actors)."
    )
    max_concurrency: int = Field(default=1000, ge=1, description="Concurrent calls per actor (async actors).")
    max_restarts: int = Field(default=-1, description="Ray max_restarts of each actor (-1: unlimited).")
    scheduling_strategy: Literal["DEFAULT", "SPREAD"] = Field(
        default="DEFAULT",
        description=(
            "Placement of the group's actors: 'SPREAD' deals them round-robin over the alive nodes (soft node "
            "affinity, so a dead node's actor restarts elsewhere); 'DEFAULT' leaves it to Ray."
        ),
    )


class JudgeConfig(BaseModel):
    """Where the LLM-as-judge layer sends its requests."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible server root. None starts the deterministic rubric judge on a free loopback port.",
    )
    latency_ms: float = Field(
        default=0.0, ge=0, description="Response delay of the local rubric judge (seed 000: 800 ms)."
    )
    server_mode: Literal["thread", "subprocess"] = Field(
        default="subprocess",
        description="How the local rubric judge runs: a uvicorn thread or a separate process.",
    )
    model: str = Field(default="rubric-judge", description="The 'model' field sent with each request.")
    batch_size: int = Field(default=16, ge=1, description="Episodes per chat-completions request.")
    api_key: str | None = Field(default=None, description="Bearer token for a remote judge.")


def default_layers() -> dict[str, LayerConfig]:
    """All registered layers with their default weights, enabled unless the layer is off by default."""
    return {name: LayerConfig(enabled=cls.enabled_by_default) for name, cls in LAYER_CLASSES.items()}


class RewardPoolConfig(BaseModel):
    """The asynchronous reward pipeline: layers, actor groups, missing policy, backpressure and ledger."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["async", "blocking", "zero_latency"] = Field(
        default="async",
        description=(
            "'async': slow layers go to the actor pool and sample() never waits on them (except backpressure). "
            "'blocking': the same actors and batching, but sample() waits until its episodes are scored (the "
            "baseline of the benchmark). "
            "'zero_latency': like 'blocking' but the judge rubric runs in-process with no HTTP and no delay "
            "(reference for what rewards cost when scorers are free)."
        ),
    )
    layers: dict[str, LayerConfig] = Field(
        default_factory=default_layers, description="Layer name → settings; unknown names are an error."
    )
    judge: JudgeConfig = Field(default_factory=lambda: JudgeConfig(), description="LLM-as-judge backend.")
    cpu_group: ActorGroupConfig = Field(
        default_factory=lambda: ActorGroupConfig(
            num_actors=1, num_cpus=0.0, max_concurrency=1, max_restarts=-1
        ),
        description="Actors for CPU-bound (model-based) layers; each call scores a whole batch.",
    )
    io_group: ActorGroupConfig = Field(
        default_factory=lambda: ActorGroupConfig(
            num_actors=1, num_cpus=0.0, max_concurrency=1000, max_restarts=-1
        ),
        description="Async actors for I/O-bound layers (judge, HTTP reward models).",
    )
    max_pending_episodes: int = Field(
        default=1000,
        ge=1,
        description="Backpressure cap on episodes waiting for rewards per EnvRunner. Size ≥ 1.5 × episodes/s × (latency + sample period).",
    )
    max_backpressure_wait_s: float = Field(
        default=20.0, gt=0, description="Longest single backpressure wait; keep well under sample_timeout_s."
    )
    missing_policy: Literal["drop", "hold"] = Field(
        default="drop",
        description="A layer that cannot be scored after its retries: 'drop' the episode, or 'hold' it and retry later.",
    )
    hold_retry_s: float = Field(
        default=5.0, ge=0, description="'hold': wait this long before re-submitting missing layers."
    )
    max_hold_rounds: int = Field(
        default=3, ge=1, description="'hold': rounds of re-submission before the episode is dropped."
    )
    call_deadline_slack_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "A pool call still unanswered this long after its layers' timeouts and retries could have finished is "
            "cancelled (ray.cancel) and its layers go to the missing policy. Ray itself re-runs calls whose actor "
            "died (max_task_retries=-1), so this only catches calls that hang."
        ),
    )
    submit_interval_s: float = Field(
        default=0.0,
        ge=0,
        description="Coalesce submissions: send to the pool at most this often (0: every sample()).",
    )
    ledger_path: str | None = Field(
        default=None, description="SQLite ledger file; None puts it in a fresh temporary directory."
    )
    ledger_flush_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description=(
            "Each sample() writes its ledger events (seals included) and waits this long at most for the ledger "
            "to acknowledge them; keep well under sample_timeout_s."
        ),
    )
    normalize_clip: float = Field(
        default=5.0, gt=0, description="Normalised layer values are clipped to ±this."
    )
    drain_timeout_s: float = Field(
        default=120.0, gt=0, description="Longest wait of drain() before it reports leftovers."
    )
    evaluation: Literal["drain", "skip"] = Field(
        default="drain",
        description="Evaluation EnvRunners: 'drain' scores synchronously (same rewards), 'skip' returns env rewards.",
    )

    @model_validator(mode="after")
    def _check(self) -> RewardPoolConfig:
        unknown = set(self.layers) - set(LAYER_CLASSES)
        if unknown:
            raise ValueError(f"unknown reward layers {sorted(unknown)}; known: {sorted(LAYER_CLASSES)}")
        if not any(LAYER_CLASSES[n].stream is Stream.REWARD for n in self.enabled_layers()):
            raise ValueError("at least one reward-stream layer must be enabled")
        on = "execution" in self.enabled_layers()
        w = self.weight("execution") if on else 0.0
        if w < MIN_EXECUTION_WEIGHT:
            what = (
                f"execution layer weight {w} is below {MIN_EXECUTION_WEIGHT}"
                if on
                else "the execution layer is off"
            )
            msg = (
                f"{what}: seed 000 saw tool stability collapse below {MIN_EXECUTION_WEIGHT} on the execution layer "
                "(a sparse-reward baseline turns it off on purpose)"
            )
            warnings.warn(msg, UserWarning, stacklevel=2)
            logger.warning(msg)
        return self

    def enabled_layers(self) -> list[str]:
        """Names of enabled layers, in config order."""
        return [n for n, c in self.layers.items() if c.enabled]

    def weight(self, layer: str) -> float:
        """The effective weight of ``layer``."""
        c = self.layers[layer]
        return LAYER_CLASSES[layer].default_weight if c.weight is None else float(c.weight)

    def normalize_mode(self, layer: str) -> str:
        """The effective normalisation mode of ``layer``."""
        mode = self.layers[layer].normalize
        if mode != "auto":
            return mode
        return "scale" if LAYER_CLASSES[layer].granularity is Granularity.STEP else "standard"


_REPORTED_OFF: set[tuple[str, str]] = set()


def layers_for_context(cfg: RewardPoolConfig, provided: Collection[str], domain: str) -> RewardPoolConfig:
    """``cfg`` with every enabled layer turned off whose case facts (``context_inputs``) the domain's
    ``reward_context`` does not give: such a layer is off for that domain, not fed zeros.

    One warning per (domain, layer) and process says which layer is off and which facts it lacks.

    Args:
        cfg: the reward pool settings.
        provided: the facts the domain gives (``Domain.reward_context_keys``); the env's own
            (:data:`~agentic_ray.keys.ENV_CONTEXT_KEYS`) count as given for every domain.
        domain: the domain's name (for the message).

    Returns:
        ``cfg`` itself when nothing changes, else a copy with those layers' ``enabled`` False.
    """
    have = set(provided) | set(ENV_CONTEXT_KEYS)
    off = {
        name: missing
        for name in cfg.enabled_layers()
        if (missing := [k for k in LAYER_CLASSES[name].context_inputs if k not in have])
    }
    if not off:
        return cfg
    for name, missing in off.items():
        if (domain, name) not in _REPORTED_OFF:
            _REPORTED_OFF.add((domain, name))
            logger.warning(
                "reward layer %s is off for domain %s: it reads %s, which the domain's reward_context does not give",
                name,
                domain,
                ", ".join(missing),
            )
    layers = {n: c.model_copy(update={"enabled": False}) if n in off else c for n, c in cfg.layers.items()}
    return cfg.model_copy(update={"layers": layers})
