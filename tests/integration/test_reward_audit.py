"""The audit fails when a reward is dropped, duplicated, altered or imputed between the scorers and the learner.

One RewardPoolPPO trains on a tiny env; a wrapper around ``learner_group.update`` (the transport between the
runner and the learner) drops, duplicates or alters one episode in chosen iterations, and a patched client
imputes the judge layer for one phase. The audit must name exactly those episodes, and nothing else.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from ray.rllib.algorithms.ppo import PPOConfig

from agentic_ray.keys import REWARD_LEDGER_ID
from agentic_ray.rewards.reward_ledger import RewardLedger
from agentic_ray.rewards.reward_pool_config import JudgeConfig, LayerConfig, RewardPoolConfig
from agentic_ray.rewards.score_messages import STATUS_OK, ScoreResult
from agentic_ray.rollout.reward_pool_wiring import RewardPoolPPO, wire_reward_pool
from tests.helpers.record_env import RecordEmittingEnv

pytestmark = pytest.mark.integration


def test_audit_names_each_dropped_duplicated_altered_and_imputed_reward(ray_session):
    pool_cfg = RewardPoolConfig(
        layers={
            "execution": LayerConfig(),
            "risk": LayerConfig(),
            "judge": LayerConfig(timeout_s=0.5, retries=0),
        },
        judge=JudgeConfig(latency_ms=0.0, server_mode="thread"),
    )
    config = (
        PPOConfig()
        .environment(RecordEmittingEnv, env_config={"episode_len": 5})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=4)
        .training(train_batch_size_per_learner=60, minibatch_size=30, num_epochs=1)
        .debugging(seed=0)
    )
    algo = RewardPoolPPO(config=wire_reward_pool(config, pool_cfg))
    faults: list[str] = []  # applied, in order, to the next learner updates that get episodes
    hit: dict[str, str] = {}
    real_update = algo.learner_group.update

    def faulty_update(*args: Any, episodes: Any = None, **kwargs: Any) -> Any:
        fault = faults.pop(0) if episodes and faults else None
        if episodes and fault == "drop":
            hit["drop"] = episodes[0].custom_data[REWARD_LEDGER_ID]
            episodes = episodes[1:]
        elif episodes and fault == "duplicate":
            hit["duplicate"] = episodes[0].custom_data[REWARD_LEDGER_ID]
            episodes = [*episodes, copy.deepcopy(episodes[0])]
        elif episodes and fault == "alter":
            ep = episodes[0]
            hit["alter"] = ep.custom_data[REWARD_LEDGER_ID]
            r = np.asarray(ep.get_rewards()).copy()
            r[0] += 0.25
            ep.set_rewards(new_data=r)
        return real_update(*args, episodes=episodes, **kwargs)

    algo.learner_group.update = faulty_update
    try:
        algo.train()
        algo.save_to_path()  # drains the runner into one more update: nothing is left pending
        clean = algo.reward_audit()
        assert clean.ok and clean.trained > 0, clean.problems()

        faults += ["drop", "duplicate", "alter"]
        for _ in range(10):
            if not faults:
                break
            algo.train()
        algo.save_to_path()
        assert set(hit) == {"drop", "duplicate", "alter"}
        a = algo.reward_audit()
        assert not a.ok
        assert (a.lost, a.double_counted, a.value_mismatches, a.imputed) == (1, 1, 1, 0), a.to_dict()
        assert a.lost_reasons == {"delivered_not_trained": 1}
        assert a.examples["lost"] == [hit["drop"]]
        assert a.examples["double_counted"] == [hit["duplicate"]]
        assert a.examples["value_mismatches"] == [hit["alter"]]

        # A client that "fixes" a judge timeout by making up a value: every judge call now times out, and the
        # patched state machine settles it with zeros instead of sending it to the missing policy.
        state = algo.env_runner.reward_client.state
        real_on_result = state.on_result

        def imputing_on_result(r: ScoreResult, source: str = "actor") -> None:
            if r.status != STATUS_OK and r.layer == "judge":
                n = state._episodes[r.episode_id].record.num_steps
                r = ScoreResult(
                    r.episode_id, r.layer, STATUS_OK, np.zeros(n, np.float32), "made-up", "0", 0.0, 1
                )
            real_on_result(r, source)

        state.on_result = imputing_on_result
        algo.reward_pool._judge_server.set_latency(2000)
        algo.train()
        algo.save_to_path()  # the drain waits out the judge timeouts, which the patch turns into zeros
        algo.reward_pool._judge_server.set_latency(0)
        state.on_result = real_on_result
        a = algo.reward_audit()
        ledger = RewardLedger(algo.reward_pool.spec["ledger_path"])
        [(made_up,)] = ledger.query(
            "SELECT COUNT(DISTINCT t.episode_id) FROM trained t JOIN scores s ON s.episode_id = t.episode_id"
            " WHERE s.layer = 'judge' AND s.scorer = 'made-up'"
        )
        assert made_up > 0 and a.imputed == made_up, a.to_dict()
        assert a.imputed_reasons == {"no_scorer_result:judge": made_up}
        assert (a.lost, a.double_counted, a.value_mismatches, a.pending) == (1, 1, 1, 0)
    finally:
        algo.stop()
