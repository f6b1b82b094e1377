"""Tune sweeps on the tiny config: outputs and a best config that trains, retry from a checkpoint, a failing
sweep's exit code, resume after killing the sweep process, and AAAC as a Tune trainable."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ray import tune
from typer.testing import CliRunner

from agentic_ray.cli import app
from agentic_ray.settings import load_settings
from agentic_ray.stages.pipeline import run_pipeline
from agentic_ray.sweeps import SweepSettings, run_sweep
from agentic_ray.sweeps.search_space import parse_weights
from tests.integration.ray_head import kill_matching

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
REWARDS = {"mode": "async", "layers": {"execution": {}, "efficiency": {}, "plan": {}, "risk": {}}}

pytestmark = pytest.mark.integration


def _quiet(_msg: str) -> None:
    pass


def tiny_sweep(storage: Path, iterations: int = 1, **kw) -> dict:
    """Two trials (the default weights and one grid point) of the RL stage from one shared imitation."""
    return {
        "name": "tiny",
        "experiment": str(TINY),
        "storage": str(storage),
        "overrides": {
            "rewards": REWARDS,
            "env.risk_mode": "soft",  # as the shipped risk sweeps: shortcuts may run
            "stages.rl.iterations": iterations,
            "eval.every": 1,
            "eval.traces_per_eval": 0,
        },
        "searcher": "grid",
        "reward_weights": {
            "layers": ["execution", "efficiency"],
            "minimum": {"execution": 0.4},
            "points": [[0.45, 0.1]],  # the default is execution 0.4, efficiency 0.15
        },
        "pareto_pairs": [["completion", "high_risk_share"], ["tcsr_policy", "spt"]],
        **kw,
    }


def _csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def check_two_trial_sweep(d: Path, summary: dict, iterations: int, tmp_path: Path) -> None:
    """What a finished two-trial sweep (``tiny_sweep``) leaves: the trials table, the fronts, each trial's run from
    the shared imitation with its own weights and wandb offline, and a best config that trains."""
    assert summary["trials"] == 2 and summary["errored"] == 0
    # Each trial's pipeline status, read from its run's state.json on the sweep storage, decides the exit code.
    assert summary["pipeline_status"] == {"finished": 2}, summary

    table = _csv(d / "trials.csv")
    assert len(table) == 2 and sorted(r["is_default"] for r in table) == ["False", "True"]
    for r in table:
        assert r["status"] == "TERMINATED" and r["evaluations"] == str(iterations) and r["stage"] == "rl"
        assert r["pipeline_status"] == "finished", r
        assert 0.0 <= float(r["completion"]) <= 1.0 and 0.0 <= float(r["tcsr_policy"]) <= 1.0
        # SPT is over successful episodes only: empty exactly when the trial completed no task.
        assert (float(r["spt"]) > 0) if float(r["completion"]) > 0 else r["spt"] == "", r
    any_spt = any(r["spt"] != "" for r in table)  # a front over SPT has points only where SPT exists
    for stem, points in (
        ("pareto_completion_vs_high_risk_share", True),
        ("pareto_tcsr_policy_vs_spt", any_spt),
    ):
        assert bool(_csv(d / f"{stem}.csv")) == points and (d / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"

    for trial_dir in sorted((d / "tune").glob("trial_*")):
        # every trial ran the RL stage from the shared imitation checkpoint, with its own weights
        settings = json.loads((trial_dir / "run" / "settings.json").read_text())
        assert settings["stages"]["run"] == ["rl"]
        results = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
        swept = parse_weights(results[-1]["config"]["reward_weights"])
        assert settings["rewards"]["layers"]["execution"]["weight"] == pytest.approx(swept["execution"])
        assert settings["rewards"]["layers"]["efficiency"]["weight"] == pytest.approx(swept["efficiency"])
        reported = {
            "val/completion",
            "val/high_risk_share",
            "val/consequence_rate",
            "val/tcsr_policy",
        }
        if results[-1].get("val/completion", 0) > 0:  # SPT exists only over successful episodes
            reported.add("val/spt")
        assert reported <= set(results[-1])
        assert settings["env"]["risk_mode"] == "soft"
        rows = [json.loads(line) for line in (trial_dir / "run" / "metrics.jsonl").read_text().splitlines()]
        assert {r["stage"] for r in rows} == {"rl"}  # imitation was not repeated in the trial
        assert list((trial_dir / "wandb").glob("offline-run-*")), "wandb logged the trial offline"
    assert (d / "imitation" / "checkpoints" / "il").is_dir()

    best = Path(summary["best_configs"][0])
    best = best if best.is_absolute() else REPO / best
    settings = load_settings(best, {"wandb.mode": "disabled"})
    best_row = next(r for r in table if r["rank"] == "1")
    assert (
        settings.rewards is not None and settings.env.risk_mode == "soft"
    )  # the sweep's overrides carry over
    assert settings.rewards.weight("execution") == pytest.approx(
        float(best_row["rewards.layers.execution.weight"])
    )
    trained = run_pipeline(settings, run_dir=tmp_path / "train", progress=_quiet)
    assert trained["status"] == "finished" and trained["final"]["stage"] == "reflection"


class _KillTrialOnce(tune.Callback):
    """Kills the trial's worker process (SIGKILL) once its first checkpoint is registered: a real crash, in
    the middle of the next iteration, that Tune must recover from."""

    def __init__(self) -> None:
        self.killed = False
        self.recovered = 0

    def on_trial_save(self, iteration, trials, trial, **info):
        if not self.killed:
            self.killed = True
            os.kill(trial.last_result["pid"], signal.SIGKILL)

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.recovered += 1


def test_a_crashed_trial_is_retried_from_its_checkpoint(ray_session, tmp_path):
    sweep = SweepSettings.model_validate(
        tiny_sweep(
            tmp_path / "sweeps",
            iterations=2,
            include_default=False,
            max_failures=1,
            wandb={"mode": "disabled"},
        )
    )
    killer = _KillTrialOnce()
    out = run_sweep(sweep, tmp_path / "sweep", say=_quiet, callbacks=[killer])
    assert out.ok and killer.killed and killer.recovered == 1
    (trial_dir,) = sorted((out.sweep_dir / "tune").glob("trial_*"))
    rows = [json.loads(line) for line in (trial_dir / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "tcsr" in r]
    # Iteration 1 ran once: the retry restored the checkpoint reported with it and went on with iteration 2,
    # with the learner's update counter intact.
    assert [r["iteration"] for r in evals] == [1, 2]
    assert evals[1]["learner_updates"] == evals[0]["learner_updates"] + 1
    assert (trial_dir / "run" / "restored" / "algorithm").is_dir()


def test_a_sweep_whose_trials_fail_exits_non_zero(ray_session, tmp_path):
    path = tmp_path / "failing.yaml"
    spec = tiny_sweep(
        tmp_path / "sweeps",
        include_default=False,
        max_failures=0,
        shared_imitation=False,  # the trial fails when it builds its algorithm; no imitation needed
        wandb={"mode": "disabled"},
        reward_weights=None,
        params={"algo.training.w_reward": {"values": [1.5]}},  # AAACConfig.validate rejects it in the trial
    )
    path.write_text(json.dumps(spec))
    r = CliRunner().invoke(app, ["sweep", "--config", str(path), "--sweep-dir", str(tmp_path / "sweep")])
    assert r.exit_code == 1, r.output
    (row,) = _csv(tmp_path / "sweep" / "trials.csv")
    assert row["status"] == "ERROR" and "w_reward" in row["error"]
    assert "1 failed" in r.output


def _terminated_trials(tune_dir: Path) -> set[str]:
    """Trials Tune's own experiment state records as finished (what Tuner.restore reads)."""
    done: set[str] = set()
    for f in tune_dir.glob("experiment_state-*.json"):
        try:
            state = json.loads(f.read_text())
        except (json.JSONDecodeError, OSError):
            continue  # being written
        for trial_json, _ in state["trial_data"]:
            t = json.loads(trial_json)
            if t["status"] == "TERMINATED":
                done.add(t["trial_id"])
    return done


