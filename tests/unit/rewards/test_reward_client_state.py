"""The reward client's state machine with an injected clock and no Ray: settle once, missing policy, normaliser."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.rewards.layer_group_scorer import make_layers
from agentic_ray.rewards.layers import CostClass
from agentic_ray.rewards.normalization import RunningMeanStd
from agentic_ray.rewards.reward_client_state import RewardClientState
from agentic_ray.rewards.reward_pool_config import LayerConfig, RewardPoolConfig
from agentic_ray.rewards.score_messages import (
    STATUS_DEADLINE,
    STATUS_OK,
    STATUS_TIMEOUT,
    ScoreResult,
    values_checksum,
)

from .records import five_step_record


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_state(**cfg_kw) -> tuple[RewardClientState, FakeClock]:
    cfg = RewardPoolConfig(
        layers={"execution": LayerConfig(), "judge": LayerConfig(), "long_term_value": LayerConfig()},
        **cfg_kw,
    )
    clock = FakeClock()
    return RewardClientState(
        cfg, make_layers(cfg, "http://unused", [CostClass.SYNC]), "w1-test", clock
    ), clock


def ok(eid: str, layer: str, value: float = 1.0, attempt: int = 1) -> ScoreResult:
    v = np.zeros(5, dtype=np.float32)
    v[-1] = value
    return ScoreResult(eid, layer, STATUS_OK, v, "S", "1", 0.8, attempt)


def failed(eid: str, layer: str, status: str = STATUS_TIMEOUT, attempt: int = 3) -> ScoreResult:
    return ScoreResult(eid, layer, status, None, "S", "1", 5.0, attempt, "slow")


def events_of(state: RewardClientState, kind: str) -> list[dict]:
    events, _ = state.take_flush("f")
    return [e for e in events if e["kind"] == kind]


def test_submit_scores_cheap_layers_inline_and_queues_slow_ones_by_group():
    state, _ = make_state()
    p = state.submit("e1", five_step_record(), payload="EP", policy_version=3)
    assert set(p.results) == {"execution"} and p.sources["execution"] == "inline"
    reqs = state.take_requests()
    assert {g: [(r.episode_id, r.layer, r.attempt) for r in rs] for g, rs in reqs.items()} == {
        "io": [("e1", "judge", 1)],
        "cpu": [("e1", "long_term_value", 1)],
    }
    assert state.take_requests() == {}  # taken once
    assert all(not st.args for r in reqs["io"] for st in r.record.steps)  # step args are not shipped
    with pytest.raises(ValueError, match="submitted twice"):
        state.submit("e1", five_step_record())


def test_layers_settle_exactly_once_and_only_complete_episodes_are_returned():
    state, _ = make_state()
    state.submit("e1", five_step_record())
    state.take_requests()
    state.on_result(ok("e1", "judge"))
    assert state.collect_settled() == []  # long_term_value still in flight
    state.on_result(ok("e1", "judge", value=9.0))  # a second copy (e.g. a call Ray re-ran) is a duplicate
    state.on_result(ok("e1", "long_term_value"))
    [p] = state.collect_settled()
    assert p.results["judge"].values[-1] == 1.0 and p.payload is None
    assert state.counters["duplicates"] == 1 and state.num_pending == 0
    state.on_result(ok("e1", "judge"))  # after settlement: a late result
    assert state.counters["late_results"] == 1
    settled = events_of(state, "settled")
    assert sorted(e["layer"] for e in settled) == ["execution", "judge", "long_term_value"]
    judge = next(e for e in settled if e["layer"] == "judge")
    assert judge["value_checksum"] == values_checksum(ok("e1", "judge").values) and judge["source"] == "actor"


def test_drop_policy_drops_with_a_reason_and_keeps_values_out_of_the_normaliser():
    state, _ = make_state(missing_policy="drop")
    state.submit("e1", five_step_record())
    state.submit("e2", five_step_record(episode_id="ep-2"))
    state.take_requests()
    for layer in ("judge", "long_term_value"):
        state.on_result(ok("e2", layer, value=2.0))
    state.on_result(ok("e1", "long_term_value", value=50.0))
    state.on_result(failed("e1", "judge"))
    dropped = state.resolve_missing()
    assert [p.episode_id for p in dropped] == ["e1"] and dropped[0].drop_reason == "judge:timeout"
    settled = state.collect_settled()
    assert [p.episode_id for p in settled] == ["e2"]
    # Only e2's values reached the statistics: e1's long_term_value of 50 is not in the mean.
    assert state.normalizer.stats["long_term_value"].count == 1
    assert state.normalizer.stats["long_term_value"].mean == pytest.approx(2.0)
    events, deltas = state.take_flush("f1")
    assert deltas["long_term_value"] == (1, 2.0, 0.0)
    assert {e["kind"] for e in events} >= {"submitted", "settled", "dropped"}
    missing = [e for e in events if e["kind"] == "settled" and e["status"] == "missing"]
    assert [(e["episode_id"], e["layer"], e["attempts"]) for e in missing] == [("e1", "judge", 3)]
    assert next(e for e in events if e["kind"] == "dropped")["reason"] == "judge:timeout"


def test_hold_policy_asks_again_after_the_hold_and_drops_when_rounds_are_exhausted():
    state, clock = make_state(missing_policy="hold", hold_retry_s=5.0, max_hold_rounds=2)
    state.submit("e1", five_step_record())
    state.take_requests()
    state.on_result(ok("e1", "long_term_value"))
    state.on_result(failed("e1", "judge", attempt=3))
    assert state.resolve_missing() == [] and state.counters["held"] == 1
    assert state.take_requests() == {}  # still holding
    clock.t += 5.0
    assert state.resolve_missing() == []
    [req] = state.take_requests()["io"]
    assert (req.layer, req.attempt) == ("judge", 4)  # attempts continue across hold rounds
    state.on_result(failed("e1", "judge", attempt=6))
    assert state.resolve_missing() == []  # the hold starts again from this failure
    clock.t += 4.9
    assert state.resolve_missing() == [] and state.take_requests() == {}
    clock.t += 0.1
    state.resolve_missing()
    assert [r.attempt for r in state.take_requests()["io"]] == [7]
    state.on_result(failed("e1", "judge", attempt=9))
    [p] = state.resolve_missing()
    assert p.drop_reason == "judge:timeout:hold_exhausted" and state.num_pending == 0


def test_a_held_episode_that_settles_later_is_returned_once():
    state, _ = make_state(missing_policy="hold", hold_retry_s=1.0)
    state.submit("e1", five_step_record())
    io = state.take_requests()["io"]
    state.on_result(ok("e1", "long_term_value"))
    state.on_call_lost(
        io, STATUS_DEADLINE, "call deadline passed; cancelled"
    )  # the client cancelled the call
    assert state.reasons["missing:judge:deadline"] == 1 and state.num_pending == 1
    state.resolve_missing(force_hold_retry=True)  # drain: ask again at once
    state.take_requests()
    state.on_result(ok("e1", "judge", attempt=2))
    [p] = state.collect_settled()
    assert p.attempts["judge"] == 2 and not p.missing


def test_seal_records_the_checksum_of_exactly_the_trained_streams():
    state, _ = make_state()
    p = state.submit("e1", five_step_record())
    reward = np.array([0.1, 0.2, 0.0, 0.3, -0.5], dtype=np.float32)
    risk = np.array([0, -1, 0, 0, 0], dtype=np.float32)
    checksum = state.seal(p, reward, risk)
    [e] = events_of(state, "sealed")
    assert e["checksum"] == checksum == values_checksum(reward, risk)
    assert e["num_steps"] == 5 and e["reward_sum"] == pytest.approx(0.1)
    assert checksum != values_checksum(reward + np.float32(1e-6), risk)  # one ulp-scale change shows
    assert checksum != values_checksum(risk, reward)


def test_pending_at_shutdown_is_recorded_for_what_still_waits():
    state, _ = make_state()
    state.submit("e1", five_step_record())
    state.submit("e2", five_step_record(episode_id="ep-2"))
    assert state.mark_pending_at_shutdown() == 2
    assert [e["episode_id"] for e in events_of(state, "pending_at_shutdown")] == ["e1", "e2"]


def test_abandon_all_drops_what_waits_with_the_reason_and_late_results_stay_out():
    state, _ = make_state()
    state.submit("e1", five_step_record())
    state.submit("e2", five_step_record(episode_id="ep-2"))
    assert state.abandon_all("pending_at_restored_checkpoint") == 2
    assert state.num_pending == 0
    assert [(e["episode_id"], e["reason"]) for e in events_of(state, "dropped")] == [
        ("e1", "pending_at_restored_checkpoint"),
        ("e2", "pending_at_restored_checkpoint"),
    ]
    state.on_result(ok("e1", "judge"))  # a judge answer that arrives afterwards settles nothing
    assert state.collect_settled() == [] and state.counters["late_results"] == 1


def test_local_normaliser_is_the_central_state_plus_what_it_lacks():
    state, _ = make_state()

    def settle(eid: str, value: float) -> None:
        state.submit(eid, five_step_record(episode_id=eid))
        state.take_requests()
        for layer in ("judge", "long_term_value"):
            state.on_result(ok(eid, layer, value=value))
        state.collect_settled()

    settle("a", 1.0)
    state.take_flush("f1")
    settle("b", 3.0)
    state.take_flush("f2")  # sent, not acknowledged yet
    settle("c", 5.0)  # not sent
    # The ledger acknowledges f1 with a central state that also holds another runner's value 100.
    other = RunningMeanStd()
    other.update(np.array([1.0, 100.0]))
    central = {**state.normalizer.get_state(), "judge": other.get_state()}
    state.on_flush_acked("f1", central)
    expect = RunningMeanStd()
    expect.update(np.array([1.0, 100.0, 3.0, 5.0]))  # central + f2 (in flight) + c (unsent)
    assert state.normalizer.stats["judge"].count == 4
    assert state.normalizer.stats["judge"].mean == pytest.approx(expect.mean)
    assert state.normalizer.stats["judge"].var == pytest.approx(expect.var)
    state.on_flush_acked("f1", central)  # an old acknowledgement changes nothing
    assert state.normalizer.stats["judge"].count == 4


def test_prescored_results_settle_under_the_submitted_id():
    """zero_latency mode: the env scored every layer inside step(), keyed by its own episode id."""
    cfg = RewardPoolConfig(mode="zero_latency", layers={"execution": LayerConfig(), "judge": LayerConfig()})
    state = RewardClientState(cfg, make_layers(cfg, None, [CostClass.SYNC]), "w0-x", FakeClock())
    rec = five_step_record()
    state.submit("rllib-id", rec, prescored=[ok(rec.episode_id, "judge", 0.5)])
    assert state.take_requests() == {}
    [p] = state.collect_settled()
    assert p.episode_id == "rllib-id" and p.sources == {"judge": "inline", "execution": "inline"}
