"""Default AAAC module (spaces, inference-only stripping, parameter groups) and AAACConfig.validate()."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from torch import nn

from agentic_ray.algorithms.aaac.aaac import AAACConfig
from agentic_ray.algorithms.aaac.default_aaac_rl_module import DefaultAAACTorchRLModule
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI, check_parameter_groups

BOX_OBS = gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32)


def build(obs_space: gym.Space, act_space: gym.Space, **kw) -> DefaultAAACTorchRLModule:
    return DefaultAAACTorchRLModule(
        observation_space=obs_space, action_space=act_space, model_config={"fcnet_hiddens": [16]}, **kw
    )


def test_discrete_actions_box_obs_shapes_and_groups() -> None:
    module = build(BOX_OBS, gym.spaces.Discrete(4))
    assert isinstance(module, TwoCriticAPI)
    batch = {Columns.OBS: torch.randn(5, 2, 3)}
    out = module.forward_train(batch)
    assert out[Columns.ACTION_DIST_INPUTS].shape == (5, 4)
    assert module.compute_values(batch).shape == (5,)
    assert module.compute_risk_values(batch).shape == (5,)
    check_parameter_groups(module)
    assert module.pi[0].in_features == 6


def test_box_actions_discrete_obs() -> None:
    module = build(gym.spaces.Discrete(5), gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    obs = torch.tensor([0, 4, 2])
    logits = module.forward_exploration({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    assert logits.shape == (3, 4)  # mean and log-std
    torch.testing.assert_close(logits[:, 2:], torch.zeros(3, 2))  # log_std starts at 0
    dist = module.get_exploration_action_dist_cls().from_logits(logits)
    assert dist.sample().shape == (3, 2)
    assert any(p is module.log_std for p in module.policy_parameters())
    check_parameter_groups(module)


def test_inference_only_module_has_no_critics_and_loads_learner_weights() -> None:
    learner_module = build(BOX_OBS, gym.spaces.Discrete(3))
    runner_module = build(BOX_OBS, gym.spaces.Discrete(3), inference_only=True)
    assert not hasattr(runner_module, "vf_reward") and not hasattr(runner_module, "vf_risk")

    state = learner_module.get_state(inference_only=True)
    assert state and all(not k.startswith(("vf_reward", "vf_risk")) for k in state)
    runner_module.set_state(state)
    obs = {Columns.OBS: torch.randn(4, 2, 3)}
    torch.testing.assert_close(
        runner_module.forward_inference(obs)[Columns.ACTION_DIST_INPUTS],
        learner_module.forward_inference(obs)[Columns.ACTION_DIST_INPUTS],
    )


def test_unsupported_spaces_raise() -> None:
    with pytest.raises(ValueError, match="observations"):
        build(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match="actions"):
        build(BOX_OBS, gym.spaces.MultiDiscrete([2, 2]))


def test_check_parameter_groups_rejects_overlap_and_gaps() -> None:
    class Overlapping(DefaultAAACTorchRLModule):
        def reward_critic_parameters(self) -> list[nn.Parameter]:
            return [*super().reward_critic_parameters(), self.pi[0].weight]

    class Gappy(DefaultAAACTorchRLModule):
        def risk_critic_parameters(self) -> list[nn.Parameter]:
            return super().risk_critic_parameters()[:-1]

    with pytest.raises(ValueError, match="both"):
        check_parameter_groups(Overlapping(observation_space=BOX_OBS, action_space=gym.spaces.Discrete(2)))
    with pytest.raises(ValueError, match="no group"):
        check_parameter_groups(Gappy(observation_space=BOX_OBS, action_space=gym.spaces.Discrete(2)))


def _validated(**training) -> AAACConfig:
    cfg = AAACConfig().environment("CartPole-v1").training(**training)
    cfg.validate()
    return cfg


def test_validate_accepts_defaults_and_derives_w_risk() -> None:
    cfg = _validated()
    assert cfg.w_reward == 0.7 and cfg.w_risk == pytest.approx(0.3)
    assert cfg.batch_mode == "complete_episodes"
    assert (cfg.lambda_short, cfg.lambda_long) == (0.95, 0.55)
    assert (cfg.risk_critic_grad_clip, cfg.reward_critic_grad_clip) == (1.0, 2.0)
    cfg.update_from_dict({"w_reward": 0.9})
    assert cfg.w_risk == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ({"w_reward": 1.2}, "w_reward"),
        ({"w_reward": -0.1}, "w_reward"),
        ({"lambda_short": 1.5}, "lambda_short"),
        ({"lambda_long": -0.5}, "lambda_long"),
        ({"beta_0": -0.1}, "beta_0"),
        ({"beta_decay": 0.0}, "beta_decay"),
        ({"risk_critic_grad_clip": 0.0}, "risk_critic_grad_clip"),
        ({"reward_critic_grad_clip": -1.0}, "reward_critic_grad_clip"),
        ({"policy_grad_clip": 0.0}, "policy_grad_clip"),
        ({"lambda_smooth_width": 0.0}, "lambda_smooth_width"),
        ({"is_ratio_cap": 0.0}, "is_ratio_cap"),
        ({"entropy_coeff": -1.0}, "entropy_coeff"),
        ({"grad_clip": 1.0}, "grad_clip"),
        ({"minibatch_size": 4096, "train_batch_size_per_learner": 1000}, "minibatch_size"),
    ],
)
def test_validate_rejects(setting: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _validated(**setting)


def test_validate_warns_about_fragments(caplog: pytest.LogCaptureFixture) -> None:
    cfg = AAACConfig().environment("CartPole-v1").env_runners(batch_mode="truncate_episodes")
    with caplog.at_level("WARNING"):
        cfg.validate()
    assert "lower bound" in caplog.text
