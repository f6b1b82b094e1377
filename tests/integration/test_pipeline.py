"""The three-stage pipeline on a tiny config: outputs, gates, auto-pause, resume after a kill, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_ray.cli import app
from agentic_ray.eval.policy_loading import MODULE_SUBDIR, load_policy_module, pick_checkpoint
from agentic_ray.eval.report import read_metrics
from agentic_ray.settings import load_settings
from agentic_ray.stages import pipeline as pipeline_mod
from agentic_ray.stages.pipeline import PipelineState, run_pipeline
from tests.integration.ray_head import kill_matching

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"

pytestmark = pytest.mark.integration


def _quiet(_msg: str) -> None:
    pass


def test_tiny_pipeline_writes_everything(ray_session, tmp_path):
    s = load_settings(TINY, {"wandb.mode": "offline"})
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=_quiet)
    run = Path(out["run_dir"])
    assert out["status"] == "finished"
    for stage in ("il", "rl", "reflection"):
        assert (run / "checkpoints" / stage / MODULE_SUBDIR).is_dir()
    rows = read_metrics(run / "metrics.jsonl")
    evals = [r for r in rows if "tcsr" in r]
    assert [r["stage"] for r in evals] == ["il", "rl", "rl", "reflection"]
    assert [r["iteration"] for r in evals if r["stage"] == "rl"] == [1, 2]
    # CU on paired first failures of the caller-error validation env, grown to eval.cu_min_pairs (10 in tiny)
    last = evals[-1]
    assert last["cu_pairs"] >= 10 and last["cu"] == pytest.approx(last["cu_fix_on"] - last["cu_fix_off"])
    assert last["cu_ci"][0] <= last["cu"] <= last["cu_ci"][1]
    # (that the reflection batches hold labelled failures: tests/learning/test_reflection_batches.py)
    assert evals[-1]["learner"]["beta"] < 0.1  # beta_t = 0.1 * 0.999^t decays with learner updates
    assert any("gates" in r for r in rows)
    state = PipelineState.load(run)
    assert state.completed == ["il", "rl", "reflection"] and state.gates["il_tcsr_attempt0"]["demos"] == 30
    assert "data:image/png;base64," in (run / "report.html").read_text()
    assert list((run / "wandb").glob("offline-run-*"))
    # the final checkpoint serves: the module loads without an Algorithm
    module = load_policy_module(pick_checkpoint(run))
    assert sum(p.numel() for p in module.parameters()) > 0
    # traces print by episode id through the CLI
    trace = json.loads((run / "traces.jsonl").read_text().splitlines()[0])
    r = CliRunner().invoke(app, ["trace", str(run), trace["trace_id"]])
    assert r.exit_code == 0 and "step 0:" in r.output and "policy:" in r.output
    step_id = trace["steps"][0]["step_trace_id"]
    assert CliRunner().invoke(app, ["trace", str(run), step_id]).exit_code == 0
    r = CliRunner().invoke(app, ["eval", str(run), "--tasks-per-family", "1"])
    assert r.exit_code == 0 and "completion" in r.output
    # `agentic-ray eval` re-runs the run's own validation (same tasks, same fault share), so the final
    # checkpoint's figures come back as the run recorded them.
    for key in ("completion", "tcsr", "spt"):
        assert f"{evals[-1][key]:.3f}" in next(
            line for line in r.output.splitlines() if f" {key} " in f" {line} "
        )


def _scripted(monkeypatch, field: str, values: list[float]) -> list[float]:
    """Force the evaluator's ``field`` metric through a scripted series (a forced gate/auto-pause condition)."""
    real = pipeline_mod.evaluate_policy
    seen: list[float] = []

    def fake(*a, **kw):
        res = real(*a, **kw)
        v = values[min(len(seen), len(values) - 1)]
        setattr(res.metrics, field, v)
        seen.append(v)
        return res

    monkeypatch.setattr(pipeline_mod, "evaluate_policy", fake)
    return seen


def test_il_gate_failure_repeats_with_more_demonstrations(ray_session, tmp_path, monkeypatch):
    seen = _scripted(monkeypatch, "tcsr", [0.5, 0.6, 0.9])
    s = load_settings(
        TINY,
        {
            "wandb.mode": "disabled",
            "stages.run": ["il"],
            "stages.il.max_repeats": 2,
            "stages.il.demos": 10,
            "stages.il.epochs": 1,
        },
    )
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=_quiet)
    gates = out["gates"]
    assert [gates[f"il_tcsr_attempt{i}"]["passed"] for i in range(3)] == [False, False, True]
    assert [gates[f"il_tcsr_attempt{i}"]["demos"] for i in range(3)] == [10, 20, 40]
    assert seen == [0.5, 0.6, 0.9] and out["status"] == "finished"


