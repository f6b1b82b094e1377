"""Learner connector: GAE advantages and value targets of PPO-Lagrangian's cost stream.

Appended after RLlib's ``GeneralAdvantageEstimation`` by ``PPOLagrangianLearner.build()``. The cost of a step is
``−risk``, the negated risk stream AAAC's risk critic learns from (``episode.custom_data[keys.RISK_REWARDS]``, see
``agentic_ray/algorithms/episode_streams.py``), so both algorithms see the same signal. The cost critic is the
module's second value head (``TwoCriticAPI.compute_risk_values``). The maths is RLlib's own
(``compute_value_targets``, the function GAE uses for the reward stream), so reward and cost advantages come from
one estimator.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets
from ray.rllib.utils.typing import EpisodeType

from agentic_ray import keys
from agentic_ray.algorithms.episode_streams import bootstrap_rows, risk_column, two_critic_module_batches

__all__ = ["CostAdvantages"]


class CostAdvantages(ConnectorV2):
    """Writes ``keys.COST_ADVANTAGES`` (centred over real steps, 0 at bootstrap rows) and ``keys.COST_VALUE_TARGETS``.

    Also logs the batch's mean cost per episode chunk, ``(module_id, keys.PPO_LAG_EPISODE_COST)``, which the
    learner's multiplier update reads after the gradient steps (as PPO reads its KL for the adaptive KL coefficient).
    Cost advantages are centred but not scaled: a rarely non-zero cost would otherwise blow its critic's noise up
    to the reward advantage's unit scale (safety-starter-agents does the same).
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        gamma: float,
        lambda_: float,
    ) -> None:
        """Args:
        input_observation_space: Unused (ConnectorV2 signature).
        input_action_space: Unused (ConnectorV2 signature).
        gamma: Discount of the cost stream.
        lambda_: GAE λ of the cost stream.
        """
        super().__init__(input_observation_space, input_action_space)
        self.gamma, self.lambda_ = gamma, lambda_

    @override(ConnectorV2)
    def __call__(
        self,
        *,
        rl_module: RLModule,
        batch: dict[str, Any],
        episodes: list[EpisodeType],
        explore: bool | None = None,
        shared_data: dict | None = None,
        metrics: MetricsLogger | None = None,
        **kwargs: Any,
    ) -> Any:
        for module_id, module, module_batch, module_episodes in two_critic_module_batches(
            self, rl_module, batch, episodes, "PPO-Lagrangian's cost advantages"
        ):
            with torch.no_grad():
                values = torch.as_tensor(module.compute_risk_values(module_batch))
            cost = -risk_column(module_episodes)
            targets = compute_value_targets(
                values=convert_to_numpy(values),
                rewards=cost,
                terminateds=np.asarray(convert_to_numpy(module_batch[Columns.TERMINATEDS]), np.float32),
                truncateds=np.asarray(convert_to_numpy(module_batch[Columns.TRUNCATEDS]), np.float32),
                gamma=self.gamma,
                lambda_=self.lambda_,
            )
            targets_t = torch.as_tensor(targets, device=values.device, dtype=values.dtype)
            real = ~bootstrap_rows([len(e) for e in module_episodes], values.device)
            advantages = targets_t - values
            advantages = torch.where(real, advantages - advantages[real].mean(), torch.zeros_like(advantages))
            module_batch[keys.COST_ADVANTAGES] = advantages
            module_batch[keys.COST_VALUE_TARGETS] = targets_t
            if metrics is not None:
                metrics.log_value(
                    (module_id, keys.PPO_LAG_EPISODE_COST),
                    float(cost.sum()) / max(1, len(module_episodes)),
                    window=1,
                )
        return batch
