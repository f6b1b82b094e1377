"""Sweep settings (``tune_sweeps/<sweep>.yaml``): the base experiment, the search space, searcher, objectives.

Validated at load like experiment files: a wrong field, an objective that is not a validation metric, a grid
searcher over a continuous range or an ASHA scheduler with two objectives is an error that names the field.
Checks that need the base experiment (are the reward layers enabled, does the default lie in the space) are done
when the space is built (:func:`agentic_ray.sweeps.search_space.build_search_space`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_ray.settings import SettingsError, StageName, apply_overrides, load_model
from agentic_ray.sweeps.validation_metrics import VALIDATION_METRICS

#: Setting prefixes a trial may not change when trials share one imitation checkpoint: they shape the
#: imitation policy or the module, so every trial would need its own imitation stage.
IMITATION_PREFIXES = ("env.", "model.", "stages.il.", "seed", "ray.")


def _stages(*names: StageName) -> list[StageName]:
    return list(names)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParamSpec(_Strict):
    """One swept setting: a list of values, or a numeric range."""

    values: list[Any] | None = Field(
        default=None,
        description="Values to try: the grid (grid searcher) or the categories (random, optuna).",
    )
    low: float | None = Field(default=None, description="Lower end of a numeric range (random, optuna).")
    high: float | None = Field(default=None, description="Upper end of a numeric range (random, optuna).")
    log: bool = Field(default=False, description="Sample the range on a log scale (learning rates).")
    integer: bool = Field(default=False, description="Sample integers from the range.")
    default: Any | None = Field(
        default=None,
        description="The baseline's value; None reads it from the experiment (or AAAC's config default).",
    )

    @model_validator(mode="after")
    def _check(self) -> ParamSpec:
        ranged = self.low is not None or self.high is not None
        if (self.values is None) == (not ranged):
            raise ValueError("give either `values` or `low` and `high`")
        if ranged:
            if self.low is None or self.high is None or not self.low < self.high:
                raise ValueError(f"need low < high, got low={self.low}, high={self.high}")
            if self.log and self.low <= 0:
                raise ValueError("a log-scale range needs low > 0")
        elif not self.values:
            raise ValueError("`values` must not be empty")
        return self


class RewardWeightsSpace(_Strict):
    """Weights of reward-stream layers on a simplex: they keep their sum and stay within their bounds."""

    layers: list[str] = Field(description="Reward-stream layers whose weights are searched (at least two).")
    total: float | None = Field(
        default=None,
        gt=0,
        description="Sum of the searched weights; None keeps the experiment's sum over these layers, so the "
        "other layers keep their share.",
    )
    minimum: dict[str, float] = Field(
        default_factory=dict,
        description="Lower bounds per layer (seed 000: execution >= 0.4, below it tool stability collapsed).",
    )
    maximum: dict[str, float] = Field(
        default_factory=dict, description="Upper bounds per layer (seed 000: quality drowned above 0.5)."
    )
    grid_step: float | None = Field(
        default=None, gt=0, description="Grid searcher: every multiple of this step that meets the bounds."
    )
    points: list[list[float]] | None = Field(
        default=None,
        description="Grid searcher: explicit weight vectors (in `layers` order) instead of a step.",
    )

    @model_validator(mode="after")
    def _check(self) -> RewardWeightsSpace:
        if len(self.layers) < 2 or len(set(self.layers)) != len(self.layers):
            raise ValueError("`layers` needs at least two distinct layers")
        for name, bounds in (("minimum", self.minimum), ("maximum", self.maximum)):
            unknown = set(bounds) - set(self.layers)
            if unknown:
                raise ValueError(f"`{name}` names layers not in `layers`: {sorted(unknown)}")
        if self.grid_step is not None and self.points is not None:
            raise ValueError("give `grid_step` or `points`, not both")
        for p in self.points or []:
            if len(p) != len(self.layers):
                raise ValueError(f"point {p} has {len(p)} weights for {len(self.layers)} layers")
        return self

    def bounds(self, total: float) -> tuple[list[float], list[float]]:
        """Lower and upper bounds in ``layers`` order (0 and ``total`` where none is given)."""
        return (
            [float(self.minimum.get(n, 0.0)) for n in self.layers],
            [float(self.maximum.get(n, total)) for n in self.layers],
        )


class SchedulerSettings(_Strict):
    """Trial scheduler: FIFO, or ASHA early stopping on a single objective."""

    name: Literal["fifo", "asha"] = Field(default="fifo", description="fifo, or asha (one objective only).")
    grace_period: int = Field(default=1, ge=1, description="ASHA: evaluations before a trial can be stopped.")
    reduction_factor: float = Field(default=3.0, gt=1, description="ASHA: halving rate.")
    max_t: int | None = Field(
        default=None, ge=1, description="ASHA: most evaluations per trial; None counts the trial's own."
    )


class OptunaSettings(_Strict):
    """The Optuna sampler behind Tune's OptunaSearch."""

    sampler: Literal["tpe", "gp", "nsga2"] = Field(
        default="tpe",
        description="tpe (Bayesian, multi-objective TPE), gp (Gaussian-process Bayesian optimisation) or "
        "nsga2 (evolutionary).",
    )
    seed: int = Field(default=0, description="Sampler seed.")


