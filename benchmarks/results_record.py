"""Where a benchmark's figures go: printed as JSON lines, and recorded in ``benchmarks/results/<name>.json``.

Every figure the documentation shows (the results pages of the docs site and the README's headline table) is
generated from these records by ``docs/gen_pages.py``, so no figure is copied by hand. A record carries the exact
command, the commit it ran on (and whether the tree had uncommitted changes), the time, the machine's CPU count
and load, so that a page can mark a figure whose code has changed since it was measured.

``AGENTIC_RAY_RESULTS_DIR`` redirects records (the test suite runs benchmarks at tiny budgets and must never
overwrite the real records); ``--no-record`` style flags are not needed: a run with other settings records its
own command beside its figures, and the page shows it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RESULTS_DIR_ENV = "AGENTIC_RAY_RESULTS_DIR"


def results_dir() -> Path:
    """The directory records go to: ``$AGENTIC_RAY_RESULTS_DIR`` if set, else ``benchmarks/results``."""
    return Path(os.environ.get(RESULTS_DIR_ENV) or RESULTS)


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=20
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def record_name(benchmark: str, variant: str | None = None) -> str:
    """The record's file stem: the benchmark's name, plus ``-<variant>`` for a variant (e.g. another domain)."""
    return benchmark if not variant else f"{benchmark}-{variant}"


def publish(
    benchmark: str,
    rows: Sequence[dict[str, Any]],
    *,
    variant: str | None = None,
    argv: Sequence[str] | None = None,
    note: str | None = None,
) -> Path:
    """Print each row as one JSON line, then write the record ``<results dir>/<benchmark>[-<variant>].json``.

    Args:
        benchmark: The benchmark's name (its script's stem).
        rows: The figures, one dict per line the benchmark prints (e.g. one per arm).
        variant: Tells apart records of one script run on different subjects (``--domain helpdesk``).
        argv: The script's arguments (default ``sys.argv[1:]``), recorded as the command that printed the rows.
        note: A short remark the results page shows beside the figures (e.g. "other jobs running").

    Returns:
        The record's path.
    """
    for row in rows:
        print(json.dumps(row), flush=True)
    args = list(sys.argv[1:] if argv is None else argv)
    script = f"benchmarks/{benchmark}.py"
    load1, load5, _ = os.getloadavg()
    record = {
        "benchmark": benchmark,
        "variant": variant,
        "command": " ".join(["python", script, *(shlex.quote(a) for a in args)]),
        "recorded_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "commit": _git("rev-parse", "HEAD"),
        # the records themselves do not count: a run after another benchmark wrote its record is still clean
        "uncommitted_changes": bool(
            _git("status", "--porcelain", "--", "agentic_ray", "benchmarks", ":(exclude)benchmarks/results")
        ),
        "machine": {"cpus": os.cpu_count(), "load1": round(load1, 2), "load5": round(load5, 2)},
        "note": note,
        "rows": list(rows),
    }
    out_dir = results_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{record_name(benchmark, variant)}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"# recorded in {path}", file=sys.stderr)
    return path


def load_records(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every record in ``directory`` (default: ``benchmarks/results``), keyed by file stem."""
    directory = RESULTS if directory is None else directory
    return {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json")) if _is_record(p)}


def _is_record(path: Path) -> bool:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "benchmark" in data and "rows" in data
