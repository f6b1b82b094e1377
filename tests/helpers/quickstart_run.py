"""Run the README's quickstart training command once per test session, as a user would.

``agentic-ray train --config configs/quickstart.yaml`` runs in the repository root (relative paths and all) in its
own process, with its own embedded local Ray. Every test that needs a policy trained the quickstart's way (the
quickstart's own learning test, RL over imitation, Correction Uplift, the README commands that read a run) reads
this one run, so CI pays for it once.

The run is keyed by the hash of the quickstart config and of the committed code (``quickstart_key``). With
``AGENTIC_RAY_TEST_CACHE=<dir>`` a developer's later sessions reuse a finished run of the same key instead of
training again; a tree with uncommitted changes under ``agentic_ray/`` or ``configs/`` has no key and always
trains. CI sets no cache, so it trains once per session.
"""

from __future__ import annotations

import hashlib
import json
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


def quickstart_key() -> str | None:
    """sha1 of the quickstart config and of the committed ``agentic_ray/`` and ``configs/`` trees; None when either
    has uncommitted changes (or git is unavailable), so a changed tree never reuses an old run."""
    try:
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "agentic_ray", "configs"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        trees = subprocess.run(
            ["git", "rev-parse", "HEAD:agentic_ray", "HEAD:configs"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    if dirty:
        return None
    text = (REPO / "configs" / "quickstart.yaml").read_text()
    return hashlib.sha1(json.dumps([QUICKSTART_COMMAND, text, trees]).encode()).hexdigest()[:16]


def _cached(key: str | None) -> CliRun | None:
    cache = os.environ.get("AGENTIC_RAY_TEST_CACHE")
    if not cache or key is None:
        return None
    entry = Path(cache) / f"quickstart-{key}.json"
    if not entry.is_file():
        return None
    data = json.loads(entry.read_text())
    run = CliRun(data["command"], data["returncode"], data["output"], Path(data["run_dir"]))
    return run if (run.run_dir / "checkpoints" / "reflection").is_dir() else None


def run_quickstart(timeout_s: float = 1700) -> CliRun:
    """The quickstart run of this session: a cached one of the same key (opt-in), else a fresh one."""
    key = quickstart_key()
    if (hit := _cached(key)) is not None:
        return hit
    cache = os.environ.get("AGENTIC_RAY_TEST_CACHE")
    env = {"AGENTIC_RAY_STORAGE_PATH": str(Path(cache) / "runs")} if cache and key else None
    r = run_cli(QUICKSTART_COMMAND, timeout_s, env)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        raise AssertionError(f"`{QUICKSTART_COMMAND}` exited {r.returncode}:\n{out[-4000:]}")
    run = CliRun(QUICKSTART_COMMAND, r.returncode, out, run_dir_of(out))
    if cache and key:
        entry = {"command": run.command, "returncode": 0, "output": run.output, "run_dir": str(run.run_dir)}
        (Path(cache) / f"quickstart-{key}.json").write_text(json.dumps(entry))
    return run


def remove_run(run_dir: Path) -> None:
    """Remove a run (or sweep) directory this session created under ``runs/`` or ``sweeps/`` of the repository
    (and that folder if it is empty now); any other path is left alone."""
    run_dir = run_dir if run_dir.is_absolute() else REPO / run_dir
    for root in (REPO / "runs", REPO / "sweeps", STORAGE):
        if run_dir.is_relative_to(root) and run_dir != root:
            shutil.rmtree(run_dir, ignore_errors=True)
            if root.is_dir() and not any(root.iterdir()):
                root.rmdir()
