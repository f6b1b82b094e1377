"""Ledger idempotency and atomicity, and an audit that fails for each way a reward can go wrong."""

from __future__ import annotations

import pytest

from agentic_ray.rewards.ledger_audit import audit_ledger, restart_diff
from agentic_ray.rewards.reward_actors import NORMALIZER_KEY, LedgerActor
from agentic_ray.rewards.reward_ledger import RewardLedger

LAYERS = ["execution", "judge"]


def submitted(eid: str, runner: str = "w1-aaaa", env_id: str | None = None) -> dict:
    return {
        "kind": "submitted",
        "episode_id": eid,
        "env_episode_id": env_id or f"env-{eid}",
        "layers": LAYERS,
        "runner": runner,
        "policy_version": 1,
        "t": 0.0,
    }


def settled(eid: str, layer: str, status: str = "ok", source: str = "inline", checksum: str = "c") -> dict:
    return {
        "kind": "settled",
        "episode_id": eid,
        "layer": layer,
        "status": status,
        "value_sum": 1.5,
        "value_last": 0.5,
        "value_checksum": checksum,
        "source": source,
        "scorer": "S",
        "version": "v1",
        "latency_s": 0.8,
        "attempts": 2,
        "reason": "",
    }


def sealed(eid: str, checksum: str = "R") -> dict:
    return {
        "kind": "sealed",
        "episode_id": eid,
        "checksum": checksum,
        "reward_sum": 1.0,
        "num_steps": 5,
        "t": 1.0,
    }


def trained(eid: str, checksum: str = "R") -> dict:
    return {
        "kind": "trained",
        "episode_id": eid,
        "checksum": checksum,
        "num_steps": 5,
        "learner": "L",
        "t": 2.0,
    }


def scored(eid: str, layer: str, checksum: str = "c") -> dict:
    return {"kind": "scored", "episode_id": eid, "layer": layer, "value_checksum": checksum}


def complete(led: RewardLedger, eid: str, batch: str, **kw) -> None:
    """Submitted, both layers settled (judge by an actor that reported it), sealed."""
    led.apply(
        batch,
        [submitted(eid, **kw), settled(eid, "execution"), settled(eid, "judge", source="actor"), sealed(eid)],
    )
    led.apply(f"{batch}-scorer", [scored(eid, "judge")])


def test_batches_are_idempotent(tmp_path):
    led = RewardLedger(tmp_path / "l.sqlite")
    complete(led, "e1", "b1")
    assert led.apply("b1", [submitted("e1")]) is False  # re-sent write: ignored
    assert led.apply("t1", [trained("e1")]) is True
    assert led.apply("t1", [trained("e1")]) is False  # a retried learner write counts once
    a = audit_ledger(led)
    assert (a.submitted, a.settled, a.sealed, a.trained) == (1, 1, 1, 1)
    assert a.ok, a.problems()
    row = led.scores("e1")["judge"]
    assert (row["scorer"], row["version"], row["latency_s"], row["attempts"], row["settle_count"]) == (
        "S",
        "v1",
        0.8,
        2,
        1,
    )


def test_a_clean_ledger_passes(tmp_path):
    led = RewardLedger(tmp_path / "l.sqlite")
    for i in range(3):
        complete(led, f"e{i}", f"b{i}")
    led.apply("t", [trained(f"e{i}") for i in range(3)])
    a = audit_ledger(led)
    assert a.ok and a.lost == a.double_counted == a.imputed == a.value_mismatches == a.pending == 0


@pytest.mark.parametrize(
    ("fault", "field", "reason"),
    [
        ("drop", "lost", "delivered_not_trained"),
        ("duplicate", "double_counted", None),
        ("alter", "value_mismatches", None),
        ("impute", "imputed", "layer_not_scored:judge"),
        ("invent", "imputed", "no_scorer_result:judge"),
        ("unsealed", "imputed", "unsealed"),
        ("unknown", "imputed", "unknown_episode"),
        ("stuck", "pending", None),
    ],
)
def test_one_bad_reward_fails_the_audit(tmp_path, fault, field, reason):
    led = RewardLedger(tmp_path / "l.sqlite")
    for i in range(4):
        complete(led, f"e{i}", f"b{i}")
    train = ["e0", "e1", "e2", "e3"]
    if fault == "drop":
        train.remove("e2")
    elif fault == "duplicate":
        train.append("e2")
    elif fault == "impute":  # the client made up the judge layer of a new episode
        led.apply("bx", [submitted("x"), settled("x", "execution"), sealed("x")])
        train.append("x")
    elif fault == "invent":  # the client settled a judge value that no scorer actor produced
        led.apply(
            "bx",
            [
                submitted("x"),
                settled("x", "execution"),
                settled("x", "judge", source="actor", checksum="z"),
                sealed("x"),
            ],
        )
        led.apply("bx-scorer", [scored("x", "judge", checksum="c")])
        train.append("x")
    elif fault == "unsealed":
        led.apply("bx", [submitted("x"), settled("x", "execution"), settled("x", "judge")])
        train.append("x")
    elif fault == "unknown":
        train.append("never-submitted")
    elif fault == "stuck":
        led.apply("bx", [submitted("x"), settled("x", "execution")])
    events = [trained(e, "WRONG" if (fault == "alter" and e == "e1") else "R") for e in train]
    led.apply("t", events[:2])
    led.apply("t2", events[2:])
    a = audit_ledger(led)
    assert not a.ok
    assert getattr(a, field) == 1, a.to_dict()
    for other in ("lost", "double_counted", "imputed", "value_mismatches", "pending"):
        if other != field:
            assert getattr(a, other) == 0, (other, a.to_dict())
    if reason is not None:
        assert reason in {**a.lost_reasons, **a.imputed_reasons}
    assert any(line.startswith(field) for line in a.problems())


