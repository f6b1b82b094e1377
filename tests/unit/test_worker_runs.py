"""A benchmark worker whose private Ray did not start in time is run again; any other failure ends the campaign."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.worker_runs import RAY_START_TIMEOUT, run_worker

SCRIPT = """
import sys
from pathlib import Path
calls = Path(sys.argv[1])
n = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(n + 1))
if n < int(sys.argv[2]):
    print(sys.argv[3], file=sys.stderr)
    sys.exit(1)
print('RESULT {"run": %d}' % (n + 1))
"""


def _worker(tmp_path: Path) -> tuple[str, Path]:
    script = tmp_path / "worker.py"
    script.write_text(SCRIPT)
    return str(script), tmp_path / "calls"


def test_a_ray_start_timeout_is_run_again(tmp_path) -> None:
    script, calls = _worker(tmp_path)
    r = run_worker(script, [str(calls), "2", f"Exception: {RAY_START_TIMEOUT}. This could happen..."], "w")
    assert r == {"run": 3} and calls.read_text() == "3"


def test_retries_are_bounded(tmp_path) -> None:
    script, calls = _worker(tmp_path)
    with pytest.raises(SystemExit, match="w failed"):
        run_worker(script, [str(calls), "5", RAY_START_TIMEOUT], "w", ray_start_retries=2)
    assert calls.read_text() == "3"


def test_any_other_failure_is_not_retried(tmp_path) -> None:
    script, calls = _worker(tmp_path)
    with pytest.raises(SystemExit, match="w failed"):
        run_worker(script, [str(calls), "1", "ValueError: a real bug"], "w")
    assert calls.read_text() == "1"


def test_runs_are_reused_by_arm_seed_and_settings_key(tmp_path) -> None:
    import json

    from benchmarks.worker_runs import load_runs

    path = tmp_path / "runs.jsonl"
    lines = [
        {"run": "a", "seed": 0, "v": 1, "settings_key": "k1"},
        {"run": "a", "seed": 0, "v": 2, "settings_key": "old"},  # other settings: not reused
        {"run": "b", "seed": 1, "v": 3, "settings_key": "k2"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = load_runs(str(path), {"a": "k1", "b": "k2"}, arm_field="run")
    assert {k: r["v"] for k, r in got.items()} == {("a", 0): 1, ("b", 1): 3}
    assert load_runs(str(tmp_path / "none.jsonl"), {"a": "k1"}) == {}


def test_first_reaching_skips_unmeasured_points() -> None:
    from benchmarks.worker_runs import first_reaching

    assert first_reaching([(0, 0.4), (500, 0.7), (900, 0.8)], 0.7) == 500
    assert first_reaching([(0, None), (500, 0.69)], 0.7) is None


def test_appended_runs_are_read_back_only_under_their_settings_key(tmp_path) -> None:
    from benchmarks.worker_runs import append_run, load_runs

    path = str(tmp_path / "runs.jsonl")
    append_run(path, {"algo": "a", "seed": 0, "x": 1}, "k1")
    append_run(path, {"algo": "a", "seed": 1, "x": 2}, "old")
    append_run(None, {"algo": "a", "seed": 2}, "k1")  # no runs file: nothing written
    assert load_runs(path, {"a": "k1"}) == {("a", 0): {"algo": "a", "seed": 0, "x": 1}}


def test_the_settings_fingerprint_leaves_out_the_seed_only() -> None:
    from agentic_ray.settings import ExperimentSettings
    from benchmarks.worker_runs import settings_fingerprint

    base = ExperimentSettings.model_validate({"seed": 0})
    assert settings_fingerprint(base) == settings_fingerprint(ExperimentSettings.model_validate({"seed": 7}))
    assert settings_fingerprint(base) != settings_fingerprint(
        ExperimentSettings.model_validate({"seed": 0, "algo": {"lr": 0.123}})
    )
