"""Build the Tuner of a sweep, run or resume it, and write its outputs.

Sweep directory (``<storage>/<name>-<time>/``)::

    sweep.json        the validated sweep settings (``--resume`` reads them)
    experiment.json   the base experiment as trials see it (sweep overrides applied)
    imitation/        the shared imitation run (a pipeline run directory with checkpoints/il)
    tune/             Tune's experiment: one directory per trial (result.json, checkpoints, run/, wandb/)
    trials.csv, pareto_*.csv, pareto_*.png, best/*.yaml, summary.json   (see agentic_ray.sweeps.outputs)

Tune runs on whatever Ray the caller connected to: the embedded local one by default, or a cluster (the CLI's
``--address``, or the address ``ray job submit`` gives the job). On several nodes, ``storage`` must be a path every
node sees, as Tune requires for checkpoints; the shared imitation checkpoint lives there too.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ray import tune

from agentic_ray.settings import ExperimentSettings, apply_overrides
from agentic_ray.stages.pipeline import STATE_FILE, PipelineState, run_pipeline
from agentic_ray.sweeps.outputs import write_outputs
from agentic_ray.sweeps.progress import SweepProgress, echo
from agentic_ray.sweeps.ranking import trial_row
from agentic_ray.sweeps.search_space import SearchSpace, build_search_space, default_point, param_space
from agentic_ray.sweeps.sweep_config import SweepSettings
from agentic_ray.sweeps.trial import RUN_SUBDIR, TrialSpec, run_trial
from agentic_ray.sweeps.validation_metrics import VALIDATION_METRICS, tune_key

logger = logging.getLogger(__name__)

SWEEP_FILE = "sweep.json"
EXPERIMENT_FILE = "experiment.json"
IMITATION_DIR = "imitation"
TUNE_DIR = "tune"


@dataclass
class SweepOutcome:
    """What a sweep run returns: its directory, trial counts and the summary written to ``summary.json``."""

    sweep_dir: Path
    summary: dict[str, Any]

    @property
    def ok(self) -> bool:
        """Every trial ended without an error and at least one reported its metrics."""
        return self.summary["errored"] == 0 and self.summary["best"] is not None

    @property
    def exit_code(self) -> int:
        """The CLI's exit code (:func:`agentic_ray.cli.exit_codes.sweep_exit_code`)."""
        from agentic_ray.cli.exit_codes import sweep_exit_code

        return sweep_exit_code(self.ok, self.summary.get("pipeline_status", {}))


class ImitationStopped(RuntimeError):
    """The shared imitation run did not finish (it stopped at its gate or paused): no trial can start."""

    def __init__(self, status: str, run: Path) -> None:
        super().__init__(f"the shared imitation run ended with status {status!r} ({run})")
        self.status = status
        self.run = run


def new_sweep_dir(sweep: SweepSettings) -> Path:
    return Path(sweep.storage).resolve() / f"{sweep.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def shared_imitation(base_raw: dict[str, Any], sweep_dir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Run imitation once for all trials (or reuse a finished run); returns the pipeline state trials start from.

    Reward weights, the advantage mix, λ and the RL learning rate do not enter behaviour cloning, so one
    imitation checkpoint serves every trial and the sweep compares RL settings from the same starting policy.
    """
    run = sweep_dir / IMITATION_DIR
    state_file = run / "state.json"
    if not (state_file.exists() and "il" in PipelineState.load(run).completed):
        raw = apply_overrides(copy.deepcopy(base_raw), {"stages.run": ["il"], "wandb.mode": "disabled"})
        say(f"[sweep] imitation once for every trial, in {run}")
        out = run_pipeline(ExperimentSettings.model_validate(raw), run_dir=run, progress=say)
        if out["status"] != "finished":
            raise ImitationStopped(out["status"], run)
    done = PipelineState.load(run)
    return asdict(
        PipelineState(
            completed=["il"],
            checkpoint=done.checkpoint,
            gates=done.gates,
            il_demos=done.il_demos,
            baseline=done.baseline,
        )
    )


def _evaluations(settings: ExperimentSettings, stages: list[str]) -> int:
    """Evaluations one trial reports (ASHA's ``max_t``)."""
    n = 0
    for stage in stages:
        if stage == "il":
            n += 1
            continue
        its = settings.stages.rl.iterations if stage == "rl" else settings.stages.reflection.iterations
        n += len({i for i in range(1, its + 1) if i % settings.eval.every == 0} | ({its} if its else set()))
    return max(1, n)


def _trial_name(trial: Any) -> str:
    return f"trial_{trial.trial_id}"


def build_searcher(sweep: SweepSettings, space: SearchSpace) -> Any:
    points = [default_point(sweep, space)] if sweep.include_default else []
    if sweep.searcher != "optuna":
        from ray.tune.search.basic_variant import BasicVariantGenerator

        # It limits concurrency itself (TuneConfig's max_concurrent_trials applies to Searchers only).
        return BasicVariantGenerator(
            points_to_evaluate=points, random_state=sweep.seed, max_concurrent=sweep.max_concurrent_trials
        )
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    samplers = {
        "tpe": lambda: optuna.samplers.TPESampler(seed=sweep.optuna.seed),
        "gp": lambda: optuna.samplers.GPSampler(seed=sweep.optuna.seed),
        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=sweep.optuna.seed),
    }
    kw: dict[str, Any] = {}
    if len(sweep.objectives) > 1:  # single objective: metric and mode come from TuneConfig
        kw = {
            "metric": [tune_key(m) for m in sweep.objectives],
            "mode": [VALIDATION_METRICS[m] for m in sweep.objectives],
        }
    return OptunaSearch(sampler=samplers[sweep.optuna.sampler](), points_to_evaluate=points or None, **kw)


