"""A sweep exits like the worst of its trials: an error 1, a failed gate 3, a pause 4, else 0 (no Ray started).

The trial statuses come from each trial's ``run/state.json`` (written by the real ``PipelineState.save``); the
CLI case replaces only the Tune run (``run_sweep``) and ``init_ray``, so the exit code and the summary line are
the command's own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentic_ray.cli import app
from agentic_ray.cli.exit_codes import EXIT_ERROR, EXIT_GATE_FAILED, EXIT_OK, EXIT_PAUSED, sweep_exit_code
from agentic_ray.stages.pipeline import PipelineState
from agentic_ray.sweeps.outputs import write_outputs
from agentic_ray.sweeps.sweep_config import SweepSettings
from agentic_ray.sweeps.sweep_runner import ImitationStopped, SweepOutcome, trial_pipeline_status
from agentic_ray.sweeps.trial import RUN_SUBDIR

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


@pytest.mark.parametrize(
    ("ok", "statuses", "code"),
    [
        (True, {"finished": 3}, EXIT_OK),
        (True, {}, EXIT_OK),
        (True, {"finished": 2, "gate_failed": 1}, EXIT_GATE_FAILED),
        (True, {"finished": 2, "paused": 1}, EXIT_PAUSED),
        (True, {"paused": 1, "gate_failed": 1}, EXIT_GATE_FAILED),
        (False, {"gate_failed": 1}, EXIT_ERROR),  # an errored trial outranks a gate
    ],
)
def test_a_sweep_exits_like_its_worst_trial(ok: bool, statuses: dict[str, int], code: int) -> None:
    assert sweep_exit_code(ok, statuses) == code


def test_trial_status_is_read_from_the_trials_run_state(tmp_path: Path) -> None:
    trial = tmp_path / "trial_a"
    (trial / RUN_SUBDIR).mkdir(parents=True)
    PipelineState(completed=["il"], stage="rl", status="gate_failed").save(trial / RUN_SUBDIR)
    assert trial_pipeline_status(str(trial)) == "gate_failed"
    assert trial_pipeline_status(str(tmp_path / "trial_b")) is None  # failed before it wrote a state


def _sweep(tmp_path: Path) -> SweepSettings:
    return SweepSettings.model_validate(
        {
            "name": "unit",
            "experiment": str(TINY),
            "storage": str(tmp_path / "sweeps"),
            "searcher": "grid",
            "reward_weights": None,
            "params": {"algo.training.lr": {"values": [1e-4, 3e-4]}},
            "pareto_pairs": [],
        }
    )


def _row(tid: str, pipeline_status: str) -> dict:
    return {
        "trial_id": tid,
        "status": "TERMINATED",
        "pipeline_status": pipeline_status,
        "is_default": False,
        "params": {"algo.training.lr": 1e-4},
        "metrics": {"completion": 0.5, "high_risk_share": 0.1, "spt": 5.0},
        "evaluations": 1,
        "stage": "rl",
    }


@pytest.mark.parametrize(("status", "code"), [("gate_failed", 3), ("paused", 4), ("finished", 0)])
def test_the_sweep_command_exits_non_zero_when_a_trial_stopped(
    tmp_path: Path, monkeypatch, capsys, status: str, code: int
) -> None:
    sweep = _sweep(tmp_path)
    rows = [_row("a", "finished"), _row("b", status)]
    (tmp_path / "out").mkdir()
    summary = write_outputs(tmp_path / "out", sweep, rows, sweep.base_raw(), wall_s=1.0)
    assert summary["pipeline_status"] == (
        {"finished": 2} if status == "finished" else {"finished": 1, status: 1}
    )
    monkeypatch.setattr("agentic_ray.cli.sweep_cmd.init_ray", lambda *a, **k: None)
    monkeypatch.setattr("agentic_ray.sweeps.run_sweep", lambda s, d: SweepOutcome(tmp_path / "out", summary))
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(sweep.model_dump_json())
    with pytest.raises(SystemExit) as e:
        app(args=["sweep", "--config", str(cfg)], prog_name="agentic-ray")
    out = capsys.readouterr().out
    assert int(e.value.code or 0) == code, out
    assert f"exit {code}" in out
    if status != "finished":
        assert ("stopped at a failed gate" if status == "gate_failed" else "1 paused") in out


def test_the_sweep_command_exits_3_when_the_shared_imitation_stops_at_its_gate(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    def stopped(s, d):
        raise ImitationStopped("gate_failed", tmp_path / "imitation")

    monkeypatch.setattr("agentic_ray.cli.sweep_cmd.init_ray", lambda *a, **k: None)
    monkeypatch.setattr("agentic_ray.sweeps.run_sweep", stopped)
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(_sweep(tmp_path).model_dump_json())
    with pytest.raises(SystemExit) as e:
        app(args=["sweep", "--config", str(cfg)], prog_name="agentic-ray")
    err = capsys.readouterr().err
    assert int(e.value.code or 0) == EXIT_GATE_FAILED and "gate_failed" in err and "exit 3" in err
