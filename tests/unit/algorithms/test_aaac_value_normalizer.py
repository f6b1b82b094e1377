"""AAAC's value normalisation: the moving statistics by hand, and a critic that follows large returns with it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from agentic_ray import keys
from agentic_ray.algorithms.aaac.value_normalizer import ValueNormalizer
from tests.unit.algorithms.test_aaac_learner import MID, make_episode, make_learner

GAMMA = 0.99


def test_moving_statistics_by_hand() -> None:
    n = ValueNormalizer(decay=0.9)
    x = torch.tensor([5.0, -2.0])
    torch.testing.assert_close(n.normalize(x), x)  # identity before the first update
    n.update(torch.tensor([1.0, 3.0]))  # debiased: mean 2, second moment 5 -> std 1
    assert n.mean_std == pytest.approx((2.0, 1.0))
    n.update(torch.tensor([11.0, 13.0]))
    # mean: (0.9·0.1·2 + 0.1·12) / (0.9·0.1 + 0.1) = 1.38/0.19; second moment: (0.9·0.1·5 + 0.1·145)/0.19
    mean, second = 1.38 / 0.19, 14.95 / 0.19
    assert n.mean_std == pytest.approx((mean, np.sqrt(second - mean**2)))
    torch.testing.assert_close(n.denormalize(n.normalize(x)), x)
    zeros = ValueNormalizer()
    zeros.update(torch.zeros(4))  # an all-zero risk stream: σ stays at its floor
    assert zeros.mean_std == (0.0, 1e-3)
    restored = ValueNormalizer(decay=0.9)
    restored.set_state(n.get_state())
    assert restored.mean_std == n.mean_std


def returns_of(rewards: list[float]) -> list[float]:
    g, out = 0.0, []
    for r in reversed(rewards):
        g = r + GAMMA * g
        out.append(g)
    return out[::-1]


@pytest.mark.parametrize("normalize", [True, False])
def test_critic_follows_large_returns_only_with_normalisation(normalize: bool) -> None:
    """Returns of 50-290 (CartPole's are up to ~100): the raw critic cannot grow its output that far in
    160 optimisation steps at 3e-3; read through the normaliser it fits them. The steps are 10 updates of 16 epochs
    (40 updates of 4 took 15-19 s per case: the learner's per-update connector pass, not the gradient steps)."""
    torch.manual_seed(0)
    learner = make_learner(normalize_values=normalize, fixed_lambda=1.0, gamma=GAMMA, critic_lr=3e-3)
    episodes = [make_episode([50.0] * 6, terminated=True, seed=s) for s in range(3)]
    for _ in range(10):
        res = learner.update(
            episodes=copy.deepcopy(episodes), timesteps={}, num_epochs=16, minibatch_size=None
        )
    module = learner.module[MID]
    obs = torch.as_tensor(np.concatenate([e.get_observations(slice(0, 6)) for e in episodes]))
    with torch.no_grad():
        out = module.compute_values({Columns.OBS: obs})
    values = learner.value_normalizers_of(MID)[0].denormalize(out) if normalize else out
    targets = torch.tensor(returns_of([50.0] * 6) * 3)
    relative_error = float(((values - targets) ** 2).mean() / targets.var())
    if normalize:
        assert relative_error < 0.05, relative_error
        assert res[MID][keys.AAAC_VF_LOSS_REWARD].peek() < 0.05  # logged in normalised units
    else:
        assert relative_error > 1.0, relative_error


def test_normalisers_are_learner_state() -> None:
    learner = make_learner()
    learner.update(
        episodes=[make_episode([3.0] * 5, terminated=True, risk=[-1.0, 0, 0, 0, 0])],
        timesteps={},
        num_epochs=1,
        minibatch_size=None,
    )
    reward, risk = learner.value_normalizers_of(MID)
    assert reward.mean_std[0] > 1.0 and risk.mean_std[0] < 0.0
    fresh = make_learner()
    fresh.set_state(learner.get_state())
    assert [n.mean_std for n in fresh.value_normalizers_of(MID)] == [reward.mean_std, risk.mean_std]
