"""Run the README's quickstart training command once per test session, as a user would.

``agentic-ray train --config configs/quickstart.yaml`` runs in the repository root (relative paths and all) in its
own process, with its own embedded local Ray. The learning test on the quickstart's figures and the README
command test both read this one run, so CI pays for the quickstart once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.readme import REPO

QUICKSTART_COMMAND = "agentic-ray train --config configs/quickstart.yaml"
# Runs go to the storage root the README documents (``$AGENTIC_RAY_STORAGE_PATH``), here a private temp dir, so a
# test session never writes into ``~/agentic_ray_results``.
STORAGE = Path(tempfile.mkdtemp(prefix="agray_runs_", dir="/tmp"))


@dataclass
class CliRun:
    command: str
    returncode: int
    output: str
    run_dir: Path


def run_cli(command: str, timeout_s: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``bash -c command`` in the repository root with the test session's environment."""
    full = {
        **os.environ,
        "WANDB_MODE": "offline",
        "RAY_USAGE_STATS_ENABLED": "0",
        "AGENTIC_RAY_STORAGE_PATH": str(STORAGE),
        **(env or {}),
    }
    full.pop("RAY_ADDRESS", None)  # an embedded local Ray, as on a fresh machine
    return subprocess.run(
        ["bash", "-c", command],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def run_dir_of(output: str) -> Path:
    m = re.search(r"run directory: (\S+)", output)
    if m is None:
        raise AssertionError(f"no 'run directory:' line in the output:\n{output[-3000:]}")
    p = Path(m.group(1))
    return p if p.is_absolute() else REPO / p


def run_quickstart(timeout_s: float = 1700) -> CliRun:
    r = run_cli(QUICKSTART_COMMAND, timeout_s)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        raise AssertionError(f"`{QUICKSTART_COMMAND}` exited {r.returncode}:\n{out[-4000:]}")
    return CliRun(QUICKSTART_COMMAND, r.returncode, out, run_dir_of(out))


def remove_run(run_dir: Path) -> None:
    """Remove a run (or sweep) directory this session created under ``runs/`` or ``sweeps/`` of the repository
    (and that folder if it is empty now); any other path is left alone."""
    run_dir = run_dir if run_dir.is_absolute() else REPO / run_dir
    for root in (REPO / "runs", REPO / "sweeps", STORAGE):
        if run_dir.is_relative_to(root) and run_dir != root:
            shutil.rmtree(run_dir, ignore_errors=True)
            if root.is_dir() and not any(root.iterdir()):
                root.rmdir()
