"""The reward ledger: what was scored, what the runner sealed, and what the learner trained on, in one SQLite file.

Three independent writers fill it, so that :mod:`agentic_ray.rewards.ledger_audit` can join them and fail:

* **scorer actors** write ``scored`` rows: the checksum of every value they produced for (episode, layer);
* **EnvRunners** (through their reward client) write ``submitted``, ``settled`` (per layer: raw value, checksum,
  scorer, version, latency, attempts), ``sealed`` (the reward vector the learner will train on: normalised,
  weighted reward and risk streams, as a checksum and sums) and ``dropped`` (with a reason);
* the **learner** (a learner connector, :class:`~agentic_ray.rollout.trained_reward_recorder.TrainedRewardRecorder`)
  writes one ``trained`` row per episode that reached its train batch, with the checksum of the rewards it got.

Writes arrive as batches of events with a batch id; a batch id that was already applied is ignored, so a retried
write (Ray re-ran the call after the ledger actor restarted) cannot count anything twice. A batch and the key-value
writes that go with it (the merged normaliser state) commit in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
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
    submitted_at REAL,
    finished_at REAL,
    seal_checksum TEXT,
    reward_sum REAL,
    risk_sum REAL,
    num_steps INTEGER,
    policy_version_sealed INTEGER,
    pending_at_shutdown INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS episodes_runner ON episodes(runner);
CREATE TABLE IF NOT EXISTS scores (
    episode_id TEXT NOT NULL,
    layer TEXT NOT NULL,
    status TEXT NOT NULL,
    value_sum REAL,
    value_last REAL,
    value_checksum TEXT,
    source TEXT,
    scorer TEXT,
    version TEXT,
    latency_s REAL,
    attempts INTEGER,
    reason TEXT,
    settle_count INTEGER NOT NULL DEFAULT 1,
    duplicate_results INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (episode_id, layer)
);
CREATE TABLE IF NOT EXISTS scored (
    episode_id TEXT NOT NULL,
    layer TEXT NOT NULL,
    value_checksum TEXT NOT NULL,
    scorer TEXT,
    version TEXT,
    results INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (episode_id, layer, value_checksum)
);
CREATE TABLE IF NOT EXISTS trained (
    episode_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    checksum TEXT,
    reward_sum REAL,
    risk_sum REAL,
    num_steps INTEGER,
    learner TEXT,
    t REAL
);
CREATE INDEX IF NOT EXISTS trained_episode ON trained(episode_id);
CREATE TABLE IF NOT EXISTS dead_runners (runner TEXT PRIMARY KEY, reason TEXT);
CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# Episode statuses.
PENDING = "pending"
SEALED = "sealed"
DROPPED = "dropped"
# Score statuses.
OK = "ok"
MISSING = "missing"
# Where a settled layer value came from: a scorer actor (which also writes a ``scored`` row) or the runner itself.
SOURCE_ACTOR = "actor"
SOURCE_INLINE = "inline"
# Reasons the ledger writes itself when it learns that an EnvRunner incarnation died.
REASON_RUNNER_DIED = "env_runner_died"
REASON_RUNNER_DIED_IN_TRANSIT = "env_runner_died_in_transit"
# A run resumed from a checkpoint taken while these episodes still waited for scorers: the sampling that would have
# settled and trained them happened after the checkpoint, in a timeline the resumed run does not continue.
REASON_PENDING_AT_RESTORED_CHECKPOINT = "pending_at_restored_checkpoint"


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
    def apply(
        self, batch_id: str, events: Iterable[dict[str, Any]], kv: dict[str, Any] | None = None
    ) -> bool:
        """Apply a batch of events, and the ``kv`` writes that go with it, in one transaction, once per batch id.

        Event kinds (``event["kind"]``) and their fields:

        * ``submitted``: episode_id, env_episode_id, layers (list), runner, policy_version, t
        * ``settled``: episode_id, layer, status ("ok" | "missing"), value_sum, value_last, value_checksum,
          source ("actor" | "inline"), scorer, version, latency_s, attempts, reason
        * ``duplicate``: episode_id, layer (a repeated result that was ignored)
        * ``sealed``: episode_id, checksum, reward_sum, risk_sum, num_steps, policy_version, t
        * ``dropped``: episode_id, reason, t
        * ``pending_at_shutdown``: episode_id (its runner stopped while it still waited for a scorer)
        * ``scored``: episode_id, layer, value_checksum, scorer, version (written by scorer actors)
        * ``trained``: episode_id, checksum, reward_sum, risk_sum, num_steps, learner, t (written by the learner)
        * ``abandon_pending``: reason: every episode still pending is dropped with that reason (a run resumed
          from a checkpoint that did not settle them)
        * ``runner_alive``: prefix, alive (runner id or None): every other runner id with that prefix is dead;
          its pending episodes are dropped (``env_runner_died``) and its sealed, untrained ones are marked
          ``env_runner_died_in_transit``

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
                    self._apply_one(cur, batch_id, ev)
                for key, value in (kv or {}).items():
                    self._put(cur, key, value)
                cur.execute("COMMIT")
                return True
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def _apply_one(self, cur: sqlite3.Cursor, batch_id: str, ev: dict[str, Any]) -> None:
        kind = ev["kind"]
        if kind == "submitted":
            dead = cur.execute(
                "SELECT reason FROM dead_runners WHERE runner=?", (ev.get("runner"),)
            ).fetchone()
            cur.execute(
                "INSERT INTO episodes(episode_id, env_episode_id, layers, status, reason, runner,"
                " policy_version_sampled, submitted_at) VALUES (?,?,?,?,?,?,?,?)"
                " ON CONFLICT(episode_id) DO NOTHING",
                (
                    ev["episode_id"],
                    ev.get("env_episode_id"),
                    ",".join(ev["layers"]),
                    DROPPED if dead else PENDING,
                    REASON_RUNNER_DIED if dead else None,
                    ev.get("runner"),
                    ev.get("policy_version"),
                    ev.get("t"),
                ),
            )
        elif kind == "settled":
            cur.execute(
                "INSERT INTO scores(episode_id, layer, status, value_sum, value_last, value_checksum, source,"
                " scorer, version, latency_s, attempts, reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT(episode_id, layer) DO UPDATE SET settle_count = settle_count + 1",
                (
                    ev["episode_id"],
                    ev["layer"],
                    ev["status"],
                    ev.get("value_sum"),
                    ev.get("value_last"),
                    ev.get("value_checksum"),
                    ev.get("source"),
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
        elif kind == "sealed":
            cur.execute(
                "UPDATE episodes SET status=?, seal_checksum=?, reward_sum=?, risk_sum=?, num_steps=?,"
                " policy_version_sealed=?, finished_at=? WHERE episode_id=? AND status=?",
                (
                    SEALED,
                    ev["checksum"],
                    ev.get("reward_sum"),
                    ev.get("risk_sum"),
                    ev.get("num_steps"),
                    ev.get("policy_version"),
                    ev.get("t"),
                    ev["episode_id"],
                    PENDING,
                ),
            )
        elif kind == "dropped":
            cur.execute(
                "UPDATE episodes SET status=?, reason=?, finished_at=? WHERE episode_id=? AND status=?",
                (DROPPED, ev.get("reason"), ev.get("t"), ev["episode_id"], PENDING),
            )
        elif kind == "pending_at_shutdown":
            cur.execute(
                "UPDATE episodes SET pending_at_shutdown=1 WHERE episode_id=? AND status=?",
                (ev["episode_id"], PENDING),
            )
        elif kind == "scored":
            cur.execute(
                "INSERT INTO scored(episode_id, layer, value_checksum, scorer, version) VALUES (?,?,?,?,?)"
                " ON CONFLICT(episode_id, layer, value_checksum) DO UPDATE SET results = results + 1",
                (ev["episode_id"], ev["layer"], ev["value_checksum"], ev.get("scorer"), ev.get("version")),
            )
        elif kind == "trained":
            cur.execute(
                "INSERT INTO trained(episode_id, batch_id, checksum, reward_sum, risk_sum, num_steps, learner, t)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (
                    ev["episode_id"],
                    batch_id,
                    ev.get("checksum"),
                    ev.get("reward_sum"),
                    ev.get("risk_sum"),
                    ev.get("num_steps"),
                    ev.get("learner"),
                    ev.get("t"),
                ),
            )
        elif kind == "abandon_pending":
            cur.execute(
                "UPDATE episodes SET status=?, reason=?, finished_at=? WHERE status=?",
                (DROPPED, ev["reason"], ev.get("t"), PENDING),
            )
        elif kind == "runner_alive":
            self._runner_alive(cur, ev["prefix"], ev.get("alive"))
        else:
            raise ValueError(f"unknown ledger event kind {kind!r}")

    @staticmethod
    def _runner_alive(cur: sqlite3.Cursor, prefix: str, alive: str | None) -> None:
        pattern = prefix.replace("%", r"\%").replace("_", r"\_") + "%"
        dead = [
            r[0]
            for r in cur.execute(
                "SELECT DISTINCT runner FROM episodes WHERE runner LIKE ? ESCAPE '\\' AND runner IS NOT ?",
                (pattern, alive),
            )
        ]
        for runner in dead:
            cur.execute(
                "INSERT OR IGNORE INTO dead_runners(runner, reason) VALUES (?, ?)",
                (runner, REASON_RUNNER_DIED),
            )
            cur.execute(
                "UPDATE episodes SET status=?, reason=? WHERE runner=? AND status=?",
                (DROPPED, REASON_RUNNER_DIED, runner, PENDING),
            )
            cur.execute(
                "UPDATE episodes SET reason=? WHERE runner=? AND status=? AND reason IS NULL AND episode_id NOT IN"
                " (SELECT episode_id FROM trained)",
                (REASON_RUNNER_DIED_IN_TRANSIT, runner, SEALED),
            )

    @staticmethod
    def _put(cur: sqlite3.Cursor, key: str, value: Any) -> None:
        cur.execute(
            "INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, json.dumps(value)),
        )

    def put_json(self, key: str, value: Any) -> None:
        """Store a JSON value (e.g. the normaliser state) next to the rows, so it travels with the file."""
        with self._lock:
            self._put(self._conn.cursor(), key, value)

    def get_json(self, key: str) -> Any:
        """A value stored with :meth:`put_json` or :meth:`apply`, or ``None``."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    # --- reads --------------------------------------------------------------------------------------------
    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only query under the ledger's lock (the audit's joins)."""
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

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
