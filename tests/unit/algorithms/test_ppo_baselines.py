"""The PPO baselines of the AAAC benchmark, without Ray: PPO-Lagrangian's multiplier and cost advantages, and PPO
with the risk stream folded into its reward."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.evaluation.postprocessing import Postprocessing

from agentic_ray import keys
from agentic_ray.algorithms.aaac.default_aaac_rl_module import DefaultAAACTorchRLModule
from agentic_ray.algorithms.ppo_lagrangian import PPOLagrangianConfig
from agentic_ray.algorithms.ppo_lagrangian.functional import lagrangian_advantages, multiplier_update
from agentic_ray.algorithms.ppo_risk_folded import RiskFoldedPPOConfig
from tests.unit.algorithms.test_aaac_learner import (
    ACT_SPACE,
    MID,
    OBS_SPACE,
    V_REWARD,
    V_RISK,
    loop_td_lambda,
    make_episode,
    set_constant_critics,
)

RISK_A, RISK_B = [0.0, -1.0, 0.0], [-2.0, 0.0, 0.0, -1.0]  # episode costs 1 and 3: J_c = 2


def build(config_cls, **training):
    cfg = (
        config_cls()
        .environment(observation_space=OBS_SPACE, action_space=ACT_SPACE)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=DefaultAAACTorchRLModule))
        .training(gamma=0.9, lambda_=0.8, **training)
    )
    learner = cfg.build_learner(spaces={MID: (OBS_SPACE, ACT_SPACE)})
    set_constant_critics(learner.module[MID])
    return learner


def two_episodes():
    return [
        make_episode([1.0, 0.0, 2.0], terminated=True, risk=RISK_A, seed=1),
        make_episode([0.5, -1.0, 0.0, 3.0], terminated=False, risk=RISK_B, seed=2),
    ]


def run_connector(learner, episodes) -> dict:
    return learner._learner_connector(
        rl_module=learner.module,
        batch={},
        episodes=copy.deepcopy(episodes),
        shared_data={},
        metrics=learner.metrics,
    )[MID]


def test_multiplier_update_is_projected_dual_ascent() -> None:
    # λ + lr·(J_c − d): 0.5 + 0.05·(0.3 − 0.1) = 0.51; below the budget it falls, and stops at 0.
    assert multiplier_update(0.5, episode_cost=0.3, cost_limit=0.1, lr=0.05) == pytest.approx(0.51)
    assert multiplier_update(0.5, episode_cost=0.0, cost_limit=0.1, lr=1.0) == pytest.approx(0.4)
    assert multiplier_update(0.005, episode_cost=0.0, cost_limit=0.1, lr=0.1) == 0.0


def test_lagrangian_advantage() -> None:
    out = lagrangian_advantages(torch.tensor([1.0, -1.0]), torch.tensor([0.5, 2.0]), 1.0)
    torch.testing.assert_close(out, torch.tensor([0.25, -1.5]))
    torch.testing.assert_close(
        lagrangian_advantages(torch.tensor([1.0]), torch.tensor([9.0]), 0.0), torch.tensor([1.0])
    )


def test_cost_advantages_are_gae_on_the_negated_risk_stream() -> None:
    learner = build(PPOLagrangianConfig)
    batch = run_connector(learner, two_episodes())
    # The cost critic is the module's risk head (constant V_RISK here); cost = −risk.
    a_a, g_a = loop_td_lambda([-r for r in RISK_A], V_RISK, V_RISK, True, 0.9, 0.8)
    a_b, g_b = loop_td_lambda([-r for r in RISK_B], V_RISK, V_RISK, False, 0.9, 0.8)
    mean = np.mean(a_a + a_b)
    expected_adv = torch.tensor(
        [*(np.array(a_a) - mean), 0.0, *(np.array(a_b) - mean), 0.0], dtype=torch.float32
    )
    torch.testing.assert_close(batch[keys.COST_ADVANTAGES], expected_adv)
    real = batch[Columns.LOSS_MASK]
    torch.testing.assert_close(batch[keys.COST_VALUE_TARGETS][real], torch.tensor(g_a + g_b))
    assert learner.metrics.peek((MID, keys.PPO_LAG_EPISODE_COST)) == pytest.approx(2.0)


def test_multiplier_steps_once_per_update_on_the_batch_cost_and_is_learner_state() -> None:
    learner = build(PPOLagrangianConfig, cost_limit=0.5, lagrangian_lr=0.1, lagrangian_init=0.2)
    assert learner.multiplier(MID) == pytest.approx(0.2)
    for _ in range(2):
        learner.update(episodes=two_episodes(), timesteps={}, num_epochs=2, minibatch_size=4)
    # Each update: λ += 0.1·(J_c − d) with J_c = (1 + 3)/2 = 2 → 0.2 + 0.15 + 0.15.
    assert learner.multiplier(MID) == pytest.approx(0.5)
    fresh = build(PPOLagrangianConfig, cost_limit=0.5, lagrangian_lr=0.1, lagrangian_init=0.2)
    fresh.set_state(learner.get_state())
    assert fresh.multiplier(MID) == pytest.approx(0.5)


def test_policy_loss_uses_the_lagrangian_advantage_and_trains_the_cost_critic() -> None:
    learner = build(PPOLagrangianConfig, entropy_coeff=0.0, use_kl_loss=False, vf_loss_coeff=0.5)
    batch = run_connector(learner, two_episodes())
    batch = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    fwd_out = learner.module[MID].forward_train(batch)
    learner.lagrange_multipliers[MID] = 1.5
    loss = learner.compute_loss_for_module(module_id=MID, config=learner.config, batch=batch, fwd_out=fwd_out)
    mixed = (batch[Postprocessing.ADVANTAGES] - 1.5 * batch[keys.COST_ADVANTAGES]) / 2.5
    ppo_on_mixed = PPOTorchLearner.compute_loss_for_module(
        learner,
        module_id=MID,
        config=learner.config,
        batch={**batch, Postprocessing.ADVANTAGES: mixed},
        fwd_out=fwd_out,
    )
    mask = batch[Columns.LOSS_MASK]
    cost_vf = ((V_RISK - batch[keys.COST_VALUE_TARGETS][mask]) ** 2).mean()
    assert loss.item() == pytest.approx(ppo_on_mixed.item() + 0.5 * cost_vf.item(), rel=1e-5)
    assert cost_vf.item() > 0.1  # the cost term is not vanishing on this batch
    loss.backward()
    assert any(
        p.grad is not None and p.grad.abs().sum() > 0 for p in learner.module[MID].risk_critic_parameters()
    )


def test_lagrangian_config_is_validated() -> None:
    for setting in ({"cost_limit": -1.0}, {"lagrangian_lr": 0.0}, {"lagrangian_init": -0.1}):
        cfg = (
            PPOLagrangianConfig()
            .environment(observation_space=OBS_SPACE, action_space=ACT_SPACE)
            .training(**setting)
        )
        with pytest.raises(ValueError, match=next(iter(setting))):
            cfg.validate()


def test_risk_folded_ppo_adds_the_risk_stream_to_the_reward_before_gae() -> None:
    folded = run_connector(build(RiskFoldedPPOConfig, risk_fold_weight=2.0), two_episodes())
    rewards_a, rewards_b = [1.0, 0.0, 2.0], [0.5, -1.0, 0.0, 3.0]
    expected = [r + 2.0 * k for r, k in zip(rewards_a, RISK_A, strict=True)] + [0.0]
    expected += [r + 2.0 * k for r, k in zip(rewards_b, RISK_B, strict=True)] + [0.0]
    torch.testing.assert_close(folded[Columns.REWARDS], torch.tensor(expected))
    # GAE ran on the folded reward: the reward critic's targets are λ-returns of r + 2·risk.
    _, g_a = loop_td_lambda(expected[:3], V_REWARD, V_REWARD, True, 0.9, 0.8)
    real = folded[Columns.LOSS_MASK]
    torch.testing.assert_close(folded[Postprocessing.VALUE_TARGETS][real][:3], torch.tensor(g_a))
    plain = run_connector(build(RiskFoldedPPOConfig, risk_fold_weight=0.0), two_episodes())
    torch.testing.assert_close(plain[Columns.REWARDS][real], torch.tensor(rewards_a + rewards_b))
