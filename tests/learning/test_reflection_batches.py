"""Learning test (issue 13, section 4): the reflection stage's batches hold labelled failures.

Before the fix, ``reflection_loss`` and ``reflection_accuracy`` read 0.0 in every reflection row: the reflection
head is trained on rows whose ``obs["reflection"]`` names a root cause (the step before failed), and an imitated
policy in the late-curriculum env (5% faulty episodes, retries absorbing most faults) made almost none. The stage
now injects caller errors into ``stages.reflection.caller_error_share`` of its training episodes.

The test runs imitation then the reflection stage on the tiny config with only *stale information* errors
injected: nothing else in the e-commerce env produces that cause (orders do not drift), so its labels in the
batches can come only from the stage's injection. It spies on the learner's reflection loss (a local learner:
the loss runs in this process) and asserts that its batches hold labelled rows of that cause, and that the head's
loss on them is positive (it trains on something).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.settings import load_settings
from agentic_ray.stages.pipeline import run_pipeline

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
STALE = ROOT_CAUSES.index("stale_information")

pytestmark = pytest.mark.learning


def test_reflection_batches_contain_labelled_failures(ray_session, tmp_path, monkeypatch):
    import agentic_ray.models.reflection as reflection
    from agentic_ray.stages.pipeline import Pipeline

    labels: Counter[int] = Counter()
    losses: list[float] = []
    rows = 0
    stage = {"reflection": False}  # imitation's BC calls the same loss on the demonstrations: not counted
    orig, orig_stage = reflection.reflection_loss, Pipeline.run_reflection

    def run_reflection(self):
        stage["reflection"] = True
        try:
            return orig_stage(self)
        finally:
            stage["reflection"] = False

    def spy(module, obs_batch, *args, **kwargs):
        nonlocal rows
        loss, stats = orig(module, obs_batch, *args, **kwargs)
        if not stage["reflection"]:
            return loss, stats
        r = obs_batch["reflection"]
        labelled = r.sum(-1) > 0
        labels.update(r[labelled].argmax(-1).tolist())
        rows += len(r)
        losses.append(float(stats["reflection_loss"]))
        return loss, stats

    monkeypatch.setattr(reflection, "reflection_loss", spy)
    monkeypatch.setattr(Pipeline, "run_reflection", run_reflection)
    s = load_settings(
        TINY,
        {
            "wandb.mode": "disabled",
            "stages.run": ["il", "reflection"],
            "stages.il.demos": 120,
            "stages.il.epochs": 8,
            "stages.reflection.iterations": 2,
            "stages.reflection.caller_error_share": 1.0,
            "env.faults.caller_errors": {"stale_information": 1.0},
            "algo.train_batch_size": 256,
            "algo.minibatch_size": 64,
            "eval.cu_ablation": False,
            "eval.traces_per_eval": 0,
        },
    )
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=lambda _m: None)
    assert out["status"] == "finished"
    assert rows > 0, "the reflection loss never ran"
    assert labels[STALE] >= 3, f"labelled rows by cause: {dict(labels)} over {rows} rows"
    assert max(losses) > 0.0