def test_kill_the_sweep_process_and_resume_without_rerunning_finished_trials(ray_session, tmp_path):
    """The sweep runs as the CLI does, in its own process, is SIGKILLed after its first trial finished, and is
    resumed; the resumed sweep's outputs are then checked as any finished two-trial sweep's
    (``check_two_trial_sweep``, which was a test of its own: one sweep for both saves ~75 s of CI). Over 2
    minutes: the kill and resume took 101 s in CI (2026-12-04) and the best config's tiny training adds ~20 s."""
    cfg = tmp_path / "sweep.yaml"
    # wandb offline, as the shipped sweeps: the resumed process must set WANDB_MODE itself (no API key here)
    cfg.write_text(json.dumps(tiny_sweep(tmp_path / "sweeps", iterations=3, wandb={"mode": "offline"})))
    sweep_dir = tmp_path / "sweep"
    tmpdir = Path("/tmp") / f"agray_sweep_{os.getpid()}"
    tmpdir.mkdir(exist_ok=True)
    # Tune saves its experiment state at most every TUNE_GLOBAL_CHECKPOINT_S (default: 10 s or more).
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WANDB_")},
        "AGENTIC_RAY_TMPDIR": str(tmpdir),
        "TUNE_GLOBAL_CHECKPOINT_S": "1",
    }
    cmd = [sys.executable, "-m", "agentic_ray.cli", "sweep"]
    proc = subprocess.Popen(
        [*cmd, "--config", str(cfg), "--sweep-dir", str(sweep_dir)],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while not (finished := _terminated_trials(sweep_dir / "tune")):
            assert time.monotonic() < deadline, "no trial finished in time"
            assert proc.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        kill_matching(str(tmpdir))
    assert len(finished) == 1, f"both trials finished before the kill: {finished}"
    (done_id,) = finished
    done_dir = sweep_dir / "tune" / f"trial_{done_id}"
    before = {f: (done_dir / f).read_bytes() for f in ("result.json", "run/metrics.jsonl")}

    r = subprocess.run(
        [*cmd, "--resume", str(sweep_dir)], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    kill_matching(str(tmpdir))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "resuming" in r.stdout and f"trial {done_id} started" not in r.stdout
    assert {f: (done_dir / f).read_bytes() for f in before} == before  # the finished trial did not run again
    table = _csv(sweep_dir / "trials.csv")
    assert len(table) == 2 and {row["status"] for row in table} == {"TERMINATED"}
    assert len(list((sweep_dir / "tune").glob("trial_*"))) == 2  # no new trials
    other = next(row for row in table if row["trial_id"] != done_id)
    results = (sweep_dir / "tune" / f"trial_{other['trial_id']}" / "result.json").read_text().splitlines()
    assert json.loads(results[-1])["stage_iteration"] == 3  # the interrupted trial went on to its end
    summary = json.loads((sweep_dir / "summary.json").read_text())
    check_two_trial_sweep(sweep_dir, summary, iterations=3, tmp_path=tmp_path)


def _cartpole_aaac():
    from agentic_ray.algorithms.aaac import AAACConfig

    return (
        AAACConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
    )


# The name first: a Tuner run on the class registers its name as a side effect (import-time registration is
# checked in a fresh interpreter by tests/unit/algorithms/test_aaac_tune_registration.py).
@pytest.mark.parametrize("trainable", ["registered name", "class"])
def test_aaac_runs_under_tune_by_class_and_by_registered_name(ray_session, tmp_path, trainable):
    from agentic_ray.algorithms.aaac import AAAC

    cfg = _cartpole_aaac()
    cfg.w_reward = tune.grid_search([0.6])  # a custom AAAC attribute, swept like any RLlib setting
    tuner = tune.Tuner(
        AAAC if trainable == "class" else "AAAC",
        param_space=cfg if trainable == "class" else cfg.to_dict(),
        run_config=tune.RunConfig(storage_path=str(tmp_path), stop={"training_iteration": 1}, verbose=0),
    )
    (result,) = tuner.fit()
    assert result.error is None
    assert result.metrics["training_iteration"] == 1
    assert result.metrics["env_runners"]["num_env_steps_sampled_lifetime"] >= 64
    assert result.config["w_reward"] == 0.6
