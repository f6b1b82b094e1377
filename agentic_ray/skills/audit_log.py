"""Append-only SQLite audit log of every gateway call.

Rows are buffered and written in batches (one transaction per ``flush_every`` rows) so that auditing stays off
the hot path; :meth:`AuditLog.rows` and :meth:`AuditLog.close` flush first. Triggers reject UPDATE and DELETE,
so the table is append-only at the database level, not just by convention. ``degraded`` is 1 for a fallback's
reply (an ``OK`` that is not the skill's own answer); files written before that column existed gain it on open.

An in-memory log (``":memory:"``, what every env and Serve replica gets unless given a file) keeps the last
``window`` rows, not every row: it lives as long as its process, and with every row it grew without bound, 20 MB of
RSS per 100k calls of a help-desk-sized row (measured), in an EnvRunner or a Serve replica. Its rows stay as tuples
in a ring and reach SQLite only when read (:meth:`AuditLog.rows`, :meth:`AuditLog.count`), with ``id`` the call's
sequence number, so a reader sees which calls fell out of the window (:attr:`AuditLog.dropped` counts them). A file
keeps every row: it is the durable record, append-only as above.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

_PARAMS_JSON = json.JSONEncoder(default=str)
"""What ``json.dumps(params, default=str)`` uses, built once: ``dumps`` with a keyword builds a new encoder per
call, and the audit row of every env step paid for it (~1.5% of env time on e-commerce, py-spy)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    intent_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    skill TEXT NOT NULL,
    params TEXT NOT NULL,
    result_code TEXT NOT NULL,
    latency_ms REAL NOT NULL,
    attempts INTEGER NOT NULL,
    fallback_used TEXT,
    warnings TEXT,
    degraded INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS audit_trace ON audit(trace_id);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
"""

COLUMNS = (
    "ts",
    "intent_id",
    "trace_id",
    "skill",
    "params",
    "result_code",
    "latency_ms",
    "attempts",
    "fallback_used",
    "warnings",
    "degraded",
)


DEFAULT_WINDOW = 10_000
"""Rows an in-memory audit log keeps: the last few thousand episodes' calls of an env, enough to trace a failure."""


class AuditLog:
    """Args:
    path: SQLite file, or ``":memory:"``.
    flush_every: rows buffered before one batched insert (a file).
    window: rows an in-memory log keeps (the latest; None: all). A file keeps all.
    """

    def __init__(
        self, path: str | Path = ":memory:", flush_every: int = 256, window: int | None = DEFAULT_WINDOW
    ) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = self._open()
        self._buf: list[tuple[Any, ...]] = []
        self._flush_every = flush_every
        self._lock = threading.Lock()
        # An in-memory window: rows wait in the ring (the oldest drop out) and are loaded into a fresh table when
        # read. Writing each row into SQLite was ~5 us of a ~9 us append (help-desk env, one call a step).
        self._ring: deque[tuple[Any, ...]] | None = (
            deque(maxlen=window) if self.path == ":memory:" and window is not None else None
        )
        self._appended = 0  # rows ever appended (the ring's newest row has this id)
        self._loaded = 0  # self._appended when the ring was last loaded into the table

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
        db.executescript(_SCHEMA)
        cols = {r[1] for r in db.execute("PRAGMA table_info(audit)")}
        if "degraded" not in cols:  # an audit file from before the column
            db.execute("ALTER TABLE audit ADD COLUMN degraded INTEGER NOT NULL DEFAULT 0")
        return db

    @property
    def dropped(self) -> int:
        """Rows that fell out of an in-memory log's window (0 for a file)."""
        return 0 if self._ring is None else self._appended - len(self._ring)

    def append(
        self,
        intent_id: str,
        trace_id: str,
        skill: str,
        params: dict[str, Any],
        result_code: str,
        latency_ms: float,
        attempts: int,
        fallback_used: str | None,
        warnings: list[str],
        degraded: bool = False,
    ) -> None:
        row = (
            time.time(),
            intent_id,
            trace_id,
            skill,
            _PARAMS_JSON.encode(params),
            result_code,
            latency_ms,
            attempts,
            fallback_used,
            json.dumps(warnings) if warnings else None,
            int(degraded),
        )
        with self._lock:
            self._appended += 1
            if self._ring is not None:
                self._ring.append(row)
                return
            self._buf.append(row)
            if len(self._buf) >= self._flush_every:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._ring is not None:
            if self._loaded != self._appended:  # the window moved: a fresh table holds it, ids = call numbers
                self._db.close()
                self._db = self._open()
                first = self._appended - len(self._ring) + 1
                self._db.execute("BEGIN")
                self._db.executemany(
                    f"INSERT INTO audit (id,{','.join(COLUMNS)}) VALUES (?,{','.join('?' * len(COLUMNS))})",
                    [(i, *r) for i, r in enumerate(self._ring, first)],
                )
                self._db.execute("COMMIT")
                self._loaded = self._appended
            return
        if not self._buf:
            return
        self._db.execute("BEGIN")
        self._db.executemany(
            f"INSERT INTO audit ({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})", self._buf
        )
        self._db.execute("COMMIT")
        self._buf.clear()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def rows(self, where: str = "", args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """All rows (flushed first) as dicts, oldest first. ``where`` is an SQL condition with ``?`` args."""
        with self._lock:
            self._flush_locked()
            cur = self._db.execute(
                f"SELECT id,{','.join(COLUMNS)} FROM audit {'WHERE ' + where if where else ''} ORDER BY id",
                args,
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def count(self) -> int:
        with self._lock:
            self._flush_locked()
            return int(self._db.execute("SELECT COUNT(*) FROM audit").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._ring is None:  # a window dies with its log: nothing to load into a table about to close
                self._flush_locked()
            self._db.close()
