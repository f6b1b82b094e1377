"""Ledger idempotency and the audit."""

from __future__ import annotations

from agentic_ray.rewards.reward_ledger import RewardLedger

LAYERS = ["execution", "judge"]


def submitted(eid: str) -> dict:
    return {"kind": "submitted", "episode_id": eid, "layers": LAYERS, "policy_version": 1, "t": 0.0}


def settled(eid: str, layer: str, status: str = "ok") -> dict:
    return {
        "kind": "settled",
        "episode_id": eid,
        "layer": layer,
        "status": status,
        "value_sum": 1.5,
        "value_last": 0.5,
        "scorer": "S",
        "version": "v1",
        "latency_s": 0.8,
        "attempts": 2,
        "reason": "",
    }


def consumed(eid: str) -> dict:
    return {"kind": "consumed", "episode_id": eid, "policy_version": 3, "t": 1.0}


def test_batches_are_idempotent(tmp_path):
    led = RewardLedger(tmp_path / "l.sqlite")
    batch = [submitted("e1"), settled("e1", "execution"), settled("e1", "judge"), consumed("e1")]
    assert led.apply("b1", batch) is True
    assert led.apply("b1", batch) is False  # re-sent write: ignored
    a = led.audit()
    assert (a.submitted, a.consumed, a.double_counted, a.incomplete, a.pending) == (1, 1, 0, 0, 0)
    row = led.scores("e1")["judge"]
    assert (row["scorer"], row["version"], row["latency_s"], row["attempts"], row["settle_count"]) == (
        "S",
        "v1",
        0.8,
        2,
        1,
    )
    assert led.episode("e1")["policy_version_consumed"] == 3


def test_audit_detects_double_counting_incomplete_and_lost(tmp_path):
    led = RewardLedger(tmp_path / "l.sqlite")
    led.apply("b1", [submitted(e) for e in ("ok", "twice", "partial", "dup", "lost", "dropped")])
    led.apply("b2", [settled("ok", "execution"), settled("ok", "judge"), consumed("ok")])
    led.apply("b3", [settled("twice", "execution"), settled("twice", "judge"), consumed("twice")])
    led.apply("b4", [consumed("twice")])  # a second consumption of the same episode
    led.apply("b5", [settled("partial", "execution"), consumed("partial")])  # judge never settled
    led.apply(
        "b6", [settled("dup", "execution"), settled("dup", "judge"), settled("dup", "judge"), consumed("dup")]
    )
    led.apply(
        "b7",
        [
            settled("dropped", "judge", "missing"),
            {"kind": "dropped", "episode_id": "dropped", "reason": "judge:timeout", "t": 2.0},
        ],
    )
    led.apply("b8", [{"kind": "duplicate", "episode_id": "ok", "layer": "judge"}])
    a = led.audit()
    assert a.submitted == 6
    assert a.consumed == 4
    assert a.double_counted == 2  # "twice" consumed twice, "dup" judge settled twice
    assert a.incomplete == 2  # "partial" lacks judge, "dup" judge settled twice
    assert a.pending == 1  # "lost"
    assert a.dropped == 1 and a.drop_reasons == {"judge:timeout": 1}
    assert a.missing_layers == 1
    assert a.duplicate_results == 1
    assert not a.ok


def test_backup_restore_round_trip(tmp_path):
    led = RewardLedger(tmp_path / "a.sqlite")
    led.apply("b1", [submitted("e1"), settled("e1", "execution"), settled("e1", "judge"), consumed("e1")])
    led.put_json("normalizer_state", {"judge": {"count": 3, "mean": 0.5, "m2": 1.0}})
    dest = led.backup(tmp_path / "ckpt" / "ledger.sqlite")
    restored = RewardLedger.restore(dest, tmp_path / "b.sqlite")
    assert restored.audit().to_dict() == led.audit().to_dict()
    assert restored.get_json("normalizer_state") == {"judge": {"count": 3, "mean": 0.5, "m2": 1.0}}
    assert restored.apply("b1", []) is False  # applied batch ids travel with the file
