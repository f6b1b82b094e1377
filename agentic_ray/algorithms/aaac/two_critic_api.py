"""The RLModule API an AAAC learner needs: a reward critic, a risk critic and three parameter groups.

Any (Torch)RLModule that inherits :class:`TwoCriticAPI` and implements its abstract methods can be trained by
``AAACTorchLearner``, e.g. the default MLP module here or a GNN module in ``agentic_ray/models``::

    class MyGraphModule(TorchRLModule, TwoCriticAPI, InferenceOnlyAPI):
        def compute_values(self, batch, embeddings=None): ...  # reward critic, (B,)
        def compute_risk_values(self, batch, embeddings=None): ...  # risk critic, (B,)
        def policy_parameters(self): ...  # actor head + any shared encoder
        def reward_critic_parameters(self): ...
        def risk_critic_parameters(self): ...

The learner registers one optimizer per group, so it can clip each group's gradients on its own. A parameter may
belong to exactly one group (RLlib asserts this); put a shared encoder into the policy group.
:func:`check_parameter_groups` verifies the partition and is called by the learner at build time.
"""

from __future__ import annotations

import abc
from typing import Any

import torch
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI

__all__ = ["TwoCriticAPI", "check_parameter_groups"]


class TwoCriticAPI(ValueFunctionAPI, abc.ABC):
    """An RLModule with two critics and an explicit split of its parameters into three optimizer groups.

    ``compute_values`` (inherited from RLlib's ``ValueFunctionAPI``) is the **reward critic**, so RLlib tools
    that expect one value function keep working. ``compute_risk_values`` is the **risk critic**.
    """

    @abc.abstractmethod
    def compute_risk_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        """Risk critic: expected discounted sum of the risk stream from each observation.

        Args:
            batch: The train batch of this module (``Columns.OBS`` etc.), ``B`` rows (or ``(B, T)``).
            embeddings: Optional encoder output from ``forward_train`` to reuse, if the module shares one.

        Returns:
            ``(B,)`` (or ``(B, T)``) float tensor, already squeezed.
        """

    def compute_both_values(
        self, batch: dict[str, Any], embeddings: Any | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(reward values, risk values)``; override when the two critics share work (e.g. one encoder).

        The learner's loss and the advantage connector call this, not the two methods one by one.
        """
        reward = self.compute_values(batch, embeddings)  # RLlib types it as TensorType
        return torch.as_tensor(reward), self.compute_risk_values(batch, embeddings)

    @abc.abstractmethod
    def policy_parameters(self) -> list[torch.nn.Parameter]:
        """Parameters trained by the policy optimizer: actor head plus any shared encoder."""

    @abc.abstractmethod
    def reward_critic_parameters(self) -> list[torch.nn.Parameter]:
        """Parameters trained only by the reward critic's optimizer."""

    @abc.abstractmethod
    def risk_critic_parameters(self) -> list[torch.nn.Parameter]:
        """Parameters trained only by the risk critic's optimizer."""


def check_parameter_groups(module: TwoCriticAPI) -> None:
    """Raises ``ValueError`` unless the three groups are disjoint, non-empty and cover every trainable parameter.

    Args:
        module: A torch module implementing :class:`TwoCriticAPI`.

    Raises:
        ValueError: If a group is empty, a parameter is in two groups, or a trainable parameter is in none.
    """
    groups = {
        "policy": module.policy_parameters(),
        "reward critic": module.reward_critic_parameters(),
        "risk critic": module.risk_critic_parameters(),
    }
    owner: dict[int, str] = {}
    for name, params in groups.items():
        if not params:
            raise ValueError(f"TwoCriticAPI: the {name} parameter group is empty.")
        for p in params:
            if id(p) in owner:
                raise ValueError(
                    f"TwoCriticAPI: a parameter of shape {tuple(p.shape)} is in both the {owner[id(p)]} and the "
                    f"{name} group; each parameter may belong to one optimizer only (put shared encoders in "
                    "the policy group)."
                )
            owner[id(p)] = name
    if isinstance(module, torch.nn.Module):
        missing = [n for n, p in module.named_parameters() if p.requires_grad and id(p) not in owner]
        if missing:
            raise ValueError(f"TwoCriticAPI: trainable parameters in no group: {missing}")
