"""Soft-mode delayed consequences reach AAAC's risk critic: the L3 risk layer scores them into the risk stream
(with the reward pool and without it), and the risk critic's λ-return targets carry them back to the first step."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from agentic_ray import keys
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.eval.evaluator import RandomPolicy, rollout, validation_tasks
from agentic_ray.rewards.layer_group_scorer import make_layers
from agentic_ray.rewards.layers.base import CostClass
from agentic_ray.rewards.layers.risk_layer import RiskLayer
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig, default_layers
from agentic_ray.rollout.episode_callbacks import AgenticEpisodeCallbacks
from tests.unit.algorithms.test_aaac_learner import MID, make_episode, make_learner, set_constant_critics
from tests.unit.rewards.records import record, step


def test_risk_layer_puts_the_delayed_consequences_on_the_last_step() -> None:
    rec = record(
        [step(high_risk=True, risk_weight=0.5), step(), step()],
        consequences=[{"skill": "x", "kind": "k", "step": 0, "weight": 0.5}, {"skill": "y", "kind": "k"}],
    )
    # immediate -0.5 on the risky step; delayed 2·(0.5 + 1 (no weight: the default)) on the last one
    np.testing.assert_allclose(RiskLayer().score(rec), [-0.5, 0, -3.0])
    np.testing.assert_allclose(RiskLayer(consequence_scale=0.0).score(rec), [-0.5, 0, 0])
    with pytest.raises(ValueError, match="consequence_scale"):
        RiskLayer(consequence_scale=-1.0)


@pytest.fixture(scope="module")
def soft_records():
    """Random masked policy in soft mode: it takes shortcuts, and some of them cause consequences."""
    cfg = AgentTaskEnvConfig(risk_mode="soft", drift=False)
    recs, _ = rollout(RandomPolicy(0), cfg, validation_tasks(cfg, 6), num_envs=8)
    with_consequences = [r for r in recs if r.consequences]
    assert with_consequences, "no soft-mode episode had a delayed consequence"
    return with_consequences


def test_the_pools_risk_layer_scores_soft_mode_consequences(soft_records) -> None:
    layers = default_layers()
    layers["risk"] = layers["risk"].model_copy(update={"params": {"consequence_scale": 3.0}})
    risk = make_layers(RewardPoolConfig(layers=layers), judge_url=None, costs=[CostClass.SYNC])["risk"]
    for rec in soft_records[:5]:
        immediate = RiskLayer(consequence_scale=0.0).score(rec)
        delayed = risk.score(rec) - immediate
        assert delayed[:-1].tolist() == [0.0] * (rec.num_steps - 1)
        weights = [c["weight"] or 1.0 for c in rec.consequences]
        assert delayed[-1] == pytest.approx(-3.0 * sum(weights), rel=1e-6)


def _rllib_episode(rec) -> SingleAgentEpisode:
    """An RLlib episode whose last info holds the record, as the env writes it."""
    n = rec.num_steps
    return SingleAgentEpisode(
        observations=[0] * (n + 1),
        actions=[0] * n,
        rewards=[0.0] * n,
        infos=[{}] * n + [{keys.EPISODE_RECORD: rec.to_dict()}],
        terminated=True,
        len_lookback_buffer=0,
    )


def test_soft_mode_consequences_reach_the_risk_critics_targets(soft_records) -> None:
    gamma = 0.9
    learner = make_learner(gamma=gamma, lambda_short=1.0, lambda_long=1.0)  # λ = 1: discounted risk returns
    set_constant_critics(learner.module[MID])
    for rec in soft_records[:5]:
        ep = _rllib_episode(rec)
        AgenticEpisodeCallbacks().on_episode_end(episode=ep)  # the no-pool path writes the risk stream
        stream = np.asarray(ep.custom_data[keys.RISK_REWARDS])
        immediate = RiskLayer(consequence_scale=0.0).score(rec)
        cost = RiskLayer().consequence_cost(rec.consequences)
        assert cost > 0 and stream[-1] == pytest.approx(immediate[-1] - cost)

        def risk_targets(risk: np.ndarray) -> torch.Tensor:
            episodes = [make_episode([0.0] * len(risk), terminated=True, risk=list(risk))]
            batch = learner._learner_connector(
                rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={}
            )[MID]
            return batch[keys.RISK_VALUE_TARGETS]

        with_c, without_c = risk_targets(stream), risk_targets(immediate)
        # The consequence, scored after the episode, moves the risk critic's target at the very first step.
        expected = -cost * gamma ** (rec.num_steps - 1)
        assert float(with_c[0] - without_c[0]) == pytest.approx(expected, rel=1e-4)