def test_rl_gate_failure_stops_with_a_diagnosis(ray_session, tmp_path, monkeypatch):
    _scripted(monkeypatch, "dvr", [0.5])
    s = load_settings(
        TINY,
        {
            "wandb.mode": "disabled",
            "stages.run": ["rl", "reflection"],
            "stages.rl.gate_dvr": 0.9,
            "stages.rl.iterations": 1,
        },
    )
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=_quiet)
    run = Path(out["run_dir"])
    assert out["status"] == "gate_failed"
    assert out["gates"]["rl_dvr"] == {"value": 0.5, "threshold": 0.9, "passed": False}
    diag = json.loads((run / "diagnosis.json").read_text())
    assert diag["gate"]["passed"] is False and "attribution" in diag
    assert not (run / "checkpoints" / "reflection").exists()  # it did not continue blindly


def test_auto_pause_fires_on_declining_dvr(ray_session, tmp_path, monkeypatch):
    seen = _scripted(monkeypatch, "dvr", [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    s = load_settings(TINY, {"wandb.mode": "disabled", "stages.run": ["rl"], "stages.rl.iterations": 6})
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=_quiet)
    run = Path(out["run_dir"])
    assert out["status"] == "paused"
    assert seen == [0.9, 0.8, 0.7, 0.6]  # paused on the 3rd decline, 2 iterations early
    diag = json.loads((run / "diagnosis.json").read_text())
    assert diag["dvr_history"] == [0.9, 0.8, 0.7, 0.6] and diag["examples"]


def test_rl_trains_on_l1_to_l4_and_reflection_ramps_l5_in(ray_session, tmp_path, monkeypatch):
    """Seed 000's schedule on the reward pool: L5 (long-term value) weight 0 through RL, 0.1 -> 0.2 in stage 3."""
    from agentic_ray.rollout.reward_aware_env_runner import RewardAwareEnvRunner

    weights: list[tuple[str, float]] = []
    real = RewardAwareEnvRunner.set_layer_weight

    def spy(self, layer, weight):
        weights.append((layer, weight))
        real(self, layer, weight)

    monkeypatch.setattr(RewardAwareEnvRunner, "set_layer_weight", spy)
    s = load_settings(
        TINY,
        {
            "wandb.mode": "disabled",
            "stages.run": ["rl", "reflection"],
            "stages.reflection.iterations": 2,
            "rewards": {"mode": "async", "layers": {"execution": {}, "long_term_value": {}}},
        },
    )
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=_quiet)
    assert out["status"] == "finished"
    assert [layer for layer, _ in weights] == ["long_term_value"] * 3
    assert [w for _, w in weights] == pytest.approx([0.0, 0.15, 0.2])
    rows = [r for r in read_metrics(Path(out["run_dir"]) / "metrics.jsonl") if "tcsr" in r]
    assert {"execution", "long_term_value"} <= set(rows[-1]["reward_layers"])


def test_resume_after_kill_mid_stage(tmp_path):
    run = tmp_path / "run"
    tmpdir = Path("/tmp") / f"agray_resume_{os.getpid()}"
    tmpdir.mkdir(exist_ok=True)
    env = {**os.environ, "AGENTIC_RAY_TMPDIR": str(tmpdir), "WANDB_MODE": "offline"}
    cmd = [
        sys.executable,
        "-m",
        "agentic_ray.cli",
        "train",
        "--config",
        str(TINY),
        "--run-dir",
        str(run),
        "--set",
        "stages.rl.iterations=5",
        "--set",
        "stages.run=[il, rl]",
        "--set",
        "wandb.mode=disabled",
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            st = run / "state.json"
            if st.exists():
                state = json.loads(st.read_text())
                if state["stage"] == "rl" and state["iteration"] >= 2:
                    break
            assert proc.poll() is None, "training ended before it could be killed"
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        kill_matching(str(tmpdir))
    killed = PipelineState.load(run)
    assert killed.completed == ["il"] and killed.stage == "rl" and 2 <= killed.iteration < 5
    before = [r for r in read_metrics(run / "metrics.jsonl") if r.get("stage") == "rl" and "tcsr" in r]

    r = subprocess.run(
        [sys.executable, "-m", "agentic_ray.cli", "train", "--resume", str(run)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    kill_matching(str(tmpdir))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "resuming from" in r.stdout
    final = PipelineState.load(run)
    assert final.status == "finished" and final.completed == ["il", "rl"]
    rl = [r for r in read_metrics(run / "metrics.jsonl") if r.get("stage") == "rl" and "tcsr" in r]
    after = rl[len(before) :]
    # The resumed run continues at the next iteration (no stage restart) with the learner's update counter intact.
    assert next(x["iteration"] for x in after) == killed.iteration + 1
    assert after[-1]["iteration"] == 5
    last_before = max((x for x in before if x["iteration"] == killed.iteration), key=lambda x: x["time"])
    assert after[0]["learner_updates"] == last_before["learner_updates"] + 1
