"""Default AAAC RLModule for plain Gymnasium envs: an MLP actor and two separate MLP critics.

Observation spaces: ``Box`` (flattened) or ``Discrete`` (one-hot). Action spaces: ``Discrete`` (categorical
logits) or 1-D ``Box`` (diagonal Gaussian with a state-independent log-std). All sizes come from the spaces, so
nothing is lazy (RLlib counts parameters while building the learner).

``model_config`` keys (RLlib's ``DefaultModelConfig`` names): ``fcnet_hiddens`` (default ``[64, 64]``) and
``fcnet_activation`` (``"tanh"``, ``"relu"`` or ``"silu"``; default ``"tanh"``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn

from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI

__all__ = ["DefaultAAACTorchRLModule"]

HIDDENS_KEY = "fcnet_hiddens"
ACTIVATION_KEY = "fcnet_activation"
DEFAULT_HIDDENS = (64, 64)
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU}


def _mlp(in_dim: int, hiddens: tuple[int, ...], out_dim: int, activation: type[nn.Module]) -> nn.Sequential:
    """MLP ``in_dim → hiddens → out_dim`` with orthogonal init (gain √2 hidden, 0.01 policy-style output)."""
    layers: list[nn.Module] = []
    dim = in_dim
    for width in hiddens:
        linear = nn.Linear(dim, width)
        nn.init.orthogonal_(linear.weight, gain=float(np.sqrt(2.0)))
        nn.init.zeros_(linear.bias)
        layers += [linear, activation()]
        dim = width
    head = nn.Linear(dim, out_dim)
    nn.init.orthogonal_(head.weight, gain=0.01)
    nn.init.zeros_(head.bias)
    layers.append(head)
    return nn.Sequential(*layers)


class DefaultAAACTorchRLModule(TorchRLModule, TwoCriticAPI, InferenceOnlyAPI):
    """MLP actor ``pi`` plus two critics ``vf_reward`` and ``vf_risk`` that share nothing with the actor.

    On EnvRunners (``inference_only=True``) both critics are removed, and the learner sends only the actor's
    weights. Parameter groups for AAAC's three optimizers: ``pi`` (+ ``log_std`` for Box actions),
    ``vf_reward``, ``vf_risk``.
    """

    @override(RLModule)
    def setup(self) -> None:
        obs_space, act_space = self.observation_space, self.action_space
        if isinstance(obs_space, gym.spaces.Discrete):
            obs_dim = int(obs_space.n)
        elif isinstance(obs_space, gym.spaces.Box):
            obs_dim = int(np.prod(obs_space.shape))
        else:
            raise ValueError(
                f"DefaultAAACTorchRLModule supports Box or Discrete observations, got {obs_space}."
            )
        if isinstance(act_space, gym.spaces.Discrete):
            pi_out = int(act_space.n)
        elif isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
            pi_out = int(act_space.shape[0])
        else:
            raise ValueError(
                f"DefaultAAACTorchRLModule supports Discrete or 1-D Box actions, got {act_space}."
            )

        model_config = self.model_config if isinstance(self.model_config, dict) else {}
        hiddens = tuple(model_config.get(HIDDENS_KEY, DEFAULT_HIDDENS))
        activation = ACTIVATIONS[model_config.get(ACTIVATION_KEY, "tanh")]
        self._obs_dim = obs_dim
        self.pi = _mlp(obs_dim, hiddens, pi_out, activation)
        self.log_std = nn.Parameter(torch.zeros(pi_out)) if isinstance(act_space, gym.spaces.Box) else None
        self.vf_reward = _mlp(obs_dim, hiddens, 1, activation)
        self.vf_risk = _mlp(obs_dim, hiddens, 1, activation)
        # Value heads start at unit gain (the 0.01 gain suits only the policy's logits).
        for critic in (self.vf_reward, self.vf_risk):
            head = critic[-1]
            assert isinstance(head, nn.Linear)
            nn.init.orthogonal_(head.weight, gain=1.0)

    def _features(self, batch: dict[str, Any]) -> torch.Tensor:
        """``(B, obs_dim)`` float features: flattened Box observations or one-hot Discrete ones."""
        obs = batch[Columns.OBS]
        if isinstance(self.observation_space, gym.spaces.Discrete):
            return nn.functional.one_hot(obs.long(), self._obs_dim).float()
        return obs.reshape(obs.shape[0], -1).float()

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        logits = self.pi(self._features(batch))
        if self.log_std is not None:
            logits = torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return {Columns.ACTION_DIST_INPUTS: logits}

    @override(ValueFunctionAPI)
    def compute_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        return self.vf_reward(self._features(batch)).squeeze(-1)

    @override(TwoCriticAPI)
    def compute_risk_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        return self.vf_risk(self._features(batch)).squeeze(-1)

    @override(TwoCriticAPI)
    def policy_parameters(self) -> list[nn.Parameter]:
        extra = [self.log_std] if self.log_std is not None else []
        return list(self.pi.parameters()) + extra

    @override(TwoCriticAPI)
    def reward_critic_parameters(self) -> list[nn.Parameter]:
        return list(self.vf_reward.parameters())

    @override(TwoCriticAPI)
    def risk_critic_parameters(self) -> list[nn.Parameter]:
        return list(self.vf_risk.parameters())

    @override(InferenceOnlyAPI)
    def get_non_inference_attributes(self) -> list[str]:
        return ["vf_reward", "vf_risk"]
