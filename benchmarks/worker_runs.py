"""Helpers for benchmarks that run each (arm, seed) in a subprocess of their own script (a private Ray each): the
worker's result line, the runs file a campaign resumes from, and where a learning curve first reaches a target."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "RESULT "
RAY_START_TIMEOUT = "The current node timed out during startup"
"""Ray's error when a private local cluster's raylet or GCS did not come up in time: a loaded machine, not a
result. On 2026-12-05 one such start, at load 7-12, ended a 7-arm aaac_vs_ppo campaign after 3 of its 10 runs."""


def report(result: dict[str, Any]) -> None:
    """What a worker prints last: its result as one JSON line the parent picks up."""
    print(PREFIX + json.dumps(result), flush=True)


def run_worker(script: str, args: list[str], label: str, ray_start_retries: int = 2) -> dict[str, Any]:
    """Runs ``python script *args`` from the repository root and returns the result its worker reported.

    A worker whose private Ray did not start in time (:data:`RAY_START_TIMEOUT` in its output) is run again, up to
    ``ray_start_retries`` times: it trained nothing, so the rerun is the same run.

    Raises:
        SystemExit: If the worker printed no result (its output tail goes to stderr).
    """
    for attempt in range(ray_start_retries + 1):
        proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=ROOT)
        line = next((x for x in proc.stdout.splitlines() if x.startswith(PREFIX)), None)
        if line is not None:
            return json.loads(line[len(PREFIX) :])
        started = RAY_START_TIMEOUT not in proc.stdout + proc.stderr
        if started or attempt == ray_start_retries:
            break
        sys.stderr.write(f"{label}: Ray did not start in time, running it again ({attempt + 1})\n")
    sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
    raise SystemExit(f"{label} failed (rc {proc.returncode})")


def settings_fingerprint(settings: Any) -> str:
    """Short hash of validated settings (``ExperimentSettings``), every default filled in, the seed left out: a
    recorded run is reused only while its fingerprint matches (a changed setting or code default reruns it)."""
    import hashlib

    d = settings.model_dump(mode="json")
    d.pop("seed", None)
    return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def append_run(path: str | None, run: dict[str, Any], settings_key: str) -> None:
    """Append one finished run to the JSON-lines file ``path`` (nothing without one), with its ``settings_key``
    for :func:`load_runs`. One ``write`` per line, under a lock: campaigns write from a thread pool."""
    if path:
        with _APPEND_LOCK, open(path, "a") as f:
            f.write(json.dumps({**run, "settings_key": settings_key}) + "\n")


_APPEND_LOCK = threading.Lock()


def load_runs(
    path: str | None, keys: dict[str, str], arm_field: str = "algo"
) -> dict[tuple[str, int], dict[str, Any]]:
    """Finished runs in the JSON-lines file ``path`` whose ``settings_key`` is their arm's (``keys``: arm -> key),
    by ``(arm, seed)``; the arm is each line's ``arm_field``. A later line of the same run replaces an earlier one.
    """
    if not path or not Path(path).exists():
        return {}
    out = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        if r.pop("settings_key", None) == keys.get(r[arm_field]):
            out[(r[arm_field], r["seed"])] = r
    return out


def first_reaching(curve: Sequence[Sequence[Any]], target: float, at: int = 0, value: int = 1) -> Any | None:
    """The ``at`` entry of the first point of ``curve`` whose ``value`` entry reaches ``target`` (``>=``); None
    when no point does. A point whose value is None (not measured) does not reach it.

    Example: ``first_reaching([(0, 0.4), (500, 0.7), (900, 0.8)], 0.7)`` is 500.
    """
    for point in curve:
        v = point[value]
        if v is not None and v >= target:
            return point[at]
    return None
