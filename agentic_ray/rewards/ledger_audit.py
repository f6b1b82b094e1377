"""The audit: join what the learner trained on against what the scorers produced and the runners sealed.

The three sides are written by different processes (see :mod:`agentic_ray.rewards.reward_ledger`), so a reward
that is dropped, duplicated or altered anywhere between a scorer and the learner's train batch shows up here:

* **lost**: every layer was scored (or the runner sealed the reward vector) but the learner never trained on the
  episode and nothing recorded it as dropped; with a reason (``delivered_not_trained``: sealed, never reached a
  train batch; ``env_runner_died_in_transit``: sealed by a runner that then died with the sample in flight;
  ``settled_not_sealed``: scored, never handed on);
* **double_counted**: the learner trained on the episode more than once (or one of its layers was settled twice);
* **imputed**: the learner trained on an episode whose reward is not backed by scorer results (unknown episode,
  never sealed, a layer not settled ``ok``, or a layer value that no scorer actor produced);
* **value_mismatches**: the learner's checksum of the rewards it received differs from the runner's seal;
* **pending**: submitted, still waiting for a scorer, nothing recorded (a final audit must have none);
* **pending_at_shutdown**: still waiting for a scorer when its runner stopped (recorded by the runner);
* **dropped**: dropped under the missing policy or because its runner died, by reason.

:func:`restart_diff` compares the (episode, reward) pairs two runs trained on, e.g. a run killed and resumed
against an uninterrupted one with the same seed, and names every difference.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from agentic_ray.rewards.reward_ledger import (
    DROPPED,
    OK,
    PENDING,
    SEALED,
    SOURCE_ACTOR,
    RewardLedger,
)


@dataclass
class LedgerAudit:
    """Result of :func:`audit_ledger` (counts are episodes unless named otherwise)."""

    submitted: int = 0
    settled: int = 0
    sealed: int = 0
    trained: int = 0
    dropped: int = 0
    lost: int = 0
    double_counted: int = 0
    imputed: int = 0
    value_mismatches: int = 0
    pending: int = 0
    pending_at_shutdown: int = 0
    missing_layers: int = 0
    duplicate_results: int = 0
    drop_reasons: dict[str, int] = field(default_factory=dict)
    lost_reasons: dict[str, int] = field(default_factory=dict)
    imputed_reasons: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Nothing lost, double-counted, imputed or altered, and nothing unaccounted for still pending."""
        return (
            self.lost == 0
            and self.double_counted == 0
            and self.imputed == 0
            and self.value_mismatches == 0
            and self.pending == 0
        )

    def problems(self) -> list[str]:
        """One line per failed check (empty when :attr:`ok`)."""
        out = []
        for name in ("lost", "double_counted", "imputed", "value_mismatches", "pending"):
            n = getattr(self, name)
            if n:
                why = getattr(self, f"{name}_reasons", None) or {}
                ex = self.examples.get(name, [])[:3]
                out.append(f"{name}: {n} {dict(why) if why else ''} e.g. {ex}".replace("  ", " "))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _count(ledger: RewardLedger, sql: str, params: tuple[Any, ...] = ()) -> int:
    return int(ledger.query(sql, params)[0][0] or 0)


