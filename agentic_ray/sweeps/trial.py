"""One sweep trial: the real three-stage pipeline (or its later stages from the shared imitation checkpoint),
reporting every evaluation's validation metrics to Tune together with a checkpoint.

The checkpoint holds the RLlib algorithm, the pipeline state and the last evaluation row, so a trial that Tune
restarts (``FailureConfig``, or ``agentic-ray sweep --resume``) continues at the iteration after its latest
report instead of starting over. Evaluations during imitation carry no checkpoint: imitation is not resumable
mid-stage, so a trial that fails there starts again.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray import tune

from agentic_ray.eval.evaluator import EvalResult
from agentic_ray.settings import ExperimentSettings, apply_overrides
from agentic_ray.stages.pipeline import Pipeline, PipelineState
from agentic_ray.sweeps.search_space import SearchSpace
from agentic_ray.sweeps.validation_metrics import report_row

logger = logging.getLogger(__name__)

CKPT_ALGORITHM = "algorithm"
CKPT_STATE = "pipeline_state.json"
CKPT_LAST_ROW = "last_evaluation.json"
RUN_SUBDIR = "run"  # the trial's pipeline run directory, inside Tune's trial directory


@dataclass(frozen=True)
class TrialSpec:
    """Everything a trial needs besides its Tune config (sent to every trial with ``tune.with_parameters``).

    Attributes:
        base_raw: The base experiment as a raw settings dict (sweep overrides applied).
        space: Decodes the Tune config into experiment overrides.
        stages: Pipeline stages the trial runs.
        start: ``PipelineState`` fields after the shared imitation (its checkpoint path included), or None
            when every trial runs imitation itself.
    """

    base_raw: dict[str, Any]
    space: SearchSpace
    stages: tuple[str, ...]
    start: dict[str, Any] | None = None

    def settings(self, config: dict[str, Any]) -> ExperimentSettings:
        """The trial's experiment: base + the trial's values, its stages, and no wandb run of its own (Tune's
        ``WandbLoggerCallback`` logs the trial)."""
        overrides = {
            **self.space.overrides(config),
            "stages.run": list(self.stages),
            "wandb.mode": "disabled",
        }
        return ExperimentSettings.model_validate(apply_overrides(copy.deepcopy(self.base_raw), overrides))


def _save(pipeline: Pipeline, row: dict[str, Any], into: Path) -> None:
    pipeline.algo.save_to_path(str(into / CKPT_ALGORITHM))
    state = {**dataclasses.asdict(pipeline.state), "checkpoint": None}
    (into / CKPT_STATE).write_text(json.dumps(state, default=float))
    (into / CKPT_LAST_ROW).write_text(json.dumps(row, default=float))


def _start(spec: TrialSpec, run_dir: Path) -> tuple[PipelineState, dict[str, Any]]:
    """The pipeline state to start from: the trial's latest Tune checkpoint, else the shared imitation's."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        local = run_dir / "restored"
        shutil.rmtree(local, ignore_errors=True)
        checkpoint.to_directory(str(local))
        state = json.loads((local / CKPT_STATE).read_text())
        state.update(checkpoint=str(local / CKPT_ALGORITHM), status="running")
        logger.info("trial restored at %s iteration %s", state["stage"], state["iteration"])
        return PipelineState(**state), json.loads((local / CKPT_LAST_ROW).read_text())
    if spec.start is not None:
        return PipelineState(**copy.deepcopy(spec.start)), {}
    return PipelineState(), {}


def run_trial(config: dict[str, Any], spec: TrialSpec) -> None:
    """Tune function trainable: run the trial's pipeline and ``tune.report`` each evaluation."""
    settings = spec.settings(config)
    run_dir = Path(tune.get_context().get_trial_dir()) / RUN_SUBDIR
    run_dir.mkdir(parents=True, exist_ok=True)
    state, last_row = _start(spec, run_dir)
    pipeline: Pipeline

    def report(row: dict[str, Any], result: EvalResult) -> None:
        metrics = report_row(row, result.records)
        if row.get("stage") == "il":
            tune.report(metrics)
            return
        with tempfile.TemporaryDirectory(prefix="agray_trial_ckpt_") as tmp:
            _save(pipeline, row, Path(tmp))
            tune.report(
                metrics, checkpoint=tune.Checkpoint.from_directory(tmp)
            )  # persisted before it returns

    pipeline = Pipeline(settings, run_dir, state, progress=logger.info, on_evaluation=report)
    if last_row:
        pipeline.last = last_row  # the stage-end gate reads the latest evaluation
    out = pipeline.run()
    logger.info("trial finished: %s", out["status"])
