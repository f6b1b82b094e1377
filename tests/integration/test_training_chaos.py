"""Crashes on the training plane, each a bounded scenario that stops by itself (``tests/helpers/chaos_scenarios``).

* reward actors (judge, model scorer, ledger) killed again and again while PPO trains: nothing lost or counted
  twice, training completes;
* an EnvRunner SIGKILLed mid-iteration: RLlib restarts it, training goes on, its pending episodes are dropped
  with a reason, and no unsettled episode reaches the learner.
"""

from __future__ import annotations

import pytest

from tests.helpers.chaos_scenarios import kill_env_runner_while_training, kill_reward_actors_while_training

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
