"""Every CLI error a user can cause: one line on stderr naming the problem, no traceback, a non-zero exit.

The commands run through ``agentic_ray.cli.app`` exactly as the console script runs them (no Ray is started:
each case fails before any training).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_ray.cli import app

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


def _run(capsys, args: list[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        app(args=args, prog_name="agentic-ray")
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out, out.err


def _one_line_error(capsys, args: list[str], *needles: str) -> str:
    code, out, err = _run(capsys, args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0, (args, out, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err + out
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def fake_run(tmp_path):
    """A run directory as far as the CLI's checks go (settings and state, no checkpoint yet)."""
    run = tmp_path / "runs" / "tiny-1"
    run.mkdir(parents=True)
    (run / "settings.json").write_text("{}")
    (run / "state.json").write_text(json.dumps({"status": "running"}))
    return run


@pytest.mark.parametrize("command", ["eval", "dashboard", "trace"])
def test_a_missing_run_directory(capsys, tmp_path, command):
    args = [command, str(tmp_path / "nope")] + (["abc"] if command == "trace" else [])
    _one_line_error(capsys, args, "run directory", "nope", "does not exist")


def test_a_relative_path_that_is_not_a_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    _one_line_error(capsys, ["eval", "runs/empty"], "runs/empty is not a run directory", "settings.json")


def test_eval_before_any_checkpoint_and_a_bad_checkpoint_name(capsys, fake_run):
    _one_line_error(capsys, ["eval", str(fake_run)], "has no stage checkpoint yet")
    _one_line_error(
        capsys, ["eval", str(fake_run), "--checkpoint", "best"], "--checkpoint best", "reflection"
    )


def test_trace_not_found(capsys, fake_run):
    (fake_run / "traces.jsonl").write_text(json.dumps({"trace_id": "t1", "steps": []}) + "\n")
    _one_line_error(capsys, ["trace", str(fake_run), "zzz"], "no trace zzz")


@pytest.mark.parametrize(
    ("sets", "needles"),
    [
        (["stages.rl.iterations"], ["expected key.path=value"]),
        (["=3"], ["expected key.path=value"]),
        (["stages..rl=3"], ["expected key.path=value"]),
        (["algo.lr=[1, 2"], ["not valid YAML"]),
        (["algo.lr=0.1", "algo.lr=0.2"], ["algo.lr is given twice"]),
        (["stages.rl=5", "stages.rl.iterations=3"], ["conflict"]),
        (["stages.rl.iterations.x=3"], ["stages.rl.iterations is not a section"]),
        (["stages.rl.iterations=lots"], ["stages.rl.iterations", "integer"]),
        (["no_such_field=1"], ["no_such_field", "unknown field"]),
    ],
)
def test_malformed_or_conflicting_set(capsys, sets, needles):
    args = ["train", "--config", str(TINY)]
    for s in sets:
        args += ["--set", s]
    _one_line_error(capsys, args, *needles)


def test_set_with_resume_is_refused(capsys, fake_run):
    _one_line_error(
        capsys,
        ["train", "--resume", str(fake_run), "--set", "stages.rl.iterations=9"],
        "--set cannot be combined",
    )


def test_train_argument_errors(capsys, tmp_path, fake_run):
    _one_line_error(capsys, ["train"], "give --config")
    _one_line_error(capsys, ["train", "--config", str(tmp_path / "x.yaml")], "config file", "does not exist")
    _one_line_error(capsys, ["train", "--config", str(TINY), "--resume", str(fake_run)], "not both")
    _one_line_error(capsys, ["train", "--resume", str(tmp_path / "gone")], "run directory", "does not exist")


def test_click_usage_errors_are_one_line_too(capsys):
    _one_line_error(capsys, ["eval"], "Missing argument", "--help")
    _one_line_error(capsys, ["train", "--bogus"], "No such option")
    _one_line_error(capsys, ["dashboard", "/tmp", "--port", "99999"], "--port")


@pytest.mark.parametrize("command", [["skills", "check"], ["skills", "serve"]])
def test_an_unknown_domain(capsys, command):
    _one_line_error(capsys, [*command, "--domain", "nope"], "unknown domain 'nope'", "ecommerce")


def test_serve_in_gateway_with_several_replicas_is_refused(capsys, tmp_path):
    _one_line_error(
        capsys,
        ["serve", str(tmp_path), "--in-gateway", "--replicas", "2"],
        "in_gateway",
        "num_replicas must be 1",
    )
