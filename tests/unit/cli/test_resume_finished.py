"""``agentic-ray train --resume`` on a run whose every stage has finished answers from the run's files and starts
nothing (no Ray, no algorithm); a run with a stage left goes on to start Ray as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_ray.cli import app
from agentic_ray.settings import load_settings

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


class _RayStarted(Exception):
    pass


@pytest.fixture
def no_ray(monkeypatch):
    """``init_ray`` raises: a command that reaches it would start Ray."""

    def refuse(*_a, **_k):
        raise _RayStarted

    monkeypatch.setattr("agentic_ray.cli.train_cmd.init_ray", refuse)


def _run_dir(tmp_path: Path, status: str, completed: list[str]) -> Path:
    run = tmp_path / "tiny-1"
    run.mkdir()
    settings = load_settings(TINY)
    (run / "settings.json").write_text(settings.model_dump_json())
    (run / "state.json").write_text(json.dumps({"status": status, "completed": completed}))
    rows = [
        {"stage": "il", "iteration": 0, "tcsr": 0.5, "completion": 0.4},
        {"stage": "reflection", "iteration": 1, "tcsr": 0.9, "completion": 0.875},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _train_resume(capsys, run: Path) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        app(args=["train", "--resume", str(run)], prog_name="agentic-ray")
    return int(e.value.code or 0), capsys.readouterr().out


@pytest.mark.parametrize(("status", "code"), [("finished", 0), ("regressed", 5)])
def test_resuming_a_finished_run_starts_nothing(capsys, tmp_path, no_ray, status, code):
    stages = list(load_settings(TINY).stages.run)
    run = _run_dir(tmp_path, status, stages)
    rc, out = _train_resume(capsys, run)
    assert rc == code, out
    assert f"run directory: {run}" in out and "nothing to resume" in out
    assert "0.875" in out  # the final metrics are the last evaluation's
    assert json.loads((run / "state.json").read_text())["status"] == status  # the state is left as it was


def test_a_regressed_run_reports_the_kept_policy(capsys, tmp_path, no_ray):
    """A rejected stage's policy did not go forward: the final metrics are the kept baseline's, as the run said."""
    stages = list(load_settings(TINY).stages.run)
    run = _run_dir(tmp_path, "regressed", stages)
    state = json.loads((run / "state.json").read_text())
    state.update(
        regressions=["reflection"], baseline={"stage": "rl", "row": {"tcsr": 0.8, "completion": 0.625}}
    )
    (run / "state.json").write_text(json.dumps(state))
    rc, out = _train_resume(capsys, run)
    assert rc == 5 and "0.625" in out and "0.875" not in out, out


@pytest.mark.parametrize(("status", "completed"), [("running", ["il"]), ("paused", ["il"]), ("finished", [])])
def test_a_run_with_a_stage_left_starts_ray(tmp_path, no_ray, status, completed):
    run = _run_dir(tmp_path, status, completed)
    with pytest.raises(_RayStarted):
        app(args=["train", "--resume", str(run)], prog_name="agentic-ray", standalone_mode=False)
