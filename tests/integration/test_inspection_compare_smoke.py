"""``python benchmarks/inspection.py --compare reward`` end to end at a tiny budget: both arms train through the
pipeline in worker subprocesses, the runs file is written and reused, and the arm and ratio lines are printed.

**Marked slow, out of CI:** two pipeline runs (imitation of 4 demonstrations, 1 RL iteration, 2 evaluations each,
a private Ray each) took 557 s (9 min 17 s) on the 2-CPU box at load 20-26 (another benchmark and two campaigns
running), far over the 30 s an integration test may take in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_reward_comparison_prints_both_arms_and_their_ratio(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    cmd = [
        sys.executable,
        "benchmarks/inspection.py",
        "--compare",
        "reward",
        "--seeds",
        "0",
        "--iterations",
        "1",
    ]
    cmd += ["--eval-every", "1", "--il-demos", "4", "--curve-tasks-per-family", "1", "--runs", str(runs)]
    env = {**os.environ, "AGENTIC_RAY_RESULTS_DIR": str(tmp_path), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    arms = {x["arm"]: x for x in lines if "arm" in x}
    assert set(arms) == {"layered", "sparse"}
    assert arms["sparse"]["reward_layers"] == ["task_outcome"]
    assert "detection_f1" in arms["layered"]["reward_layers"]
    for a in arms.values():
        curve = a["per_seed"][0]["curve"]
        assert [p[0] for p in curve] == ["il", "rl"] and curve[1][1] > 0 and curve[1][2] >= 256
        assert a["runs"] == 1 and 0 <= a["reached"] <= 1
    assert lines[-1]["ratio"] == "sparse/layered"
    assert len(runs.read_text().splitlines()) == 2
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and len(runs.read_text().splitlines()) == 2  # reused, not run again