def grid_size(space: dict[str, Any]) -> int:
    """Points of a ``param_space``'s grid (1 without grid searches)."""
    return math.prod(
        len(v["grid_search"]) for v in space.values() if isinstance(v, dict) and "grid_search" in v
    )


def expected_trials(sweep: SweepSettings, space: dict[str, Any]) -> int:
    """Trials a sweep with this ``param_space`` runs: the grid (times its passes) or the samples, plus the default."""
    extra = 1 if sweep.include_default else 0
    return sweep.num_samples * (grid_size(space) if sweep.searcher == "grid" else 1) + extra


def _trainable(
    sweep: SweepSettings, base_raw: dict[str, Any], space: SearchSpace, start: dict[str, Any] | None
) -> Any:
    from agentic_ray.algorithms.build import build_algo_config

    base = ExperimentSettings.model_validate(copy.deepcopy(base_raw))
    algo_config = build_algo_config(base)
    # RLlib's own resource request for this algorithm config (driver + learner + EnvRunner bundles); Tune runs
    # the trial in that placement group and the algorithm the trial builds fills it.
    resources = algo_config.algo_class.default_resource_request(algo_config)  # type: ignore[union-attr]
    spec = TrialSpec(base_raw=base_raw, space=space, stages=tuple(sweep.trial_stages), start=start)
    return tune.with_resources(tune.with_parameters(run_trial, spec=spec), resources)


def _run_config(
    sweep: SweepSettings, sweep_dir: Path, space: SearchSpace, total: int, extra: list[Any]
) -> tune.RunConfig:
    callbacks: list[Any] = [SweepProgress(space, list(sweep.objectives), total), *extra]
    if sweep.wandb.mode != "disabled":
        from ray.air.integrations.wandb import WandbLoggerCallback

        _wandb_environment(sweep)
        callbacks.append(
            WandbLoggerCallback(project=sweep.wandb.project, mode=sweep.wandb.mode, log_config=True)
        )
    # Tune's own console output off: SweepProgress prints instead (verbose=0 alone still prints a banner).
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    return tune.RunConfig(
        name=TUNE_DIR,
        storage_path=str(sweep_dir),
        failure_config=tune.FailureConfig(max_failures=sweep.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=sweep.checkpoints_to_keep),
        callbacks=callbacks,
        verbose=0,
    )


def _wandb_environment(sweep: SweepSettings) -> None:
    """WandbLoggerCallback skips its API-key check only through ``WANDB_MODE`` in the environment
    (docs/rllib-notes.md §7). A resumed sweep unpickles the callback without rebuilding the run config, so
    :func:`resume_sweep` sets it too; without it an offline sweep's resume stops at "No WandB API key found"."""
    if sweep.wandb.mode != "disabled":
        os.environ["WANDB_MODE"] = sweep.wandb.mode


def build_tune_config(
    sweep: SweepSettings, space: SearchSpace, base_raw: dict[str, Any], num_samples: int
) -> tune.TuneConfig:
    kw: dict[str, Any] = {}
    if len(sweep.objectives) == 1:
        kw = {"metric": tune_key(sweep.objectives[0]), "mode": VALIDATION_METRICS[sweep.objectives[0]]}
    scheduler = None
    if sweep.scheduler.name == "asha":
        from ray.tune.schedulers import ASHAScheduler

        base = ExperimentSettings.model_validate(copy.deepcopy(base_raw))
        scheduler = ASHAScheduler(
            time_attr="training_iteration",
            grace_period=sweep.scheduler.grace_period,
            reduction_factor=sweep.scheduler.reduction_factor,
            max_t=sweep.scheduler.max_t or _evaluations(base, list(sweep.trial_stages)),
        )
    return tune.TuneConfig(
        search_alg=build_searcher(sweep, space),
        scheduler=scheduler,
        num_samples=num_samples,
        max_concurrent_trials=sweep.max_concurrent_trials if sweep.searcher == "optuna" else None,
        trial_name_creator=_trial_name,
        trial_dirname_creator=_trial_name,
        **kw,
    )


def _prepare(
    sweep: SweepSettings, sweep_dir: Path, base_raw: dict[str, Any], say: Callable[[str], None]
) -> tuple[SearchSpace, Any, int]:
    space = build_search_space(sweep, base_raw)
    start = shared_imitation(base_raw, sweep_dir, say) if sweep.shared_imitation else None
    trainable = _trainable(sweep, base_raw, space, start)
    total = expected_trials(sweep, param_space(sweep, space, base_raw))
    return space, trainable, total