def audit_ledger(ledger: RewardLedger, max_examples: int = 5) -> LedgerAudit:
    """Join the trained records against the scorer results and the runner's seals; see the module docstring."""
    a = LedgerAudit()
    a.submitted = _count(ledger, "SELECT COUNT(*) FROM episodes")
    a.sealed = _count(ledger, "SELECT COUNT(*) FROM episodes WHERE seal_checksum IS NOT NULL")
    a.trained = _count(ledger, "SELECT COUNT(DISTINCT episode_id) FROM trained")
    a.missing_layers = _count(ledger, "SELECT COUNT(*) FROM scores WHERE status != ?", (OK,))
    a.duplicate_results = _count(ledger, "SELECT COALESCE(SUM(duplicate_results), 0) FROM scores")

    # Per episode: the layers it needs, which of them settled ok, and which settled more than once.
    ok_layers: dict[str, set[str]] = {}
    for eid, layer in ledger.query("SELECT episode_id, layer FROM scores WHERE status=?", (OK,)):
        ok_layers.setdefault(eid, set()).add(layer)
    settled_twice = {r[0] for r in ledger.query("SELECT episode_id FROM scores WHERE settle_count > 1")}
    episodes = {
        r[0]: {
            "layers": [x for x in r[1].split(",") if x],
            "status": r[2],
            "reason": r[3],
            "seal": r[4],
            "ps": r[5],
        }
        for r in ledger.query(
            "SELECT episode_id, layers, status, reason, seal_checksum, pending_at_shutdown FROM episodes"
        )
    }
    trained: dict[str, list[str | None]] = {}
    for eid, checksum in ledger.query("SELECT episode_id, checksum FROM trained"):
        trained.setdefault(eid, []).append(checksum)
    # Actor-scored layer values that no scorer actor reported producing.
    unbacked: dict[str, list[str]] = {}
    for eid, layer in ledger.query(
        "SELECT s.episode_id, s.layer FROM scores s WHERE s.status=? AND s.source=? AND NOT EXISTS"
        " (SELECT 1 FROM scored c WHERE c.episode_id=s.episode_id AND c.layer=s.layer"
        " AND c.value_checksum=s.value_checksum)",
        (OK, SOURCE_ACTOR),
    ):
        unbacked.setdefault(eid, []).append(layer)

    drop: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    imputed: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}

    def note(kind: str, eid: str) -> None:
        ex = examples.setdefault(kind, [])
        if len(ex) < max_examples:
            ex.append(eid)

    for eid, ep in episodes.items():
        complete = all(layer in ok_layers.get(eid, ()) for layer in ep["layers"])
        a.settled += complete
        if eid in trained:
            continue
        if ep["status"] == DROPPED:
            drop[ep["reason"] or "unknown"] += 1
        elif ep["status"] == SEALED:
            lost[ep["reason"] or "delivered_not_trained"] += 1
            note("lost", eid)
        elif ep["status"] == PENDING and complete:
            lost["settled_not_sealed"] += 1
            note("lost", eid)
        elif ep["ps"]:
            a.pending_at_shutdown += 1
        else:
            a.pending += 1
            note("pending", eid)

    for eid, checksums in trained.items():
        if len(checksums) > 1 or eid in settled_twice:
            a.double_counted += 1
            note("double_counted", eid)
        row = episodes.get(eid)
        why: list[str] = []
        if row is None:
            why.append("unknown_episode")
        else:
            if row["seal"] is None:
                why.append("unsealed")
            why += [f"layer_not_scored:{x}" for x in row["layers"] if x not in ok_layers.get(eid, ())]
            why += [f"no_scorer_result:{x}" for x in unbacked.get(eid, [])]
            if row["seal"] is not None and any(c != row["seal"] for c in checksums):
                a.value_mismatches += 1
                note("value_mismatches", eid)
        if why:
            a.imputed += 1
            imputed.update(why)
            note("imputed", eid)

    a.dropped = sum(drop.values())
    a.lost = sum(lost.values())
    a.drop_reasons, a.lost_reasons, a.imputed_reasons = dict(drop), dict(lost), dict(imputed)
    a.examples = examples
    return a


@dataclass
class RestartDiff:
    """How the (episode, reward) pairs two runs trained on differ. Episodes are keyed by the env's episode id.

    Attributes:
        same: pairs both runs trained on equally often.
        only_a / only_b: env episode ids trained in one run only.
        reward_differs: env episode ids trained in both runs with different reward checksums.
        count_differs: env episode ids trained in both runs with the same reward, a different number of times.
    """

    same: int = 0
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    reward_differs: list[str] = field(default_factory=list)
    count_differs: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not (self.only_a or self.only_b or self.reward_differs or self.count_differs)

    def named(self) -> list[str]:
        """One line per difference."""
        return (
            [f"trained only in A: {e}" for e in self.only_a]
            + [f"trained only in B: {e}" for e in self.only_b]
            + [f"reward differs: {e}" for e in self.reward_differs]
            + [f"trained a different number of times: {e}" for e in self.count_differs]
        )


def trained_pairs(ledger: RewardLedger) -> Counter[tuple[str, str]]:
    """``(env episode id, reward checksum)`` → times trained (the env id falls back to the ledger id)."""
    rows = ledger.query(
        "SELECT COALESCE(e.env_episode_id, t.episode_id), COALESCE(t.checksum, '') FROM trained t"
        " LEFT JOIN episodes e ON e.episode_id = t.episode_id"
    )
    return Counter((str(k), str(c)) for k, c in rows)


def restart_diff(a: RewardLedger, b: RewardLedger) -> RestartDiff:
    """Compare the trained (episode, reward) pairs of two ledgers; see :class:`RestartDiff`."""
    pa, pb = trained_pairs(a), trained_pairs(b)
    by_a: dict[str, Counter[str]] = {}
    by_b: dict[str, Counter[str]] = {}
    for (e, c), n in pa.items():
        by_a.setdefault(e, Counter())[c] += n
    for (e, c), n in pb.items():
        by_b.setdefault(e, Counter())[c] += n
    d = RestartDiff()
    for e in sorted(set(by_a) | set(by_b)):
        ca, cb = by_a.get(e), by_b.get(e)
        if cb is None:
            d.only_a.append(e)
        elif ca is None:
            d.only_b.append(e)
        elif set(ca) != set(cb):
            d.reward_differs.append(e)
        elif ca != cb:
            d.count_differs.append(e)
        else:
            d.same += sum(ca.values())
    return d
