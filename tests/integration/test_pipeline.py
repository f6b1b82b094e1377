"""The three-stage pipeline on a tiny config: outputs, gates, auto-pause, resume after a kill, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_ray.cli import app
from agentic_ray.cli.exit_codes import EXIT_GATE_FAILED, EXIT_PAUSED
from agentic_ray.eval.evaluator import ExpertPolicy
from agentic_ray.eval.policy_loading import MODULE_SUBDIR, load_policy_module, pick_checkpoint
from agentic_ray.eval.report import read_metrics
from agentic_ray.settings import load_settings
from agentic_ray.stages import pipeline as pipeline_mod
from agentic_ray.stages.pipeline import PipelineState, run_pipeline
from tests.helpers.resume_scenario import sigkill_and_resume

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"

pytestmark = pytest.mark.integration


def _quiet(_msg: str) -> None:
    pass


def test_tiny_pipeline_writes_everything(ray_session, tmp_path):
    """Its own run with tiny's in-env rewards, not the session's shared ``tiny_run``: with the asynchronous pool an
    iteration whose episodes are all still waiting for their scores makes no update (and reports no learner
    statistics), so the β-decay bound below would depend on how fast the scorers ran."""
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
    # The reflection stage's evaluation runs the CU ablation on paired first failures of the caller-error
    # validation env, grown to eval.cu_min_pairs (10 in tiny); the pairing is unit-tested in test_correction.py.
    final = evals[-1]
    assert final["cu_n"] >= 10 and final["cu"] == pytest.approx(final["cu_fix_on"] - final["cu_fix_off"]), (
        final
    )
    assert final["cu_ci"][0] <= final["cu"] <= final["cu_ci"][1]
    # Every metric in metrics.jsonl carries its sample count.
    assert final["completion_n"] == final["episodes"] > 0 and final["tcsr_n"] >= final["tcsr_policy_n"] > 0
    # β decays per policy optimisation step (64-row batches, 32-row minibatches, 1 epoch: 2+ steps an iteration),
    # so after 3 RL/reflection iterations it is below β_0·0.999^5.
    assert final["learner"]["beta"] < 0.1 * 0.999**5
    assert any("gates" in r for r in rows)
    # The reflection stage first imitated corrected failures (tiny: 8), caller errors among them.
    corrections = [r for r in rows if r.get("stage") == "reflection" and "correction_demos" in r]
    assert len(corrections) == 1 and corrections[0]["correction_demos"].get("caller_error", 0) > 0, (
        corrections
    )
    state = PipelineState.load(run)
    assert state.completed == ["il", "rl", "reflection"] and state.gates["il_tcsr_attempt0"]["demos"] == 30
    assert "Plotly.newPlot" in (run / "report.html").read_text()
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
    for key in ("completion", "tcsr", "tcsr_policy", "spt"):
        shown = "n/a" if evals[-1][key] is None else f"{evals[-1][key]:.3f}"
        assert shown in next(line for line in r.output.splitlines() if f" {key} " in f" {line} ")


def _scripted(monkeypatch, field: str, values: list[float]) -> list[float]:
    """Force the evaluator's ``field`` metric through a scripted series (a forced gate/auto-pause condition)."""
    real = pipeline_mod.evaluate_policy
    seen: list[float] = []

    def fake(*a, **kw):
        res = real(*a, **kw)
        if isinstance(a[0], ExpertPolicy):  # the run's expert baseline, not an evaluation of the policy
            return res
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


def _train_cli(run: Path, *sets: str):
    """``agentic-ray train`` on the tiny config, in this process (so a scripted evaluator applies)."""
    args = ["train", "--config", str(TINY), "--run-dir", str(run), "--set", "wandb.mode=disabled"]
    return CliRunner().invoke(app, args + [x for kv in sets for x in ("--set", kv)])


def test_the_rl_gate_stops_an_untrained_policy(ray_session, tmp_path):
    """The gate reads the DVR of non-empty plans: an untrained policy's plain DVR is high (an episode that
    satisfies no goal violates no dependency: 0.8 on tiny's validation episodes, measured), and the gate must stop
    it on what its plans achieved."""
    s = load_settings(
        TINY,
        {
            "wandb.mode": "disabled",
            "stages.run": ["rl"],
            "stages.rl.iterations": 1,
            "stages.rl.gate_dvr": 0.9,
            "eval.cu_ablation": False,
        },
    )
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=_quiet)
    final = out["final"]
    # what the gate read before counts the empty plans as valid, so it reads higher than what the gate reads now
    assert final["dvr"] >= 0.75 and final["dvr"] > final["dvr_progress"], final
    assert (
        out["status"] == "gate_failed" and out["gates"]["rl_dvr"]["value"] == final["dvr_progress"] < 0.9
    ), out


