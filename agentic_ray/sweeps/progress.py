"""Sweep progress as plain lines: trials started, every evaluation, retries, and running/done/best so far.

Tune's own reporters redraw a wide table every few seconds, which turns into pages of repeated tables in a
``ray job`` log or a CI log; these lines read the same on a terminal and in a file (the sweep runs Tune with
``verbose=0`` and this callback instead).
"""

from __future__ import annotations

import time
from typing import Any

from ray.tune import Callback

from agentic_ray.sweeps.ranking import rank_trials, trial_row
from agentic_ray.sweeps.search_space import SearchSpace
from agentic_ray.sweeps.validation_metrics import tune_key


def echo(line: str) -> None:
    print(line, flush=True)


def short_name(path: str) -> str:
    """``rewards.layers.execution.weight`` → ``w.execution``; ``algo.training.w_reward`` → ``w_reward``."""
    parts = path.split(".")
    if path.startswith("rewards.layers.") and parts[-1] == "weight":
        return f"w.{parts[2]}"
    return parts[-1]


def format_params(params: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    return " ".join(f"{short_name(k)}={fmt(v)}" for k, v in params.items())


class SweepProgress(Callback):
    """Prints one line per trial event and a running/done/best-so-far line when a trial ends."""

    def __init__(self, space: SearchSpace, objectives: list[str], total: int | None) -> None:
        self.space, self.objectives, self.total = space, objectives, total
        self.t0 = time.monotonic()

    def _say(self, msg: str) -> None:
        echo(f"[sweep {time.monotonic() - self.t0:6.0f}s] {msg}")

    def _metrics(self, result: dict[str, Any]) -> str:
        shown = list(dict.fromkeys([*self.objectives, "completion", "high_risk_share", "tcsr_policy", "spt"]))
        return "  ".join(f"{m} {result[tune_key(m)]:.3f}" for m in shown if tune_key(m) in result)

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        params = format_params(self.space.overrides(trial.config))
        default = " (the default values)" if self.space.is_default(self.space.overrides(trial.config)) else ""
        self._say(f"trial {trial.trial_id} started{default}: {params}")

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        where = f"{result.get('stage')} {result.get('stage_iteration')}"
        self._say(f"trial {trial.trial_id} [{where}] {self._metrics(result)}")

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._say(f"trial {trial.trial_id} failed; retrying from its latest checkpoint")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._say(f"trial {trial.trial_id} FAILED after its retries")
        self._status(trials, trial, "ERROR")

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        n = (trial.last_result or {}).get("training_iteration")
        self._say(f"trial {trial.trial_id} done ({n} evaluations)")
        self._status(trials, trial, "TERMINATED")

    def _status(self, trials: list[Any], ended: Any, status: str) -> None:
        """``ended`` still has its old status while Tune runs these callbacks; count it as ``status``."""
        states = [status if t is ended else t.status for t in trials]
        by = {s: states.count(s) for s in ("RUNNING", "TERMINATED", "ERROR", "PENDING")}
        rows = [
            trial_row(t.trial_id, st, t.config, t.last_result, self.space, self.objectives)
            for t, st in zip(trials, states, strict=True)
            if t.last_result
        ]
        ranked = [r for r in rank_trials(rows, self.objectives) if r["rank"] is not None]
        best = (
            f"best so far {ranked[0]['trial_id']}: "
            + "  ".join(f"{m} {ranked[0]['metrics'][m]:.3f}" for m in self.objectives)
            if ranked
            else "no evaluation yet"
        )
        total = self.total if self.total is not None else len(trials)
        self._say(
            f"running {by['RUNNING']}, done {by['TERMINATED']}/{total}, failed {by['ERROR']}, "
            f"pending {by['PENDING']} | {best}"
        )
