"""The reward ledger: one SQLite row per (episode, layer), and one per episode, saved with checkpoints.

Every layer value the learner sees can be traced to the scorer and version that produced it, how long it took and
how many attempts it needed. :meth:`RewardLedger.audit` proves that every episode the learner consumed had all its
layers settled exactly once, and counts what was lost, dropped or double-counted.

Writes arrive as batches of events with a batch id; a batch id that was already applied is ignored, so a retried
write (for example after the ledger actor restarted) cannot count anything twice.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    episode_id TEXT PRIMARY KEY,
    env_episode_id TEXT,
    layers TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    runner TEXT,
    policy_version_sampled INTEGER,
    policy_version_consumed INTEGER,
    submitted_at REAL,
    finished_at REAL,
    consume_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS scores (
    episode_id TEXT NOT NULL,
    layer TEXT NOT NULL,
    status TEXT NOT NULL,
    value_sum REAL,
    value_last REAL,
    scorer TEXT,
    version TEXT,
    latency_s REAL,
    attempts INTEGER,
    reason TEXT,
    settle_count INTEGER NOT NULL DEFAULT 1,
    duplicate_results INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (episode_id, layer)
);
CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# Episode statuses.
PENDING = "pending"
CONSUMED = "consumed"
DROPPED = "dropped"
# Score statuses.
OK = "ok"
MISSING = "missing"


@dataclass
class LedgerAudit:
    """Result of :meth:`RewardLedger.audit`.

    Attributes:
        submitted: episodes ever submitted.
        consumed: episodes handed to the learner.
        dropped: episodes dropped under the missing policy, by reason in ``drop_reasons``.
        pending: episodes neither consumed nor dropped (after a drain: lost).
        double_counted: consumed more than once, or a layer settled more than once.
        incomplete: consumed episodes whose layers were not all settled ``ok`` exactly once.
        missing_layers: (episode, layer) rows recorded as missing.
        duplicate_results: late or repeated scorer results that were recognised and ignored.
    """

    submitted: int = 0
    consumed: int = 0
    dropped: int = 0
    pending: int = 0
    double_counted: int = 0
    incomplete: int = 0
    missing_layers: int = 0
    duplicate_results: int = 0
    drop_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing consumed was double-counted or incomplete (pending work is judged by the caller)."""
        return self.double_counted == 0 and self.incomplete == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


