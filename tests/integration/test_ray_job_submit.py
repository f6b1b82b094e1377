"""`ray job submit --working-dir . -- agentic-ray train --config ...` against a real `ray start --head`.

The job is submitted as the README gives it (no --run-dir); the run goes to the documented storage location, here
``AGENTIC_RAY_STORAGE_PATH`` set to a ``file://`` URI in the job's runtime_env, and must still be there after the
job ended (Ray deletes the job's working_dir package, where a relative ``runs/`` used to land).
"""

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


def test_job_submit_runs_training_on_a_private_head_and_the_run_outlives_the_job(tmp_path):
    storage = tmp_path / "storage"
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = (
        bin_dir + os.pathsep + os.environ.get("PATH", "")
    )  # the head (and its jobs) find the CLI
    with private_ray_head(num_cpus=2) as head:
        env = {**head["env"], "PATH": os.environ["PATH"]}
        runtime_env = json.dumps(
            {"env_vars": {"WANDB_MODE": "offline", "AGENTIC_RAY_STORAGE_PATH": f"file://{storage}"}}
        )
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
    # The job said where the run is, first thing, and it is under the storage location, not the working dir.
    where = re.search(r"run directory: (file://\S+)", logs)
    assert where is not None, logs[-3000:]
    run_dir = Path(where.group(1).removeprefix("file://"))
    assert run_dir.parent == storage and run_dir.name.startswith("tiny-")
    assert "_ray_pkg_" not in str(run_dir) and "working_dir_files" not in str(run_dir)
    # After the job ended (its working_dir package is gone), the whole run is still there.
    state = PipelineState.load(run_dir)
    assert state.status == "finished" and state.completed == ["il", "rl"]
    assert (run_dir / "checkpoints" / "rl" / "rllib_checkpoint.json").exists()
    assert (run_dir / "metrics.jsonl").exists() and (run_dir / "report.html").exists()
