"""Framework-agnostic part of PPO-Lagrangian's learner: the cost connector and the multiplier (dual ascent)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from ray.rllib.algorithms.ppo.ppo_learner import PPOLearner
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import OverrideToImplementCustomLogic_CallToSuperRecommended, override
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.typing import ModuleID, StateDict

from agentic_ray import keys
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI
from agentic_ray.algorithms.ppo_lagrangian.cost_advantages import CostAdvantages
from agentic_ray.algorithms.ppo_lagrangian.functional import multiplier_update

__all__ = ["PPOLagrangianLearner"]


class PPOLagrangianLearner(PPOLearner):
    """PPO's learner plus :class:`CostAdvantages` (after GAE) and one Lagrange multiplier per module.

    ``lagrange_multipliers[module_id]`` starts at ``lagrangian_init`` and takes one dual-ascent step after every
    ``Learner.update()`` on the mean episode cost that the connector logged for that batch. It is part of
    ``get_state()``.
    """

    @override(PPOLearner)
    def build(self) -> None:
        self.lagrange_multipliers: dict[ModuleID, float] = {}
        super().build()
        if self._learner_connector is not None and self.config.add_default_connectors_to_learner_pipeline:
            config: Any = self.config  # a PPOLagrangianConfig
            self._learner_connector.append(CostAdvantages(gamma=config.gamma, lambda_=config.lambda_))

    def multiplier(self, module_id: ModuleID) -> float:
        """The module's current λ (``lagrangian_init`` before its first update)."""
        if module_id not in self.lagrange_multipliers:
            cfg: Any = self.config.get_config_for_module(module_id)
            self.lagrange_multipliers[module_id] = float(cfg.lagrangian_init)
        return self.lagrange_multipliers[module_id]

    @OverrideToImplementCustomLogic_CallToSuperRecommended
    @override(PPOLearner)
    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        for module_id in self.module.keys():  # noqa: SIM118 (MultiRLModule is not a Mapping)
            key = (module_id, keys.PPO_LAG_EPISODE_COST)
            if key not in self.metrics:
                continue
            cfg: Any = self.config.get_config_for_module(module_id)
            episode_cost = float(np.asarray(convert_to_numpy(self.metrics.peek(key))))
            self.lagrange_multipliers[module_id] = multiplier_update(
                self.multiplier(module_id), episode_cost, cfg.cost_limit, cfg.lagrangian_lr
            )
            self.metrics.log_value(
                (module_id, keys.PPO_LAG_MULTIPLIER), self.lagrange_multipliers[module_id], window=1
            )

    @override(Learner)
    def get_state(
        self,
        components: str | Collection[str] | None = None,
        *,
        not_components: str | Collection[str] | None = None,
        **kwargs: Any,
    ) -> StateDict:
        state = super().get_state(components, not_components=not_components, **kwargs)
        state[keys.PPO_LAG_MULTIPLIERS] = dict(self.lagrange_multipliers)
        return state

    @override(Learner)
    def set_state(self, state: StateDict) -> None:
        super().set_state(state)
        if keys.PPO_LAG_MULTIPLIERS in state:
            self.lagrange_multipliers = {k: float(v) for k, v in state[keys.PPO_LAG_MULTIPLIERS].items()}

    @classmethod
    @override(PPOLearner)
    def rl_module_required_apis(cls) -> list[type]:
        return [TwoCriticAPI]
