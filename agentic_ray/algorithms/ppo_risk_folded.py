"""PPO with the risk stream folded into its reward: one critic on ``r + w·risk`` (a baseline for AAAC).

AAAC learns the risk stream with a critic of its own and mixes the two advantages. This baseline gives PPO the very
same signal (``episode.custom_data[keys.RISK_REWARDS]``, see ``agentic_ray/algorithms/episode_streams.py``) but
adds it to the reward before GAE, so one critic learns both. The gap between the two shows whether a *separate*
risk critic matters, rather than the risk signal itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.ppo import PPO, PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import GeneralAdvantageEstimation
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.from_config import _NotProvided
from ray.rllib.utils.typing import EpisodeType
from typing_extensions import Self

from agentic_ray.algorithms.episode_streams import risk_column

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule

__all__ = ["FoldRiskIntoRewards", "RiskFoldedPPO", "RiskFoldedPPOConfig", "RiskFoldedPPOTorchLearner"]


class FoldRiskIntoRewards(ConnectorV2):
    """Learner connector: ``rewards += weight · risk`` on every module's batch (inserted right before GAE)."""

    def __init__(
        self, input_observation_space: Any = None, input_action_space: Any = None, *, weight: float
    ) -> None:
        """Args:
        input_observation_space: Unused (ConnectorV2 signature).
        input_action_space: Unused (ConnectorV2 signature).
        weight: Scale of the risk stream in the folded reward.
        """
        super().__init__(input_observation_space, input_action_space)
        self.weight = weight

    @override(ConnectorV2)
    def __call__(
        self, *, rl_module: RLModule, batch: dict[str, Any], episodes: list[EpisodeType], **kwargs: Any
    ) -> Any:
        sa_episodes = list(self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False))
        for module_id, module_batch in batch.items():
            module_episodes = [e for e in sa_episodes if e.module_id in (None, module_id)]
            rewards = torch.as_tensor(module_batch[Columns.REWARDS])
            risk = torch.as_tensor(risk_column(module_episodes), device=rewards.device, dtype=rewards.dtype)
            module_batch[Columns.REWARDS] = rewards + self.weight * risk
        return batch


class RiskFoldedPPOTorchLearner(PPOTorchLearner):
    """PPO's torch learner with :class:`FoldRiskIntoRewards` in front of GAE."""

    @override(PPOTorchLearner)
    def build(self) -> None:
        super().build()
        if self._learner_connector is not None and self.config.add_default_connectors_to_learner_pipeline:
            self._learner_connector.insert_before(
                GeneralAdvantageEstimation,
                FoldRiskIntoRewards(weight=cast(Any, self.config).risk_fold_weight),
            )


class RiskFoldedPPOConfig(PPOConfig):
    """PPO's config plus ``risk_fold_weight`` (default 1: the risk stream as the risk critic of AAAC sees it)."""

    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or RiskFoldedPPO)
        self.risk_fold_weight = 1.0

    @override(PPOConfig)
    def training(self, *, risk_fold_weight: float | _NotProvided = NotProvided, **kwargs: Any) -> Self:
        """Sets ``risk_fold_weight`` (``>= 0``, the risk stream's scale in the reward) and PPO's settings."""
        super().training(**kwargs)
        if not isinstance(risk_fold_weight, _NotProvided):
            self.risk_fold_weight = risk_fold_weight
        return self

    @override(PPOConfig)
    def get_default_learner_class(self) -> type[Learner]:
        if self.framework_str != "torch":
            raise ValueError(f"RiskFoldedPPO supports framework='torch' only, got {self.framework_str!r}.")
        return RiskFoldedPPOTorchLearner

    @override(PPOConfig)
    def validate(self) -> None:
        super().validate()
        if self.risk_fold_weight < 0:
            self._value_error(f"`risk_fold_weight` ({self.risk_fold_weight}) must be >= 0.")


class RiskFoldedPPO(PPO):
    """PPO learning from ``reward + risk_fold_weight · risk`` with one critic."""

    @classmethod
    @override(PPO)
    def get_default_config(cls) -> PPOConfig:
        return RiskFoldedPPOConfig()
