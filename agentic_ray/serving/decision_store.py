"""Durable store of served decisions and user feedback (SQLite), and the reader the training side uses.

Every decision (``/v1/act``, each agent-mode step, each finished episode) is written with its request and its
answer under its ``trace_id``; ``POST /v1/feedback`` stores the user's verdict on one of them. The file is named
in the service config, so a restarted replica (or a training job) finds everything written before.

Decisions are buffered and written by one background thread in batches (every ``flush_s``), off the request
path: one commit per decision was 1-3 ms on this box's disk, larger than the policy's forward pass. Feedback is
written synchronously, after flushing pending decisions, so a 200 for feedback means it is on disk. WAL mode
lets a reader (:func:`read_feedback`) run while the service writes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DecisionStore", "FeedbackRecord", "read_feedback"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    trace_id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    kind TEXT NOT NULL,
    arm TEXT NOT NULL,
    model_version TEXT NOT NULL,
    request TEXT NOT NULL,
    decision TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trace_id TEXT NOT NULL,
    created REAL NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT,
    comment TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_trace ON feedback (trace_id);
"""


@dataclass(frozen=True)
class FeedbackRecord:
    """One piece of feedback joined with the decision it is about."""

    feedback_id: int
    trace_id: str
    created: float
    outcome: str
    reason: str | None
    comment: str
    kind: str
    arm: str
    model_version: str
    request: dict[str, Any]
    decision: dict[str, Any]


@contextmanager
def _connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    con = sqlite3.connect(str(path), timeout=30.0)
    try:
        yield con
    finally:
        con.close()


class DecisionStore:
    """Decisions and feedback in one SQLite file (see the module docstring).

    Args:
        path: the SQLite file (created with its tables if missing).
        flush_s: how often buffered decisions are written.
    """

    def __init__(self, path: str | Path, flush_s: float = 0.2) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=NORMAL")
        self._con.executescript(_SCHEMA)
        self._con.commit()
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, ...]] = []
        self._pending_ids: dict[str, tuple[str, str]] = {}
        self._stop = threading.Event()
        self._flush_s = flush_s
        self._thread = threading.Thread(target=self._run, name="decision-store", daemon=True)
        self._thread.start()

    def add_decision(
        self,
        trace_id: str,
        kind: str,
        arm: str,
        model_version: str,
        request: dict[str, Any],
        decision: dict[str, Any],
    ) -> None:
        """Queue a decision (written within ``flush_s``)."""
        row = (
            trace_id,
            time.time(),
            kind,
            arm,
            model_version,
            json.dumps(request, default=str),
            json.dumps(decision, default=str),
        )
        with self._lock:
            self._pending.append(row)
            self._pending_ids[trace_id] = (kind, arm)

    def decision(self, trace_id: str) -> tuple[str, str] | None:
        """``(kind, arm)`` of a stored (or pending) decision, or None."""
        with self._lock:
            if trace_id in self._pending_ids:
                return self._pending_ids[trace_id]
            row = self._con.execute(
                "SELECT kind, arm FROM decisions WHERE trace_id = ?", (trace_id,)
            ).fetchone()
        return (row[0], row[1]) if row else None

    def add_feedback(self, trace_id: str, outcome: str, reason: str | None, comment: str) -> int:
        """Store feedback now (pending decisions are flushed first); returns its row id."""
        with self._lock:
            self._flush_locked()
            cur = self._con.execute(
                "INSERT INTO feedback (trace_id, created, outcome, reason, comment) VALUES (?, ?, ?, ?, ?)",
                (trace_id, time.time(), outcome, reason, comment),
            )
            self._con.commit()
            return int(cur.lastrowid or 0)

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        self._con.executemany("INSERT OR REPLACE INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?)", self._pending)
        self._con.commit()
        self._pending.clear()
        self._pending_ids.clear()

    def _run(self) -> None:
        while not self._stop.wait(self._flush_s):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.flush()
        self._con.close()


def read_feedback(path: str | Path, since: float | None = None) -> list[FeedbackRecord]:
    """Every piece of feedback in a service's store, oldest first, with the decision it is about.

    Args:
        path: the ``feedback_db`` file of the service config.
        since: only feedback created after this Unix time.
    """
    q = (
        "SELECT f.id, f.trace_id, f.created, f.outcome, f.reason, f.comment, d.kind, d.arm, d.model_version, "
        "d.request, d.decision FROM feedback f JOIN decisions d ON d.trace_id = f.trace_id"
    )
    args: tuple[Any, ...] = ()
    if since is not None:
        q += " WHERE f.created > ?"
        args = (since,)
    with _connect(path) as con:
        rows = con.execute(q + " ORDER BY f.id", args).fetchall()
    return [
        FeedbackRecord(
            r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], json.loads(r[9]), json.loads(r[10])
        )
        for r in rows
    ]
