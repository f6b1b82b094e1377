"""Crashes on the training plane, each a bounded scenario that stops by itself (``tests/helpers/chaos_scenarios``).

* reward actors (judge, model scorer, ledger) killed again and again while PPO trains: nothing lost, imputed or
  counted twice, training completes;
* the window that let that scenario impute (a scorer killed after answering, before its ledger record left it),
  made deterministic: a scorer answers only once the ledger holds its record, and one killed before that is re-run;
* an EnvRunner SIGKILLed mid-iteration: RLlib restarts it, training goes on, its pending episodes are dropped
  with a reason, and no unsettled episode reaches the learner.
"""

from __future__ import annotations

import os
import signal

import pytest

from agentic_ray.rewards.reward_actor_pool import RewardActorPool
from agentic_ray.rewards.reward_ledger import RewardLedger
from agentic_ray.rewards.score_messages import STATUS_OK, ScoreRequest, values_checksum
from tests.helpers.chaos_scenarios import (
    kill_env_runner_while_training,
    kill_reward_actors_while_training,
    pool_config,
)
from tests.unit.rewards.records import five_step_record

pytestmark = pytest.mark.integration


def test_reward_actor_kills_lose_nothing_and_count_nothing_twice(ray_session):
    r = kill_reward_actors_while_training(min_iterations=4, duration_s=20.0)
    assert {"io", "cpu", "ledger"} <= set(r.events), r.events
    assert sum(r.extra["inflight_at_kill"]) > 0, r.extra  # the kills hit scoring calls in flight
    a = r.audit
    assert a.ok, a.problems()
    assert (a.lost, a.double_counted, a.imputed, a.value_mismatches, a.pending) == (0, 0, 0, 0, 0)
    assert a.dropped == 0 and a.trained == a.sealed == a.submitted > 0, a.to_dict()
    # Ray re-ran the calls of the killed actors; the client cancelled or lost none.
    assert r.extra["counters"].get("cancelled_calls", 0) == 0 == r.extra["counters"].get("lost_calls", 0)


def test_scorer_killed_before_its_ledger_record_is_acknowledged_is_rerun(ray_session):
    """The cause of the chaos benchmark's imputed rewards, without the luck: with the ledger stopped (SIGSTOP), a
    judge call must not answer (its scorer record is not committed); the scorer is killed in that window, and Ray
    re-runs the call on the restarted actor, whose answer every returned value backs with a ``scored`` row."""
    import ray

    pool = RewardActorPool.create(pool_config(latency_ms=0.0))
    try:
        io = pool.actors("io")[0]
        ledger_pid = ray.get(pool.ledger.pid.remote())
        ray.get(io.pid.remote())
        requests = [
            ScoreRequest(f"ep-{i}", "judge", five_step_record(episode_id=f"ep-{i}")) for i in range(4)
        ]
        os.kill(ledger_pid, signal.SIGSTOP)
        try:
            ref = io.score.remote(requests)
            early, _ = ray.wait([ref], timeout=3.0)
            ray.kill(io, no_restart=False)  # while its record waits for the stopped ledger
        finally:
            os.kill(ledger_pid, signal.SIGCONT)
        assert not early, "a scorer answered before the ledger held its record (a kill now makes it imputed)"
        results = ray.get(ref, timeout=120)  # re-run by Ray on the restarted actor (max_task_retries=-1)
        assert [r.status for r in results] == [STATUS_OK] * 4
        scored = set(
            RewardLedger(pool.spec["ledger_path"]).query(
                "SELECT episode_id, layer, value_checksum FROM scored"
            )
        )
        for r in results:
            assert (r.episode_id, "judge", values_checksum(r.values)) in scored, (r.episode_id, scored)
    finally:
        pool.shutdown()


def test_env_runner_crash_mid_iteration_is_recovered_and_accounted(ray_session):
    r = kill_env_runner_while_training()
    assert r.extra["new_runner_id"] not in (None, r.extra["old_runner_id"]), (
        r.extra
    )  # a restarted incarnation
    assert r.extra["recovery_s"] is not None, (
        r.extra
    )  # the learner trained on the restarted runner's episodes
    a = r.audit
    # No unsettled or altered episode reached the learner, and nothing was trained twice.
    assert (a.imputed, a.value_mismatches, a.double_counted, a.pending) == (0, 0, 0, 0), a.to_dict()
    # What the dead runner still held is accounted for: dropped with a reason (never pending forever).
    assert set(a.drop_reasons) <= {"env_runner_died"}, a.drop_reasons
    assert a.lost == 0, (a.lost_reasons, a.examples)
    assert a.trained > 0
