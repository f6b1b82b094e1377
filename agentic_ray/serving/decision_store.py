"""Durable store of served decisions, user feedback and agent-mode sessions (SQLite), and the reader the training
side uses.

Every decision (``/v1/act``, each agent-mode step, each finished episode) is written with its request and its
answer under its ``trace_id``; ``POST /v1/feedback`` stores the user's verdict on one of them. The file is named
in the service config, so a restarted replica (or a training job) finds everything written before.

Decisions are buffered and written by one background thread in batches (every ``flush_s``), off the request
path: one commit per decision was 1-3 ms on this box's disk, larger than the policy's forward pass. Feedback and
sessions are written synchronously, after flushing pending decisions, so a 200 means they are on disk: a gateway
replica killed right after answering loses neither (a session is its task and the actions taken, replayed by the
next replica: :mod:`agentic_ray.serving.sessions`). WAL mode lets a reader (:func:`read_feedback`) run while the
service writes.

**Retention** (:class:`~agentic_ray.serving.settings.StoreSettings`): the same background thread compacts the file
every ``compact_every_s`` on a connection of its own, in batches of :data:`BATCH` rows, so requests never wait on
it for more than one short batch (see :meth:`DecisionStore.compact`). Decisions, consumed feedback and closed sessions older than ``retention_h`` are deleted,
then the oldest decisions while the stored requests and answers exceed ``max_mb``. Feedback a refiner has not yet
consumed is never deleted, nor the decision it is about: the refiner reads it with
``read_feedback(path, unconsumed=True)`` and marks it with :func:`mark_feedback_consumed`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DecisionStore",
    "FeedbackRecord",
    "StoredSession",
    "mark_feedback_consumed",
    "read_feedback",
]

BATCH = 500
"""Rows deleted per compaction transaction."""
YIELD_S = 0.002
"""Pause between two compaction batches, in which the request path's writes get the lock."""

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
CREATE INDEX IF NOT EXISTS decisions_created ON decisions (created);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trace_id TEXT NOT NULL,
    created REAL NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT,
    comment TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_trace ON feedback (trace_id);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    client TEXT NOT NULL,
    family TEXT NOT NULL,
    seed INTEGER NOT NULL,
    arm TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    open INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS session_steps (
    session_id TEXT NOT NULL,
    t INTEGER NOT NULL,
    action TEXT NOT NULL,
    decider TEXT NOT NULL,
    PRIMARY KEY (session_id, t)
);
"""

_KEEP = "NOT EXISTS (SELECT 1 FROM feedback f WHERE f.trace_id = decisions.trace_id AND f.consumed IS NULL)"
"""A decision no unconsumed feedback is about (only those may be deleted)."""

_SESSIONS_WITH_FEEDBACK = (
    "SELECT f.trace_id FROM feedback f WHERE f.consumed IS NULL "  # feedback on the episode: its trace id
    "UNION SELECT json_extract(d.request, '$.session_id') FROM feedback f "  # feedback on one of its steps
    "JOIN decisions d ON d.trace_id = f.trace_id "
    "WHERE f.consumed IS NULL AND json_extract(d.request, '$.session_id') IS NOT NULL"  # NOT IN (.., NULL) is never true
)
"""Session ids that unconsumed feedback is about (an episode's, or the session of a step's decision): retention
keeps those sessions and their steps, which the refiner replays."""


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
    consumed: float | None = None
    """When a refiner marked it consumed (Unix time), or None."""


@dataclass(frozen=True)
class StoredSession:
    """An agent-mode session as stored: its task, who holds it and the actions taken so far."""

    session_id: str
    client: str
    family: str
    seed: int
    arm: str
    updated: float
    open: bool


@contextmanager
def _connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    con = sqlite3.connect(str(path), timeout=30.0)
    try:
        yield con
    finally:
        con.close()


def _open(path: Path) -> sqlite3.Connection:
    """The file's connection, its tables created (a new file gets incremental auto-vacuum, so compaction can hand
    pages back) and older files migrated (feedback's ``consumed`` column)."""
    con = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False)
    if not con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        con.execute("PRAGMA auto_vacuum=INCREMENTAL")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.executescript(_SCHEMA)
    cols = {r[1] for r in con.execute("PRAGMA table_info(feedback)")}
    if "consumed" not in cols:
        con.execute("ALTER TABLE feedback ADD COLUMN consumed REAL")
    con.commit()
    return con