class SweepWandbSettings(_Strict):
    mode: Literal["offline", "online", "disabled"] = Field(
        default="offline", description="wandb mode of the per-trial runs (WandbLoggerCallback)."
    )
    project: str = Field(default="agentic-ray-sweeps", description="wandb project.")


class SweepSettings(_Strict):
    """A Tune sweep over an experiment's settings, ranked on validation metrics."""

    name: str = Field(description="Sweep name (prefix of the sweep directory).")
    experiment: str = Field(description="Base experiment YAML (relative paths: from the current directory).")
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Dotted overrides of the base experiment (e.g. a smaller budget); they are part of every "
        "trial and of the best-config YAMLs.",
    )
    storage: str = Field(
        default="sweeps",
        description="Where sweep directories are created. On a multi-node cluster: a path every node sees.",
    )
    shared_imitation: bool = Field(
        default=True,
        description="Run imitation once and start every trial from its checkpoint (trials then cannot change "
        "env, model, imitation or seed settings).",
    )
    trial_stages: list[StageName] = Field(
        default_factory=lambda: _stages("rl"),
        description="Pipeline stages each trial runs (after the shared imitation when that is on).",
    )
    searcher: Literal["grid", "random", "optuna"] = Field(
        default="grid", description="grid (every combination), random, or optuna (Bayesian, multi-objective)."
    )
    num_samples: int = Field(
        default=1,
        ge=1,
        description="grid: passes over the grid; random/optuna: trials drawn (the default comes on top).",
    )
    include_default: bool = Field(
        default=True, description="Also run the experiment's own values as a trial (the baseline)."
    )
    objectives: list[str] = Field(
        default_factory=lambda: ["completion", "high_risk_share"],
        description=f"Validation metrics to optimise, primary first: {sorted(VALIDATION_METRICS)}. Each has "
        "its fixed direction (completion max, high_risk_share min, ...). Training reward is not allowed.",
    )
    pareto_pairs: list[tuple[str, str]] = Field(
        default_factory=lambda: [("completion", "high_risk_share")],
        description="Metric pairs whose Pareto front is written as CSV and PNG.",
    )
    reward_weights: RewardWeightsSpace | None = Field(
        default=None, description="Reward-layer weights on a simplex."
    )
    params: dict[str, ParamSpec] = Field(
        default_factory=dict,
        description="Other swept settings by dotted path (algo.training.w_reward, "
        "algo.training.lambda_length_threshold, algo.lr, ...).",
    )
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings, description="Trial scheduler.")
    optuna: OptunaSettings = Field(default_factory=OptunaSettings, description="searcher: optuna.")
    max_concurrent_trials: int = Field(default=1, ge=1, description="Trials running at once.")
    max_failures: int = Field(
        default=2, ge=0, description="Retries of a failed trial, each from its latest checkpoint."
    )
    checkpoints_to_keep: int = Field(default=2, ge=1, description="Checkpoints kept per trial.")
    best_configs: int = Field(
        default=3, ge=1, description="Experiment YAMLs written for the best-ranked trials."
    )
    wandb: SweepWandbSettings = Field(default_factory=SweepWandbSettings, description="Per-trial logging.")
    seed: int = Field(default=0, description="Seed of the random searcher.")

    @model_validator(mode="after")
    def _check(self) -> SweepSettings:
        def check_metric(m: str, where: str) -> None:
            if m not in VALIDATION_METRICS:
                raise ValueError(
                    f"{where}: {m!r} is not a validation metric; sweeps rank on {sorted(VALIDATION_METRICS)} "
                    "(never on the training reward)"
                )

        if not self.objectives or len(set(self.objectives)) != len(self.objectives):
            raise ValueError("`objectives` needs at least one metric, each once")
        for m in self.objectives:
            check_metric(m, "objectives")
        for a, b in self.pareto_pairs:
            check_metric(a, "pareto_pairs")
            check_metric(b, "pareto_pairs")
            if a == b:
                raise ValueError(f"pareto_pairs: ({a}, {b}) needs two different metrics")
        if self.reward_weights is None and not self.params:
            raise ValueError("nothing to search: give `reward_weights` and/or `params`")
        if self.scheduler.name == "asha" and len(self.objectives) != 1:
            raise ValueError("the asha scheduler needs exactly one objective (it stops trials on one metric)")
        if not self.trial_stages:
            raise ValueError("`trial_stages` must name at least one stage")
        if self.searcher == "grid":
            ranged = [p for p, s in self.params.items() if s.values is None]
            if ranged:
                raise ValueError(
                    f"the grid searcher needs `values` for {ranged} (ranges are for random/optuna)"
                )
            rw = self.reward_weights
            if rw is not None and rw.grid_step is None and rw.points is None:
                raise ValueError("the grid searcher needs reward_weights.grid_step or reward_weights.points")
        elif self.reward_weights is not None and (
            self.reward_weights.grid_step is not None or self.reward_weights.points is not None
        ):
            raise ValueError("reward_weights.grid_step/points are for the grid searcher")
        if self.shared_imitation:
            if "il" in self.trial_stages:
                raise ValueError(
                    "with shared_imitation, trials start after imitation: drop 'il' from trial_stages"
                )
            touched = [p for p in self.params if p.startswith(IMITATION_PREFIXES)]
            if touched:
                raise ValueError(
                    f"with shared_imitation, trials cannot change {touched} (they shape the imitation policy or "
                    "the module); set shared_imitation: false to run imitation in every trial"
                )
        return self

    def base_raw(self) -> dict[str, Any]:
        """The base experiment as a raw dict with ``overrides`` applied (not yet validated)."""
        path = Path(self.experiment)
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise SettingsError(f"{path}: cannot read the sweep's base experiment: {e}") from e
        return apply_overrides(raw, copy.deepcopy(self.overrides))  # a fresh dict on every call


def load_sweep(path: str | Path, overrides: dict[str, Any] | None = None) -> SweepSettings:
    """Load and validate a sweep YAML with dotted ``overrides`` on top.

    Keys under ``overrides.`` change the base experiment rather than the sweep, and keep their dots:
    ``{"overrides.stages.rl.iterations": 2}`` adds ``stages.rl.iterations: 2`` to the sweep's ``overrides``.
    """
    prefix = "overrides."
    experiment = {k[len(prefix) :]: v for k, v in (overrides or {}).items() if k.startswith(prefix)}
    sweep = {k: v for k, v in (overrides or {}).items() if not k.startswith(prefix)}
    s = load_model(path, SweepSettings, sweep)
    return s.model_copy(update={"overrides": {**s.overrides, **experiment}}) if experiment else s
