"""The human-handoff queue: calls the gateway could not complete, waiting for a person.

When retries and the whole fallback chain fail, :class:`~agentic_ray.skills.executor.ToolExecutor` pushes the
call here (trace id, intent, skill, reason, message and the call's params) and returns the queue id in the
result. The queue is a table in the same SQLite file as the audit log, so one file holds what happened and
what is waiting. Items are never deleted: a person resolves them (``open`` → ``resolved``, with a note), and
triggers reject any other change, as in the audit log.

``agentic-ray skills handoffs --audit PATH`` lists the queue; ``agentic-ray skills serve --audit PATH`` serves it
at ``GET /handoffs`` and ``POST /handoffs/{id}/resolve``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS handoffs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    trace_id TEXT NOT NULL,
    intent_id TEXT NOT NULL,
    skill TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    resolved_ts REAL,
    resolution TEXT
);
CREATE INDEX IF NOT EXISTS handoffs_status ON handoffs(status);
CREATE TRIGGER IF NOT EXISTS handoffs_no_delete BEFORE DELETE ON handoffs
BEGIN SELECT RAISE(ABORT, 'handoff queue items are resolved, never deleted'); END;
CREATE TRIGGER IF NOT EXISTS handoffs_only_resolve BEFORE UPDATE ON handoffs
WHEN OLD.status != 'open' OR NEW.status != 'resolved'
  OR NEW.ts != OLD.ts OR NEW.trace_id != OLD.trace_id OR NEW.intent_id != OLD.intent_id
  OR NEW.skill != OLD.skill OR NEW.reason != OLD.reason OR NEW.message != OLD.message
  OR NEW.payload != OLD.payload
BEGIN SELECT RAISE(ABORT, 'a handoff can only go from open to resolved'); END;
"""

STATUSES = ("open", "resolved")


@dataclass(frozen=True)
class Handoff:
    """One queued handoff."""

    id: int
    ts: float
    trace_id: str
    intent_id: str
    skill: str
    reason: str
    message: str
    payload: dict[str, Any]
    status: str
    resolved_ts: float | None
    resolution: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class HandoffQueue:
    """SQLite-backed handoff queue.

    Args:
        path: SQLite file (the audit log's), or ``":memory:"``.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def push(
        self,
        *,
        trace_id: str,
        intent_id: str,
        skill: str,
        reason: str,
        message: str,
        payload: dict[str, Any],
    ) -> int:
        """Queue one handoff; returns its id."""
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO handoffs (ts, trace_id, intent_id, skill, reason, message, payload) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time.time(), trace_id, intent_id, skill, reason, message, json.dumps(payload, default=str)),
            )
            return int(cur.lastrowid or 0)

    def list(self, status: str | None = "open", limit: int | None = None) -> list[Handoff]:
        """Handoffs with ``status`` (None: all), oldest first."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES} or None, got {status!r}")
        sql = "SELECT * FROM handoffs" + (" WHERE status = ?" if status else "") + " ORDER BY id"
        args: tuple[Any, ...] = (status,) if status else ()
        if limit is not None:
            sql += " LIMIT ?"
            args += (int(limit),)
        with self._lock:
            cur = self._db.execute(sql, args)
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        return [Handoff(**{**r, "payload": json.loads(r["payload"])}) for r in rows]

    def resolve(self, handoff_id: int, resolution: str = "") -> bool:
        """Mark an open handoff resolved; False when there is no open handoff with that id."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE handoffs SET status = 'resolved', resolved_ts = ?, resolution = ? "
                "WHERE id = ? AND status = 'open'",
                (time.time(), resolution, int(handoff_id)),
            )
            return cur.rowcount == 1

    def close(self) -> None:
        with self._lock:
            self._db.close()
