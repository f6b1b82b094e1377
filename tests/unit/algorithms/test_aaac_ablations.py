"""AAAC's ablation switches each remove their component: fixed λ, one critic, no β-KL (no Ray)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from agentic_ray import keys
from agentic_ray.algorithms.aaac.aaac import AAACConfig
from tests.unit.algorithms.test_aaac_learner import (
    ACT_SPACE,
    MID,
    OBS_SPACE,
    V_REWARD,
    fixed_batch,
    loop_td_lambda,
    make_episode,
    make_learner,
    set_constant_critics,
)

REWARDS_SHORT, REWARDS_LONG = [1.0, 0.0, 2.0], [0.5, -1.0, 0.0, 3.0, 1.0, 0.0]
RISK_LONG = [0.0, -1.0, 0.0, -2.0, 0.0, 0.0]


def connector_batch(learner, risk: list[float] | None = RISK_LONG) -> dict:
    set_constant_critics(learner.module[MID])
    episodes = [
        make_episode(REWARDS_SHORT, terminated=True, seed=1),
        make_episode(REWARDS_LONG, terminated=False, risk=risk, seed=2),
    ]
    return learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={}
    )[MID]


def standardized_with_bootstrap_rows(a: list[float], b: list[float]) -> torch.Tensor:
    x = np.array(a + b)
    z = (x - x.mean()) / x.std()
    return torch.tensor([*z[: len(a)], 0.0, *z[len(a) :], 0.0], dtype=torch.float32)


def test_fixed_lambda_uses_one_lambda_whatever_the_length() -> None:
    learner = make_learner(fixed_lambda=0.8, lambda_length_threshold=4, gamma=0.9)
    batch = connector_batch(learner)
    torch.testing.assert_close(batch[keys.TD_LAMBDA], torch.full((11,), 0.8))
    a_short, _ = loop_td_lambda(REWARDS_SHORT, V_REWARD, V_REWARD, True, 0.9, 0.8)
    a_long, _ = loop_td_lambda(REWARDS_LONG, V_REWARD, V_REWARD, False, 0.9, 0.8)
    torch.testing.assert_close(batch[keys.REWARD_ADVANTAGES], torch.tensor([*a_short, 0.0, *a_long, 0.0]))
    # The adaptive default on the same batch: the 3-step episode is short (0.95), the 6-step one long (0.55).
    adaptive = connector_batch(make_learner(lambda_length_threshold=4, gamma=0.9))
    torch.testing.assert_close(adaptive[keys.TD_LAMBDA], torch.tensor([0.95] * 4 + [0.55] * 7))


def test_one_critic_advantage_ignores_the_risk_stream() -> None:
    def one_critic():  # a fresh learner per batch: each connector call moves the value normalisers
        return make_learner(use_risk_critic=False, gamma=0.9, lambda_length_threshold=4, w_reward=0.7)

    batch = connector_batch(one_critic())
    a_short, _ = loop_td_lambda(REWARDS_SHORT, V_REWARD, V_REWARD, True, 0.9, 0.95)
    a_long, _ = loop_td_lambda(REWARDS_LONG, V_REWARD, V_REWARD, False, 0.9, 0.55)
    # Reward critic only, not 0.7·A_reward: w_reward plays no part either.
    torch.testing.assert_close(batch[Columns.ADVANTAGES], standardized_with_bootstrap_rows(a_short, a_long))
    assert not batch[keys.RISK_ADVANTAGES].any() and not batch[keys.RISK_VALUE_TARGETS].any()
    # A different risk stream leaves it unchanged; with both critics it moves the advantage.
    torch.testing.assert_close(
        connector_batch(one_critic(), risk=None)[Columns.ADVANTAGES], batch[Columns.ADVANTAGES]
    )

    def two_critics():
        return make_learner(gamma=0.9, lambda_length_threshold=4)

    assert not torch.allclose(
        connector_batch(two_critics())[Columns.ADVANTAGES],
        connector_batch(two_critics(), risk=None)[Columns.ADVANTAGES],
    )


@pytest.mark.parametrize("use_risk_critic", [True, False])
def test_one_critic_does_not_train_the_risk_critic(use_risk_critic: bool) -> None:
    torch.manual_seed(0)
    learner = make_learner(use_risk_critic=use_risk_critic, lr=1e-2)
    module = learner.module[MID]
    before = [p.detach().clone() for p in module.risk_critic_parameters()]
    episodes = [
        make_episode([1.0] * 5, terminated=True, risk=[-1.0, 0, 0, -1.0, 0], seed=s) for s in range(2)
    ]
    res = learner.update(episodes=episodes, timesteps={}, num_epochs=1, minibatch_size=None)
    moved = any(not torch.equal(b, p) for b, p in zip(before, module.risk_critic_parameters(), strict=True))
    assert moved is use_risk_critic
    assert (res[MID][keys.AAAC_VF_LOSS_RISK].peek() > 0) is use_risk_critic


def test_no_beta_kl_drops_the_kl_term() -> None:
    def loss_and_beta(**training) -> tuple[float, float]:
        learner = make_learner(entropy_coeff=0.0, **training)
        set_constant_critics(learner.module[MID])
        batch, fwd_out = fixed_batch()
        loss = learner.compute_loss_for_module(
            module_id=MID, config=learner.config, batch=batch, fwd_out=fwd_out
        )
        return loss.item(), learner.metrics.reduce()[MID][keys.AAAC_BETA].peek()

    with_kl, beta = loss_and_beta(beta_0=0.3)
    without_kl, beta_off = loss_and_beta(beta_0=0.3, use_beta_kl=False)
    zero_beta, _ = loss_and_beta(beta_0=0.0)
    assert beta == pytest.approx(0.3) and beta_off == 0.0
    assert without_kl == pytest.approx(zero_beta, rel=1e-6)
    assert with_kl > without_kl + 1e-3  # the fixed batch's KL(μ‖π) is > 0


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ({"fixed_lambda": 1.5}, "fixed_lambda"),
        ({"fixed_lambda": -0.1}, "fixed_lambda"),
        ({"use_risk_critic": "no"}, "use_risk_critic"),
        ({"use_beta_kl": 0}, "use_beta_kl"),
    ],
)
def test_ablation_switches_are_validated(setting: dict, match: str) -> None:
    cfg = AAACConfig().environment(observation_space=OBS_SPACE, action_space=ACT_SPACE).training(**setting)
    with pytest.raises(ValueError, match=match):
        cfg.validate()