def test_rl_gate_failure_stops_with_a_diagnosis_and_stops_again_on_resume(ray_session, tmp_path, monkeypatch):
    _scripted(monkeypatch, "dvr_progress", [0.5])
    run = tmp_path / "run"
    r = _train_cli(run, "stages.run=[rl, reflection]", "stages.rl.gate_dvr=0.9", "stages.rl.iterations=1")
    assert r.exit_code == EXIT_GATE_FAILED, r.output  # so `ray job submit` does not report SUCCEEDED
    assert "run stopped at a failed gate (rl_dvr 0.500 < 0.9): exit 3" in r.output.splitlines()
    state = PipelineState.load(run)
    assert state.status == "gate_failed"
    assert state.gates["rl_dvr"] == {"value": 0.5, "threshold": 0.9, "passed": False}
    diag = json.loads((run / "diagnosis.json").read_text())
    assert diag["gate"]["passed"] is False and "attribution" in diag
    assert not (run / "checkpoints" / "reflection").exists()  # it did not continue blindly

    # Resuming re-judges the gate on the same checkpoint and stops there again (it used to walk past it).
    r = CliRunner().invoke(app, ["train", "--resume", str(run)])
    assert r.exit_code == EXIT_GATE_FAILED, r.output
    state = PipelineState.load(run)
    assert state.status == "gate_failed" and state.completed == [] and state.stage == "rl"
    assert not (run / "checkpoints" / "reflection").exists()
    rows = [x for x in read_metrics(run / "metrics.jsonl") if x.get("gate_check_after_resume")]
    assert [(x["stage"], x["dvr_progress"]) for x in rows] == [("rl", 0.5)]
    # eval exits like the run ended
    r = CliRunner().invoke(app, ["eval", str(run), "--tasks-per-family", "1"])
    assert r.exit_code == EXIT_GATE_FAILED and "completion" in r.output


def test_auto_pause_fires_on_declining_dvr(ray_session, tmp_path, monkeypatch):
    seen = _scripted(monkeypatch, "dvr", [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    run = tmp_path / "run"
    r = _train_cli(run, "stages.run=[rl]", "stages.rl.iterations=6")
    assert r.exit_code == EXIT_PAUSED, r.output
    assert r.output.splitlines()[-1].endswith("exit 4")
    assert PipelineState.load(run).status == "paused"
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


def test_sigkill_mid_stage_then_resume_trains_on_what_an_uninterrupted_run_trains_on(ray_session, tmp_path):
    r = sigkill_and_resume(tmp_path)
    assert r.killed.completed == ["il"] and r.killed.stage == "rl" and 2 <= r.killed.iteration < 5
    assert r.resume_rc == 0, r.resume_output
    assert "resuming from" in r.resume_output and f"run directory: {tmp_path / 'run'}" in r.resume_output
    assert r.resumed.status == "finished" and r.resumed.completed == ["il", "rl"]
    # The resumed run continues at the next iteration (no stage restart) with the learner's update counter intact.
    assert r.metric_series_continues, (r.rl_rows_before[-1:], r.rl_rows_after[:1])
    assert r.rl_rows_after[-1]["iteration"] == 5
    assert r.reference_rows[-1]["learner_updates"] == r.rl_rows_after[-1]["learner_updates"]  # β's counter t
    # The ledger survived the kill: what it held at the last checkpoint is part of the final ledger.
    assert r.trained_at_kill_missing_later == 0
    assert r.audit.ok and r.audit.trained == r.audit.submitted > 0, r.audit.problems()
    # Restart diff: the killed-and-resumed run trained on the same (episode, reward) pairs as the uninterrupted one,
    # and its reward normalisers ended in the same state.
    assert r.diff.equal, r.diff.named()[:20]
    assert r.diff.same == r.audit.trained
    assert r.normalizers_equal
    assert r.ok