class RewardLedger:
    """SQLite-backed ledger. Thread-safe for use inside one process (one connection, one lock).

    Args:
        path: database file; ``":memory:"`` for a throwaway ledger.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute(
            "PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY"
        )
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._lock = threading.Lock()

    # --- writes -------------------------------------------------------------------------------------------
    def apply(self, batch_id: str, events: Iterable[dict[str, Any]]) -> bool:
        """Apply a batch of events atomically, once per ``batch_id``.

        Event kinds (``event["kind"]``) and their fields:

        * ``submitted``: episode_id, env_episode_id, layers (list), runner, policy_version, t
        * ``settled``: episode_id, layer, status ("ok" | "missing"), value_sum, value_last, scorer, version,
          latency_s, attempts, reason
        * ``duplicate``: episode_id, layer (a repeated result that was ignored)
        * ``consumed``: episode_id, policy_version, t
        * ``dropped``: episode_id, reason, t

        Returns:
            False if the batch had been applied before (nothing changed).
        """
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN")
            try:
                cur.execute("INSERT OR IGNORE INTO batches(batch_id) VALUES (?)", (batch_id,))
                if cur.rowcount == 0:
                    cur.execute("ROLLBACK")
                    return False
                for ev in events:
                    self._apply_one(cur, ev)
                cur.execute("COMMIT")
                return True
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def _apply_one(self, cur: sqlite3.Cursor, ev: dict[str, Any]) -> None:
        kind = ev["kind"]
        if kind == "submitted":
            cur.execute(
                "INSERT INTO episodes(episode_id, env_episode_id, layers, status, runner, policy_version_sampled,"
                " submitted_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT(episode_id) DO NOTHING",
                (
                    ev["episode_id"],
                    ev.get("env_episode_id"),
                    ",".join(ev["layers"]),
                    PENDING,
                    ev.get("runner"),
                    ev.get("policy_version"),
                    ev.get("t"),
                ),
            )
        elif kind == "settled":
            cur.execute(
                "INSERT INTO scores(episode_id, layer, status, value_sum, value_last, scorer, version, latency_s,"
                " attempts, reason) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(episode_id, layer) DO UPDATE SET"
                " settle_count = settle_count + 1",
                (
                    ev["episode_id"],
                    ev["layer"],
                    ev["status"],
                    ev.get("value_sum"),
                    ev.get("value_last"),
                    ev.get("scorer"),
                    ev.get("version"),
                    ev.get("latency_s"),
                    ev.get("attempts"),
                    ev.get("reason"),
                ),
            )
        elif kind == "duplicate":
            cur.execute(
                "UPDATE scores SET duplicate_results = duplicate_results + 1 WHERE episode_id=? AND layer=?",
                (ev["episode_id"], ev["layer"]),
            )
        elif kind == "consumed":
            cur.execute(
                "UPDATE episodes SET status=?, consume_count = consume_count + 1, policy_version_consumed=?,"
                " finished_at=? WHERE episode_id=?",
                (CONSUMED, ev.get("policy_version"), ev.get("t"), ev["episode_id"]),
            )
        elif kind == "dropped":
            cur.execute(
                "UPDATE episodes SET status=?, reason=?, finished_at=? WHERE episode_id=?",
                (DROPPED, ev.get("reason"), ev.get("t"), ev["episode_id"]),
            )
        else:
            raise ValueError(f"unknown ledger event kind {kind!r}")

    def put_json(self, key: str, value: Any) -> None:
        """Store a JSON value (e.g. the normaliser state) next to the rows, so it travels with the file."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, json.dumps(value)),
            )

    def get_json(self, key: str) -> Any:
        """A value stored with :meth:`put_json`, or ``None``."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    # --- reads --------------------------------------------------------------------------------------------
    def scores(self, episode_id: str) -> dict[str, dict[str, Any]]:
        """All layer rows of one episode, keyed by layer."""
        with self._lock:
            cur = self._conn.execute("SELECT * FROM scores WHERE episode_id=?", (episode_id,))
            cols = [c[0] for c in cur.description]
            return {row[1]: dict(zip(cols, row, strict=True)) for row in cur.fetchall()}

    def episode(self, episode_id: str) -> dict[str, Any] | None:
        """The episode row, or ``None``."""
        with self._lock:
            cur = self._conn.execute("SELECT * FROM episodes WHERE episode_id=?", (episode_id,))
            row = cur.fetchone()
            return dict(zip([c[0] for c in cur.description], row, strict=True)) if row else None

    def audit(self) -> LedgerAudit:
        """Check every consumed episode: all its layers settled ``ok`` exactly once, consumed exactly once."""
        q = self._conn.execute
        with self._lock:
            a = LedgerAudit()
            a.submitted = q("SELECT COUNT(*) FROM episodes").fetchone()[0]
            a.consumed = q("SELECT COUNT(*) FROM episodes WHERE status=?", (CONSUMED,)).fetchone()[0]
            a.dropped = q("SELECT COUNT(*) FROM episodes WHERE status=?", (DROPPED,)).fetchone()[0]
            a.pending = q("SELECT COUNT(*) FROM episodes WHERE status=?", (PENDING,)).fetchone()[0]
            a.double_counted = (
                q("SELECT COUNT(*) FROM episodes WHERE consume_count > 1").fetchone()[0]
                + q("SELECT COUNT(*) FROM scores WHERE settle_count > 1").fetchone()[0]
            )
            a.missing_layers = q("SELECT COUNT(*) FROM scores WHERE status=?", (MISSING,)).fetchone()[0]
            a.duplicate_results = q("SELECT COALESCE(SUM(duplicate_results), 0) FROM scores").fetchone()[0]
            a.drop_reasons = dict(
                q(
                    "SELECT reason, COUNT(*) FROM episodes WHERE status=? GROUP BY reason", (DROPPED,)
                ).fetchall()
            )
            incomplete = 0
            for eid, layers in q("SELECT episode_id, layers FROM episodes WHERE status=?", (CONSUMED,)):
                rows = dict(
                    (r[0], (r[1], r[2]))
                    for r in q("SELECT layer, status, settle_count FROM scores WHERE episode_id=?", (eid,))
                )
                need = [x for x in layers.split(",") if x]
                if any(rows.get(layer) != (OK, 1) for layer in need):
                    incomplete += 1
            a.incomplete = incomplete
            return a

    # --- persistence --------------------------------------------------------------------------------------
    def backup(self, dest: str | Path) -> Path:
        """Write a consistent copy of the database to ``dest`` (SQLite online backup)."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            dest.unlink()
        with self._lock:
            target = sqlite3.connect(str(dest))
            try:
                self._conn.backup(target)
            finally:
                target.close()
        return dest

    @classmethod
    def restore(cls, src: str | Path, path: str | Path) -> RewardLedger:
        """Copy a backed-up database at ``src`` to ``path`` and open it there."""
        source = sqlite3.connect(str(src))
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            target = sqlite3.connect(str(path))
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
        return cls(path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