def run_sweep(
    sweep: SweepSettings,
    sweep_dir: Path | None = None,
    say: Callable[[str], None] = echo,
    callbacks: list[Any] | None = None,
) -> SweepOutcome:
    """Run a sweep on the connected Ray (start one with ``ray.init`` first) and write its outputs.

    Args:
        sweep: The sweep settings.
        sweep_dir: Its directory (default: ``<storage>/<name>-<time>``).
        say: Where progress lines go.
        callbacks: Further ``ray.tune.Callback`` objects for the run (the progress lines and wandb are built in).
    """
    t0 = time.monotonic()
    sweep_dir = (sweep_dir or new_sweep_dir(sweep)).resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    base_raw = sweep.base_raw()
    (sweep_dir / SWEEP_FILE).write_text(sweep.model_dump_json(indent=2))
    (sweep_dir / EXPERIMENT_FILE).write_text(json.dumps(base_raw, indent=2))
    say(f"[sweep] {sweep.name}: directory {sweep_dir}")
    space, trainable, total = _prepare(sweep, sweep_dir, base_raw, say)
    grid = grid_size(param_space(sweep, space, base_raw))
    num_samples = (
        total if sweep.searcher != "grid" else sweep.num_samples + (1 if sweep.include_default else 0)
    )
    say(
        f"[sweep] {total} trials, searcher {sweep.searcher}"
        + (f" (grid of {grid})" if sweep.searcher == "grid" else "")
    )
    tuner = tune.Tuner(
        trainable,
        param_space=param_space(sweep, space, base_raw),
        tune_config=build_tune_config(sweep, space, base_raw, num_samples),
        run_config=_run_config(sweep, sweep_dir, space, total, list(callbacks or [])),
    )
    return _finish(tuner.fit(), sweep, sweep_dir, space, base_raw, t0, say)


def resume_sweep(sweep_dir: Path, say: Callable[[str], None] = echo) -> SweepOutcome:
    """Continue an interrupted sweep: finished trials are kept, unfinished and failed ones go on from their
    latest checkpoints (``Tuner.restore``)."""
    t0 = time.monotonic()
    sweep_dir = sweep_dir.resolve()
    sweep = SweepSettings.model_validate_json((sweep_dir / SWEEP_FILE).read_text())
    base_raw = json.loads((sweep_dir / EXPERIMENT_FILE).read_text())
    say(f"[sweep] resuming {sweep.name} in {sweep_dir}")
    space, trainable, _ = _prepare(sweep, sweep_dir, base_raw, say)
    tune_path = str(sweep_dir / TUNE_DIR)
    if not tune.Tuner.can_restore(tune_path):
        say("[sweep] Tune had not started yet: starting the trials now")
        return run_sweep(sweep, sweep_dir, say)
    _wandb_environment(sweep)
    tuner = tune.Tuner.restore(tune_path, trainable=trainable, resume_unfinished=True, resume_errored=True)
    return _finish(tuner.fit(), sweep, sweep_dir, space, base_raw, t0, say)


def _error_text(error: BaseException) -> str:
    """The exception a trial raised, in one line (a ``RayTaskError`` wraps it with a traceback)."""
    cause = getattr(error, "cause", None) or error
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"[:300]


def trial_pipeline_status(trial_dir: str, fs: Any = None) -> str | None:
    """How a trial's pipeline ended (``finished`` | ``gate_failed`` | ``paused`` | ``running``...), read from the
    ``state.json`` of its run directory on the sweep's storage; None if the trial wrote none (it failed early)."""
    import pyarrow.fs as pafs

    fs = fs or pafs.LocalFileSystem()
    path = f"{trial_dir}/{RUN_SUBDIR}/{STATE_FILE}"
    try:
        with fs.open_input_stream(path) as f:
            return str(json.loads(f.read().decode())["status"])
    except (FileNotFoundError, OSError, KeyError, ValueError):
        return None


def _finish(
    results: Any,
    sweep: SweepSettings,
    sweep_dir: Path,
    space: SearchSpace,
    base_raw: dict[str, Any],
    t0: float,
    say: Callable[[str], None],
) -> SweepOutcome:
    rows = []
    for r in results:
        metrics = r.metrics or {}
        row = trial_row(
            metrics.get("trial_id") or Path(r.path).name.removeprefix("trial_"),
            "ERROR" if r.error else "TERMINATED",
            r.config or {},
            metrics,
            space,
            list(VALIDATION_METRICS),
        )
        row["error"] = _error_text(r.error) if r.error else None
        row["trial_dir"] = r.path
        row["pipeline_status"] = trial_pipeline_status(r.path, r.filesystem)
        rows.append(row)
    summary = write_outputs(sweep_dir, sweep, rows, base_raw, time.monotonic() - t0)
    say(
        f"[sweep] finished: {summary['trials']} trials, {summary['errored']} failed, "
        f"{summary['pareto_points']} on the front of {', '.join(sweep.objectives)}; outputs in {sweep_dir}"
    )
    return SweepOutcome(sweep_dir, summary)
