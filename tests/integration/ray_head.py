"""Start a private ``ray start --head`` for job-submission tests: own ports, own temp dir, killed by PID.

Never uses ``ray stop`` (it would kill every Ray cluster on the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from agentic_ray.skills.server import free_ports, stop_process_group

NODE_PORTS = (
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "runtime-env-agent-port",
    "node-manager-port",
    "object-manager-port",
    "metrics-export-port",
)


def _ray_start(
    role: list[str], num_cpus: int, temp_dir: str, resources: dict[str, float] | None, ports: dict[str, int]
) -> list[str]:
    """``ray start --block`` for one node: its role flags, CPUs, private temp dir, resources and ports."""
    cmd = [str(Path(sys.executable).parent / "ray"), "start", *role, "--block", f"--num-cpus={num_cpus}"]
    cmd += [f"--temp-dir={temp_dir}", "--disable-usage-stats", "--min-worker-port=0", "--max-worker-port=0"]
    if resources:
        cmd.append(f"--resources={json.dumps(resources)}")
    return cmd + [f"--{k}={v}" for k, v in ports.items()]


def _node_env(base: dict[str, str] | None) -> dict[str, str]:
    env = {**(base or os.environ), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    return env


@contextlib.contextmanager
def private_ray_head(
    num_cpus: int = 2, startup_timeout_s: float = 120.0, resources: dict[str, float] | None = None
) -> Iterator[dict[str, str]]:
    """Yields ``{"dashboard": url, "gcs": host:port, "temp_dir": path, "env": env for the ray CLI}``."""
    temp_dir = tempfile.mkdtemp(prefix="agray_head_", dir="/tmp")
    names = ("port", "dashboard-port", "ray-client-server-port", *NODE_PORTS)
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    cmd = _ray_start(
        ["--head", "--dashboard-host=127.0.0.1", "--include-dashboard=true"],
        num_cpus,
        temp_dir,
        resources,
        ports,
    )
    env = _node_env(None)
    log = open(Path(temp_dir) / "head.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    dash = f"http://127.0.0.1:{ports['dashboard-port']}"
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"ray head exited: {(Path(temp_dir) / 'head.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{dash}/api/version", timeout=2).status_code in (200, 401, 403):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("ray head did not come up")
            time.sleep(1.0)
        cli_env = {**env, "RAY_AUTH_MODE": "token", "RAY_ADDRESS": dash}
        yield {"dashboard": dash, "gcs": f"127.0.0.1:{ports['port']}", "temp_dir": temp_dir, "env": cli_env}
    finally:
        stop_process_group(proc, timeout_s=15)
        log.close()
        kill_matching(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


@contextlib.contextmanager
def private_ray_worker_node(
    gcs: str,
    num_cpus: int = 1,
    resources: dict[str, float] | None = None,
    startup_timeout_s: float = 120.0,
    env: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Join a worker node to the private head at ``gcs`` (own temp dir, own ports); killed by process group.

    Yields ``{"temp_dir": path, "stop": callable}``; ``stop(hard=True)`` SIGKILLs the node mid-run (a node loss),
    ``stop(hard=False)`` lets ``ray start --block`` shut it down. Either way it is stopped on exit.
    """
    temp_dir = tempfile.mkdtemp(prefix="agray_node_", dir="/tmp")
    ports = dict(zip(NODE_PORTS, free_ports(len(NODE_PORTS)), strict=True))
    cmd = _ray_start([f"--address={gcs}"], num_cpus, temp_dir, resources, ports)
    env = _node_env(env)
    log = open(Path(temp_dir) / "node.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stopped = {"done": False}

    def stop(hard: bool = True) -> None:
        if stopped["done"]:
            return
        stopped["done"] = True
        if hard:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        else:
            stop_process_group(proc, timeout_s=30)
        kill_matching(temp_dir)

    try:
        deadline = time.monotonic() + startup_timeout_s
        while not any(Path(temp_dir).glob("session_*/logs/raylet.out")):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"ray worker node exited: {(Path(temp_dir) / 'node.log').read_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError("ray worker node did not come up")
            time.sleep(0.5)
        yield {"temp_dir": temp_dir, "stop": stop}
    finally:
        stop(hard=True)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def kill_matching(pattern: str) -> None:
    """SIGKILL processes whose command line contains ``pattern`` (a private temp dir): Ray processes that
    outlived their process group."""
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    for pid in out:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
