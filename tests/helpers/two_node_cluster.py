"""A head and a worker node started with ``ray start`` on this machine, and the two-node driver run against them.

Each node has its own temp dir, ports and CPUs; nothing here calls ``ray stop`` (processes are killed by group).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.integration.ray_head import private_ray_head, private_ray_worker_node

REPO = Path(__file__).resolve().parents[2]


def run_two_node_driver(
    head_cpus: int = 1,
    worker_cpus: int | None = 1,
    kill_worker: bool = False,
    iterations: int = 8,
    kill_after: int = 3,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Start the cluster (a worker node only if ``worker_cpus``), run ``tests.helpers.two_node_training`` against
    it, stop the worker node with SIGKILL mid-run if ``kill_worker``; return the driver's JSON (plus ``kill_t``).
    """
    work = Path(tempfile.mkdtemp(prefix="agray_2n_", dir="/tmp"))
    out, signal_file = work / "out.json", work / "kill.signal"
    with private_ray_head(num_cpus=head_cpus) as head:
        env = {k: v for k, v in head["env"].items() if k != "RAY_ADDRESS"}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        node_ctx = (
            private_ray_worker_node(head["gcs"], num_cpus=worker_cpus, env=env)
            if worker_cpus
            else contextlib.nullcontext(None)
        )
        with node_ctx as node:
            _wait_for_nodes(head["gcs"], 2 if worker_cpus else 1, env)
            cmd = [sys.executable, "-m", "tests.helpers.two_node_training", "--address", head["gcs"]]
            cmd += ["--out", str(out), "--iterations", str(iterations), "--kill-after", str(kill_after)]
            if kill_worker:
                cmd += ["--kill-signal", str(signal_file)]
            log = open(work / "driver.log", "w")  # noqa: SIM115 - closed below
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
            kill_t = None
            deadline = time.monotonic() + timeout_s
            try:
                while proc.poll() is None and time.monotonic() < deadline:
                    if kill_worker and kill_t is None and signal_file.exists():
                        time.sleep(0.5)  # into the next iteration's sampling
                        kill_t = time.time()
                        node["stop"](hard=True)
                    time.sleep(0.2)
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                log.close()
    result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"ok": False}
    result["kill_t"] = kill_t
    result["driver_log_tail"] = (work / "driver.log").read_text()[-3000:]
    return result


def _wait_for_nodes(gcs: str, n: int, env: dict[str, str], timeout_s: float = 120.0) -> None:
    """Block until the cluster at ``gcs`` has ``n`` alive nodes (checked from a throwaway driver process)."""
    code = (
        "import ray, sys, time; ray.init(address=sys.argv[1], log_to_driver=False); t = time.time()\n"
        "while sum(x['Alive'] for x in ray.nodes()) < int(sys.argv[2]) and time.time() - t < float(sys.argv[3]):\n"
        "    time.sleep(0.5)\n"
        "sys.exit(0 if sum(x['Alive'] for x in ray.nodes()) >= int(sys.argv[2]) else 1)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, gcs, str(n), str(timeout_s)], env=env, timeout=timeout_s + 60
    )
    if r.returncode != 0:
        raise TimeoutError(f"the cluster at {gcs} did not reach {n} nodes")


def throughput(result: dict[str, Any], skip: int = 1) -> float:
    """Env steps per second over the driver's iterations after the first ``skip`` (warm-up)."""
    its = result.get("iterations", [])[skip:]
    steps, secs = sum(x["env_steps"] for x in its), sum(x["s"] for x in its)
    return steps / secs if secs else 0.0
