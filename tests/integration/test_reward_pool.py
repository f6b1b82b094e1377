"""The reward actor pool on a local Ray cluster: what the learner gets, missing policies, checkpoints.

Uses the session-wide ``ray_session`` cluster, ``num_env_runners=0`` and tiny batches.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.connectors.connector_v2 import ConnectorV2

from agentic_ray.keys import (
    POLICY_VERSION,
    REWARD_LEDGER_ID,
    REWARD_PROVENANCE,
    REWARD_VECTOR,
    REWARD_VECTOR_RAW,
    RISK_REWARDS,
)
from agentic_ray.rewards.layers import LAYER_CLASSES
from agentic_ray.rewards.ledger_audit import audit_ledger
from agentic_ray.rewards.reward_actor_pool import RewardActorPool
from agentic_ray.rewards.reward_ledger import RewardLedger
from agentic_ray.rewards.reward_pool_config import JudgeConfig, LayerConfig, RewardPoolConfig
from agentic_ray.rollout.reward_aware_env_runner import RewardAwareEnvRunner
from agentic_ray.rollout.reward_pool_wiring import REWARD_POOL_DIR, RewardPoolPPO, wire_reward_pool
from tests.helpers.record_env import RecordEmittingEnv

pytestmark = pytest.mark.integration

ALL_LAYERS = {n for n, c in LAYER_CLASSES.items() if c.enabled_by_default}  # a default pool's layers
SEEN: list[dict[str, Any]] = []  # what the learner connector saw (the learner is local: num_learners=0)


class RecordLearnerEpisodes(ConnectorV2):
    """First learner-connector piece: records the reward side channels of every episode the learner consumes."""

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        for ep in episodes:
            SEEN.append(
                {
                    "id": ep.custom_data.get(REWARD_LEDGER_ID),
                    "len": len(ep),
                    "layers": set(ep.custom_data.get(REWARD_VECTOR, {})),
                    "raw_layers": set(ep.custom_data.get(REWARD_VECTOR_RAW, {})),
                    "risk_len": len(ep.custom_data.get(RISK_REWARDS, [])),
                    "rewards": np.asarray(ep.get_rewards()).copy(),
                    "provenance": ep.custom_data.get(REWARD_PROVENANCE, {}),
                    "policy_version": ep.custom_data.get(POLICY_VERSION),
                }
            )
        return batch


def ppo_config(num_envs: int = 4, batch: int = 112) -> PPOConfig:
    return (
        PPOConfig()
        .environment(RecordEmittingEnv, env_config={"episode_len": 7})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs)
        .training(train_batch_size_per_learner=batch, minibatch_size=56, num_epochs=1)
        .learners(learner_connector=lambda obs_space, act_space: [RecordLearnerEpisodes()])
        .debugging(seed=0)
    )


def test_learner_gets_complete_reward_vectors_and_checkpoints_carry_the_ledger(ray_session, tmp_path):
    import ray

    SEEN.clear()
    pool_cfg = RewardPoolConfig(
        judge=JudgeConfig(latency_ms=300.0, server_mode="thread"),
        ledger_path=str(tmp_path / "ledger.sqlite"),
        max_pending_episodes=200,
    )
    config = wire_reward_pool(ppo_config(), pool_cfg)  # the algorithm creates the pool in setup()
    algo = RewardPoolPPO(config=config)
    try:
        pool = algo.reward_pool
        assert pool is not None and pool.spec["prefix"].startswith("agray-reward-")
        for _ in range(3):
            algo.train()

        runner: RewardAwareEnvRunner = algo.env_runner
        pool_stats = runner.reward_pool_stats()

        # Checkpoint: drains the runner (one more learner update) and saves the ledger next to the checkpoint.
        ckpt = Path(algo.save_to_path(str(tmp_path / "ckpt")))
        assert runner.reward_client.num_pending == 0
        audit = pool.audit()
        assert audit.ok, audit.problems()  # nothing lost, double-counted, imputed, altered or left pending
        assert audit.lost == audit.double_counted == audit.value_mismatches == audit.imputed == 0, audit
        assert audit.dropped == 0 and audit.missing_layers == 0, audit
        assert audit.trained == audit.sealed == audit.settled == audit.submitted > 0
        assert (
            pool_stats["counters"].get("cancelled_calls", 0)
            == 0
            == pool_stats["counters"].get("lost_calls", 0)
        )
        # Every sealed episode reached the learner exactly once, with complete reward vectors.
        seen_ids = [s["id"] for s in SEEN]
        assert len(seen_ids) == len(set(seen_ids)) == audit.trained, (len(seen_ids), audit)
        for s in SEEN:
            assert s["layers"] == ALL_LAYERS and s["raw_layers"] == ALL_LAYERS
            # PPO's learner prepends AddOneTsToEpisodesAndTruncate, so the learner sees T + 1 steps.
            assert s["risk_len"] == 7 and s["len"] == 8
            assert np.all(np.isfinite(s["rewards"]))
            assert {p["attempts"] for p in s["provenance"].values()} >= {1}
        # Ledger rows carry scorer, version and latency; the judge's latency reflects the 300 ms service.
        judge_rows = [ray.get(pool.ledger.scores.remote(s["id"]))["judge"] for s in SEEN[:5]]
        assert all(r["scorer"] == "LLMJudgeLayer" and r["latency_s"] >= 0.29 for r in judge_rows)
        ltv = ray.get(pool.ledger.scores.remote(SEEN[0]["id"]))["long_term_value"]
        assert ltv["version"].startswith("1/ltv-logreg-v1@")
        saved = RewardLedger(ckpt / REWARD_POOL_DIR / "reward_ledger.sqlite")
        assert audit_ledger(saved).to_dict() == audit.to_dict()
        assert saved.get_json("normalizer_state")["execution"]["count"] > 0
    finally:
        algo.stop()

    # Restoring creates a fresh pool (new actor names) and loads the ledger and normaliser state into it.
    restored = RewardPoolPPO.from_checkpoint(str(ckpt))
    try:
        assert restored.reward_pool is not None
        assert restored.reward_pool.spec["prefix"] != pool.spec["prefix"]
        assert restored.reward_pool.audit().to_dict() == audit.to_dict()
        norm = ray.get(restored.reward_pool.ledger.normalizer_state.remote())
        assert norm == saved.get_json("normalizer_state")
    finally:
        restored.stop()


def test_a_rolling_checkpoint_does_not_wait_for_scorers_and_a_restore_drops_what_it_left_pending(
    ray_session, tmp_path
):
    """``save_to_path(settle=False)`` (the pipeline's per-iteration checkpoint) returns while episodes still wait
    for an 800 ms judge, which go on settling in this run; restoring that checkpoint drops them in the ledger with
    ``pending_at_restored_checkpoint``, never imputed, and training goes on with a clean audit."""
    pool_cfg = RewardPoolConfig(
        judge=JudgeConfig(latency_ms=800.0, server_mode="thread"),
        ledger_path=str(tmp_path / "ledger.sqlite"),
        max_pending_episodes=200,
    )
    algo = RewardPoolPPO(config=wire_reward_pool(ppo_config(), pool_cfg))
    try:
        for _ in range(2):
            algo.train()
        runner: RewardAwareEnvRunner = algo.env_runner
        ckpt = Path(algo.save_to_path(str(tmp_path / "ckpt"), settle=False))
        left = runner.reward_client.num_pending
        assert left > 0  # it did not wait for the judge
        saved = audit_ledger(RewardLedger(ckpt / REWARD_POOL_DIR / "reward_ledger.sqlite"))
        assert saved.pending == left and not saved.ok

        algo.train()  # this run goes on: what was pending settles and is trained
        assert algo.reward_pool.audit().lost == 0

        algo.restore_from_path(str(ckpt))
        assert runner.reward_client.num_pending == 0
        audit = algo.reward_pool.audit()
        assert audit.pending == 0 and audit.imputed == 0 and audit.double_counted == 0, audit
        assert audit.drop_reasons == {"pending_at_restored_checkpoint": left}, audit
        algo.train()
        algo.save_to_path(str(tmp_path / "ckpt2"))  # settles: nothing pending, nothing lost
        audit = algo.reward_pool.audit()
        assert audit.ok, audit.problems()
        assert audit.drop_reasons == {"pending_at_restored_checkpoint": left}, audit
    finally:
        algo.stop()


def _runner(pool_cfg: RewardPoolConfig, pool: RewardActorPool) -> RewardAwareEnvRunner:
    config = wire_reward_pool(ppo_config(num_envs=2), pool_cfg, pool)
    return RewardAwareEnvRunner(config=config)


def test_judge_timeouts_drop_with_reason_never_zero(ray_session, tmp_path):
    pool_cfg = RewardPoolConfig(
        layers={"execution": LayerConfig(), "judge": LayerConfig(timeout_s=0.2, retries=1)},
        judge=JudgeConfig(latency_ms=1000.0, server_mode="thread"),
        missing_policy="drop",
    )
    pool = RewardActorPool.create(pool_cfg)
    runner = _runner(pool_cfg, pool)
    try:
        returned = [ep for _ in range(3) for ep in runner.sample()]
        returned += runner.drain()
        assert returned == []  # no episode reaches the learner with an imputed judge score
        audit = pool.audit()
        n = audit.submitted
        # Each sample() call takes 112 steps (2 sub-envs x 56), whole 7-step episodes: 3 x 16 of them.
        assert n == 3 * 112 // 7
        assert audit.dropped == n and audit.drop_reasons == {"judge:timeout": n}
        assert audit.missing_layers == n and audit.sealed == 0 and audit.pending == 0
        # The scorer spent the layer's one retry on each episode, then the layer went missing.
        ledger = RewardLedger(pool.spec["ledger_path"])
        attempts = {r[0] for r in ledger.query("SELECT attempts FROM scores WHERE layer='judge'")}
        assert attempts == {2}
    finally:
        runner.stop()
        pool.shutdown()


def test_hold_policy_retries_later_and_then_settles(ray_session, tmp_path):
    pool_cfg = RewardPoolConfig(
        layers={"execution": LayerConfig(), "judge": LayerConfig(timeout_s=0.2, retries=0)},
        judge=JudgeConfig(latency_ms=1000.0, server_mode="thread"),
        missing_policy="hold",
        hold_retry_s=0.5,
        max_hold_rounds=3,
    )
    pool = RewardActorPool.create(pool_cfg)
    runner = _runner(pool_cfg, pool)
    try:
        assert runner.sample() == []
        deadline = time.time() + 10
        while runner.reward_client.counters["held"] < 2 and time.time() < deadline:
            runner.sample()
        assert runner.reward_client.counters["held"] >= 2
        pool._judge_server.set_latency(0.0)  # the judge recovers
        settled = runner.drain()
        audit = pool.audit()
        assert audit.pending == 0 and audit.dropped == 0 and audit.double_counted == 0 and audit.imputed == 0
        assert audit.sealed == len(settled) == audit.submitted
        assert audit.lost == audit.sealed  # sealed for a learner that this runner-only test never runs
        for ep in settled:
            assert set(ep.custom_data[REWARD_VECTOR]) == {"execution", "judge"}
            assert ep.custom_data[REWARD_PROVENANCE]["judge"]["attempts"] >= 1
    finally:
        runner.stop()
        pool.shutdown()
