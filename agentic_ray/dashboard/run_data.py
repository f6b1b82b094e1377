"""A run directory as the dashboard reads it: incrementally, while the run is still writing it.

``metrics.jsonl`` and ``traces.jsonl`` are append-only: :class:`JsonlTail` remembers how far it has read and
parses only what was appended since (a line still being written, without its newline, waits for the next
read). ``state.json``, ``settings.json`` and ``expert.json`` are replaced atomically by the pipeline and are
re-read when their modification time changes. Nothing here writes to the run.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from agentic_ray.eval.report import EXPERT_FILE, METRICS_FILE
from agentic_ray.eval.traces import TRACES_FILE

STATE_FILE = "state.json"
SETTINGS_FILE = "settings.json"


class JsonlTail:
    """The rows of an append-only JSON-lines file, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self._offset = 0
        self._ino: int | None = None

    def refresh(self) -> list[dict[str, Any]]:
        """Read what was appended since the last call; returns the new rows."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return []
        if self._ino is not None and (st.st_ino != self._ino or st.st_size < self._offset):
            self.rows, self._offset = [], 0  # replaced or truncated: start over
        self._ino = st.st_ino
        if st.st_size == self._offset:
            return []
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read(st.st_size - self._offset)
        end = chunk.rfind(b"\n") + 1  # a last line without its newline is still being written
        new = [json.loads(line) for line in chunk[:end].splitlines() if line.strip()]
        self._offset += end
        self.rows.extend(new)
        return new


class _JsonFile:
    """A small JSON file replaced atomically by its writer; re-read when its mtime changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime: int | None = None
        self.value: Any = None

    def get(self) -> Any:
        try:
            m = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return self.value
        if m != self._mtime:
            try:
                self.value = json.loads(self.path.read_text())
                self._mtime = m
            except (json.JSONDecodeError, OSError):
                pass  # caught mid-write by a non-atomic writer: keep the last good value
        return self.value


class RunData:
    """Everything the dashboard shows about one run directory (thread-safe; cheap to call repeatedly).

    Args:
        run_dir: a directory written by ``agentic-ray train`` (it may still be running).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self._lock = threading.Lock()
        self._metrics = JsonlTail(self.run_dir / METRICS_FILE)
        self._traces = JsonlTail(self.run_dir / TRACES_FILE)
        self._state = _JsonFile(self.run_dir / STATE_FILE)
        self._settings = _JsonFile(self.run_dir / SETTINGS_FILE)
        self._expert = _JsonFile(self.run_dir / EXPERT_FILE)
        self._index: dict[str, int] = {}

    def refresh(self) -> None:
        """Pick up appended metrics and traces."""
        with self._lock:
            self._metrics.refresh()
            start = len(self._traces.rows)
            for i, t in enumerate(self._traces.refresh(), start):
                self._index[str(t.get("trace_id"))] = i
                for s in t.get("steps", []):
                    if s.get("step_trace_id"):
                        self._index[str(s["step_trace_id"])] = i

    def metrics(self) -> list[dict[str, Any]]:
        """Every row of ``metrics.jsonl`` (evaluations and gate rows), in file order."""
        self.refresh()
        return list(self._metrics.rows)

    def traces(self) -> list[dict[str, Any]]:
        """Every trace of ``traces.jsonl``, in file order."""
        self.refresh()
        return list(self._traces.rows)

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """The latest trace whose ``trace_id``, or one of whose steps' ``step_trace_id``, is ``trace_id``."""
        self.refresh()
        i = self._index.get(trace_id)
        return None if i is None else self._traces.rows[i]

    def trace_summaries(self) -> list[dict[str, Any]]:
        """One line per trace for the trace list: ids, family, stage, outcome, failed and injected steps."""
        out = []
        for t in self.traces():
            steps = t.get("steps", [])
            out.append(
                {
                    "trace_id": t.get("trace_id"),
                    "task_family": t.get("task_family"),
                    "stage": t.get("stage"),
                    "iteration": t.get("iteration"),
                    "env_steps": t.get("env_steps"),
                    "completed": t.get("completed"),
                    "failed": t.get("failed", not t.get("completed", False)),
                    "kept_as": t.get("kept_as", []),
                    "steps": len(steps),
                    "failed_steps": sum(s.get("result_code") != "OK" for s in steps),
                    "injected_steps": sum(bool(s.get("injected")) for s in steps),
                }
            )
        return out

    def state(self) -> dict[str, Any]:
        return self._state.get() or {}

    def settings(self) -> dict[str, Any]:
        return self._settings.get() or {}

    def expert(self) -> dict[str, Any] | None:
        return self._expert.get()

    def status(self) -> dict[str, Any]:
        """What a page polls: the run's status and how much data there is (a change means: redraw)."""
        self.refresh()
        st = self.state()
        return {
            "run_dir": str(self.run_dir),
            "name": self.run_dir.name,
            "status": st.get("status", "starting"),
            "stage": st.get("stage"),
            "iteration": st.get("iteration"),
            "env_steps": st.get("env_steps"),
            "completed_stages": st.get("completed", []),
            "metrics_rows": len(self._metrics.rows),
            "traces": len(self._traces.rows),
            "expert": self.expert() is not None,
        }