class DecisionStore:
    """Decisions, feedback and sessions in one SQLite file (see the module docstring).

    Args:
        path: the SQLite file (created with its tables if missing).
        flush_s: how often buffered decisions are written.
        retention_s: age beyond which decisions, consumed feedback and closed sessions are deleted.
        max_bytes: stored requests and answers beyond which the oldest decisions are deleted.
        compact_every_s: how often the background thread compacts (None: only when :meth:`compact` is called).
        clock: wall-clock seconds (row times; injected for tests).
    """

    def __init__(
        self,
        path: str | Path,
        flush_s: float = 0.2,
        retention_s: float = 72 * 3600.0,
        max_bytes: float = 512e6,
        compact_every_s: float | None = 60.0,
        clock: Any = time.time,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = _open(self.path)
        self.retention_s = retention_s
        self.max_bytes = max_bytes
        self.compact_every_s = compact_every_s
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, ...]] = []
        self._pending_ids: dict[str, tuple[str, str]] = {}
        self._stop = threading.Event()
        self._flush_s = flush_s
        self.compactions: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._run, name="decision-store", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ decisions and feedback
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
            self.clock(),
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
                (trace_id, self.clock(), outcome, reason, comment),
            )
            self._con.commit()
            return int(cur.lastrowid or 0)

    # ------------------------------------------------------------------ sessions
    def open_session(self, session_id: str, client: str, family: str, seed: int, arm: str) -> None:
        """Store a new open session now."""
        now = self.clock()
        self._write(
            "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
            (session_id, client, family, seed, arm, now, now),
        )

    def add_session_step(self, session_id: str, t: int, action: Any, decider: str) -> None:
        """Store step ``t``'s action (JSON-able) now."""
        with self._lock:
            self._con.execute(
                "INSERT OR REPLACE INTO session_steps VALUES (?, ?, ?, ?)",
                (session_id, t, json.dumps(action), decider),
            )
            self._con.execute(
                "UPDATE sessions SET updated = ? WHERE session_id = ?", (self.clock(), session_id)
            )
            self._con.commit()

    def close_session(self, session_id: str) -> None:
        """Mark a session closed now (its steps are deleted with it by retention)."""
        self._write(
            "UPDATE sessions SET open = 0, updated = ? WHERE session_id = ?", (self.clock(), session_id)
        )

    def session(self, session_id: str) -> StoredSession | None:
        with self._lock:
            row = self._con.execute(
                "SELECT session_id, client, family, seed, arm, updated, open FROM sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        return _stored_session(row) if row else None

    def open_sessions(self) -> list[StoredSession]:
        """Every session stored as open (what a restarted gateway may resume)."""
        with self._lock:
            rows = self._con.execute(
                "SELECT session_id, client, family, seed, arm, updated, open FROM sessions WHERE open = 1"
            ).fetchall()
        return [_stored_session(r) for r in rows]

    def session_steps(self, session_id: str) -> list[tuple[Any, str]]:
        """``(action, decider)`` of a stored session's steps, in order."""
        with self._lock:
            rows = self._con.execute(
                "SELECT action, decider FROM session_steps WHERE session_id = ? ORDER BY t", (session_id,)
            ).fetchall()
        return [(json.loads(a), d) for a, d in rows]

    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        with self._lock:
            self._con.execute(sql, args)
            self._con.commit()

    # ------------------------------------------------------------------ writing and compaction
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
        last = time.monotonic()
        while not self._stop.wait(self._flush_s):
            self.flush()
            if self.compact_every_s is not None and time.monotonic() - last >= self.compact_every_s:
                last = time.monotonic()
                self.compact()

    def compact(self) -> dict[str, Any]:
        """Apply the retention now, on a connection of its own (see the module docstring); returns what was
        deleted, when it started (``time.perf_counter``) and how long it took (also appended to
        :attr:`compactions`, the last 100).

        Each batch holds the store's lock, which the request path's writes take too, and the lock is let go
        between batches: SQLite alone would let the compacting connection starve them (measured: not one of the
        feedback writes sent during a 20,000-row compaction got through before it ended; its busy handler backs
        off for tens of milliseconds while the next batch starts at once)."""
        t0 = time.perf_counter()
        cutoff = self.clock() - self.retention_s
        out: dict[str, Any] = {"started": t0}
        with _connect(self.path) as con:
            out["decisions_expired"] = self._delete_batches(
                con, f"SELECT rowid FROM decisions WHERE created < ? AND {_KEEP}", (cutoff,), "decisions"
            )
            out["feedback_expired"] = self._delete_batches(
                con,
                "SELECT rowid FROM feedback WHERE consumed IS NOT NULL AND created < ?",
                (cutoff,),
                "feedback",
            )
            # an open session idle that long was abandoned (the session TTL is minutes); a session that
            # unconsumed feedback is about stays, with its steps, so that `agentic-ray refine` can replay it
            out["sessions_expired"] = self._delete_batches(
                con,
                f"SELECT rowid FROM sessions WHERE updated < ? AND session_id NOT IN ({_SESSIONS_WITH_FEEDBACK})",
                (cutoff,),
                "sessions",
            )
            self._delete_batches(
                con,
                "SELECT rowid FROM session_steps WHERE session_id NOT IN (SELECT session_id FROM sessions)",
                (),
                "session_steps",
            )
            out["decisions_over_size"] = self._trim_to_size(con)
            with self._lock:
                con.execute("PRAGMA incremental_vacuum")
                con.execute("PRAGMA wal_checkpoint(PASSIVE)")
            out["decisions_left"] = con.execute("SELECT count(*) FROM decisions").fetchone()[0]
            out["feedback_left"] = con.execute("SELECT count(*) FROM feedback").fetchone()[0]
        out["ms"] = (time.perf_counter() - t0) * 1e3
        self.compactions.append(out)
        del self.compactions[:-100]
        return out

    def _trim_to_size(self, con: sqlite3.Connection) -> int:
        """Delete the oldest deletable decisions until the stored requests and answers fit ``max_bytes``."""
        total = con.execute(
            "SELECT coalesce(sum(length(request) + length(decision)), 0) FROM decisions"
        ).fetchone()[0]
        excess, deleted = total - self.max_bytes, 0
        while excess > 0:
            rows = con.execute(
                f"SELECT rowid, length(request) + length(decision) FROM decisions WHERE {_KEEP} "
                f"ORDER BY created LIMIT {BATCH}"
            ).fetchall()
            if not rows:
                break
            take = []
            for rowid, size in rows:
                if excess <= 0:
                    break
                take.append((rowid,))
                excess -= size
            with self._lock:
                con.executemany("DELETE FROM decisions WHERE rowid = ?", take)
                con.commit()
            time.sleep(YIELD_S)
            deleted += len(take)
        return deleted

    def _delete_batches(self, con: sqlite3.Connection, select: str, args: tuple[Any, ...], table: str) -> int:
        """Delete the rows ``select`` finds, :data:`BATCH` per transaction under the store's lock; returns how
        many."""
        deleted = 0
        while True:
            with self._lock:
                cur = con.execute(f"DELETE FROM {table} WHERE rowid IN ({select} LIMIT {BATCH})", args)
                con.commit()
            deleted += cur.rowcount
            if cur.rowcount < BATCH:
                return deleted
            time.sleep(YIELD_S)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.flush()
        self._con.close()


def _stored_session(row: tuple[Any, ...]) -> StoredSession:
    sid, client, family, seed, arm, updated, is_open = row
    return StoredSession(sid, client, family, int(seed), arm, float(updated), bool(is_open))


def read_feedback(
    path: str | Path, since: float | None = None, unconsumed: bool = False
) -> list[FeedbackRecord]:
    """Every piece of feedback in a service's store, oldest first, with the decision it is about.

    Args:
        path: the ``feedback_db`` file of the service config.
        since: only feedback created after this Unix time.
        unconsumed: only feedback no refiner has marked consumed yet (:func:`mark_feedback_consumed`).
    """
    q = (
        "SELECT f.id, f.trace_id, f.created, f.outcome, f.reason, f.comment, d.kind, d.arm, d.model_version, "
        "d.request, d.decision, f.consumed FROM feedback f JOIN decisions d ON d.trace_id = f.trace_id"
    )
    where, args = [], []
    if since is not None:
        where.append("f.created > ?")
        args.append(since)
    if unconsumed:
        where.append("f.consumed IS NULL")
    if where:
        q += " WHERE " + " AND ".join(where)
    with _connect(path) as con:
        rows = con.execute(q + " ORDER BY f.id", args).fetchall()
    return [
        FeedbackRecord(
            r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], json.loads(r[9]), json.loads(r[10]), r[11]
        )
        for r in rows
    ]


def mark_feedback_consumed(path: str | Path, feedback_ids: Iterable[int], when: float | None = None) -> int:
    """Mark feedback as consumed by a refiner (from then on retention may delete it, with its decision, once it
    is older than ``retention_h``); returns how many rows were marked (already consumed ones keep their time)."""
    ids = [(when if when is not None else time.time(), int(i)) for i in feedback_ids]
    with _connect(path) as con:
        cur = con.executemany("UPDATE feedback SET consumed = ? WHERE id = ? AND consumed IS NULL", ids)
        con.commit()
        return cur.rowcount
