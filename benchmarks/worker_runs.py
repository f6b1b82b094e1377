"""Helpers for benchmarks that run each (arm, seed) in a subprocess of their own script (a private Ray each)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "RESULT "


def report(result: dict[str, Any]) -> None:
    """What a worker prints last: its result as one JSON line the parent picks up."""
    print(PREFIX + json.dumps(result), flush=True)


def run_worker(script: str, args: list[str], label: str) -> dict[str, Any]:
    """Runs ``python script *args`` from the repository root and returns the result its worker reported.

    Raises:
        SystemExit: If the worker printed no result (its output tail goes to stderr).
    """
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=ROOT)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(PREFIX)), None)
    if line is None:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
        raise SystemExit(f"{label} failed (rc {proc.returncode})")
    return json.loads(line[len(PREFIX) :])
