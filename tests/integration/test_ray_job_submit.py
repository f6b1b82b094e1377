"""`ray job submit --working-dir . -- agentic-ray train --config ...` against a real `ray start --head`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentic_ray.stages.pipeline import PipelineState
from tests.integration.ray_head import private_ray_head

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_job_submit_runs_training_on_a_private_head(tmp_path):
    run_dir = tmp_path / "job_run"
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = (
        bin_dir + os.pathsep + os.environ.get("PATH", "")
    )  # the head (and its jobs) find the CLI
    with private_ray_head(num_cpus=2) as head:
        env = {**head["env"], "PATH": os.environ["PATH"]}
        runtime_env = json.dumps({"env_vars": {"WANDB_MODE": "offline"}})
        cmd = [
            f"{bin_dir}/ray",
            "job",
            "submit",
            "--address",
            head["dashboard"],
            "--working-dir",
            str(REPO),
            "--runtime-env-json",
            runtime_env,
            "--no-wait",
            "--",
            "agentic-ray",
            "train",
            "--config",
            "configs/tiny.yaml",
            "--run-dir",
            str(run_dir),
            "--set",
            "stages.rl.iterations=1",
            "--set",
            "stages.run=[il, rl]",
        ]
        r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        job_id = re.search(r"raysubmit_[A-Za-z0-9]+", r.stdout + r.stderr).group(0)
        status = ""
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            s = subprocess.run(
                [f"{bin_dir}/ray", "job", "status", "--address", head["dashboard"], job_id],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            status = (s.stdout + s.stderr).lower()
            if any(x in status for x in ("succeeded", "failed", "stopped")):
                break
            time.sleep(3)
        logs = subprocess.run(
            [f"{bin_dir}/ray", "job", "logs", "--address", head["dashboard"], job_id],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert "succeeded" in status, status[-1000:] + logs[-3000:]
    state = PipelineState.load(run_dir)
    assert state.status == "finished" and state.completed == ["il", "rl"]
    assert (run_dir / "checkpoints" / "rl").is_dir() and (run_dir / "metrics.jsonl").exists()
    assert "run directory:" in logs