def test_dropped_pending_at_shutdown_and_dead_runners_are_accounted(tmp_path):
    led = RewardLedger(tmp_path / "l.sqlite")
    led.apply(
        "b1",
        [
            submitted("miss"),
            settled("miss", "execution"),
            settled("miss", "judge", status="missing"),
            {"kind": "dropped", "episode_id": "miss", "reason": "judge:timeout", "t": 1.0},
            submitted("late"),
            {"kind": "pending_at_shutdown", "episode_id": "late"},
        ],
    )
    # Runner w2 had one episode pending and one sealed when it died; its restart is w2-bbbb.
    complete(led, "sent", "b2", runner="w2-aaaa")
    led.apply("b3", [submitted("waiting", runner="w2-aaaa")])
    led.apply("live", [{"kind": "runner_alive", "prefix": "w2-", "alive": "w2-bbbb"}])
    led.apply("b4", [submitted("after", runner="w2-aaaa")])  # a write of the dead incarnation arriving late
    led.apply("b5", [submitted("new", runner="w2-bbbb")])
    a = audit_ledger(led)
    assert a.drop_reasons == {"judge:timeout": 1, "env_runner_died": 2}
    assert a.lost_reasons == {"env_runner_died_in_transit": 1}
    assert a.pending_at_shutdown == 1 and a.missing_layers == 1
    assert a.pending == 1 and a.examples["pending"] == ["new"]  # the live incarnation's work is untouched


def test_abandon_pending_drops_only_what_still_waits_with_its_reason(tmp_path):
    """A run resumed from a checkpoint that did not settle its pending episodes drops exactly those."""
    led = RewardLedger(tmp_path / "l.sqlite")
    complete(led, "done", "b1")
    led.apply("t1", [trained("done")])
    led.apply("b2", [submitted("wait1"), submitted("wait2"), settled("wait2", "execution")])
    assert audit_ledger(led).pending == 2
    led.apply("restore", [{"kind": "abandon_pending", "reason": "pending_at_restored_checkpoint"}])
    a = audit_ledger(led)
    assert a.pending == 0 and a.ok, a.problems()
    assert a.drop_reasons == {"pending_at_restored_checkpoint": 2}
    assert a.sealed == a.trained == 1 and a.lost == 0


def test_events_and_normaliser_state_commit_together(tmp_path):
    actor = LedgerActor(str(tmp_path / "l.sqlite"), {"execution": "scale"}, clip=5.0)
    state = actor.apply("b1", [submitted("e1")], {"execution": (4, 1.0, 2.0)})
    assert state["execution"]["count"] == 4
    assert actor.apply("b1", [submitted("e1")], {"execution": (4, 1.0, 2.0)})["execution"]["count"] == 4
    with pytest.raises(ValueError, match="unknown ledger event"):
        actor.apply("b2", [submitted("e2"), {"kind": "bogus"}], {"execution": (10, 3.0, 1.0)})
    # Nothing of the failed batch landed: neither its events nor its statistics, in memory or on disk.
    assert actor.normalizer.stats["execution"].count == 4
    assert actor.ledger.get_json(NORMALIZER_KEY)["execution"]["count"] == 4
    assert actor.ledger.episode("e2") is None
    reopened = LedgerActor(str(tmp_path / "l.sqlite"), {"execution": "scale"}, clip=5.0)  # after a restart
    assert reopened.normalizer.get_state() == actor.normalizer.get_state()
    assert reopened.apply("b2", [submitted("e2")], {"execution": (10, 3.0, 1.0)})["execution"]["count"] == 14


def test_restart_diff_names_every_difference(tmp_path):
    a, b = RewardLedger(tmp_path / "a.sqlite"), RewardLedger(tmp_path / "b.sqlite")
    for led in (a, b):
        for i in range(3):
            complete(
                led, f"{led.path[-8]}-e{i}", f"b{i}", env_id=f"env{i}"
            )  # ledger ids differ, env ids match
    a.apply("t", [trained(f"a-e{i}") for i in range(3)])
    b.apply("t", [trained(f"b-e{i}") for i in range(3)])
    d = restart_diff(a, b)
    assert d.equal and d.same == 3
    complete(b, "b-e3", "b3", env_id="env3")
    b.apply("t2", [trained("b-e3"), trained("b-e0")])  # one extra episode, one trained twice
    complete(a, "a-e4", "b4", env_id="env4")
    a.apply("t2", [trained("a-e4")])
    complete(b, "b-e4", "b4", env_id="env4")
    b.apply("t3", [trained("b-e4", "OTHER")])
    d = restart_diff(a, b)
    assert not d.equal
    assert (
        d.only_b == ["env3"]
        and d.only_a == []
        and d.count_differs == ["env0"]
        and d.reward_differs == ["env4"]
    )
    assert d.named() == [
        "trained only in B: env3",
        "reward differs: env4",
        "trained a different number of times: env0",
    ]
