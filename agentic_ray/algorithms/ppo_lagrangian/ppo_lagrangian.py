"""PPO-Lagrangian on RLlib's new API stack: PPO with a cost critic and a learned Lagrange multiplier.

The constrained-RL baseline of ``benchmarks/aaac_vs_ppo.py`` (Ray, Achiam & Amodei 2019; Safe RLHF uses the same
device with separate reward and cost models). It maximises the env reward subject to an expected cost per episode
of at most ``cost_limit``:

* the cost of a step is ``−risk``, the negated risk stream that AAAC's risk critic learns from
  (``episode.custom_data[keys.RISK_REWARDS]``);
* a cost critic (the module's second value head, ``TwoCriticAPI.compute_risk_values``) gives GAE cost advantages
  (:class:`~agentic_ray.algorithms.ppo_lagrangian.cost_advantages.CostAdvantages`);
* PPO's clipped surrogate runs on ``(A_r − λ·A_c)/(1 + λ)``;
* after each ``Learner.update()``, λ takes one projected dual-ascent step on the batch's mean episode cost,
  ``λ ← max(0, λ + lagrangian_lr·(J_c − cost_limit))``; λ is part of the learner state, so it survives checkpoints.

Where AAAC mixes its two advantages with a fixed ``0.7/0.3``, PPO-Lagrangian learns the trade-off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.ppo import PPO, PPOConfig
from ray.rllib.utils.annotations import override
from ray.rllib.utils.from_config import _NotProvided
from typing_extensions import Self

if TYPE_CHECKING:
    from ray.rllib.core.learner.learner import Learner

__all__ = ["PPOLagrangian", "PPOLagrangianConfig"]


class PPOLagrangianConfig(PPOConfig):
    """Configuration of :class:`PPOLagrangian`: PPO's settings plus the cost budget and the multiplier's step.

    Example::

        config = PPOLagrangianConfig().environment(AgentTaskEnv).training(cost_limit=0.1, lagrangian_lr=0.05)

    The module must implement ``TwoCriticAPI`` (e.g. ``AAACRLModule``): its risk critic serves as the cost critic.
    """

    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or PPOLagrangian)
        self.cost_limit = 0.1
        self.lagrangian_lr = 0.05
        self.lagrangian_init = 0.0

    @override(PPOConfig)
    def training(
        self,
        *,
        cost_limit: float | _NotProvided = NotProvided,
        lagrangian_lr: float | _NotProvided = NotProvided,
        lagrangian_init: float | _NotProvided = NotProvided,
        **kwargs: Any,
    ) -> Self:
        """Sets PPO-Lagrangian's settings (plus any of ``PPOConfig.training``'s).

        Args:
            cost_limit: The budget ``d`` on the expected cost per episode, ``>= 0``.
            lagrangian_lr: Step size of the multiplier's dual ascent (one step per ``Learner.update()``), ``> 0``.
            lagrangian_init: The multiplier's initial value, ``>= 0``.
            **kwargs: Forwarded to ``PPOConfig.training``.

        Returns:
            This config, updated.
        """
        super().training(**kwargs)
        if not isinstance(cost_limit, _NotProvided):
            self.cost_limit = cost_limit
        if not isinstance(lagrangian_lr, _NotProvided):
            self.lagrangian_lr = lagrangian_lr
        if not isinstance(lagrangian_init, _NotProvided):
            self.lagrangian_init = lagrangian_init
        return self

    @override(PPOConfig)
    def get_default_learner_class(self) -> type[Learner]:
        if self.framework_str != "torch":
            raise ValueError(f"PPO-Lagrangian supports framework='torch' only, got {self.framework_str!r}.")
        from agentic_ray.algorithms.ppo_lagrangian.torch.ppo_lagrangian_torch_learner import (
            PPOLagrangianTorchLearner,
        )

        return PPOLagrangianTorchLearner

    @override(PPOConfig)
    def validate(self) -> None:
        """Checks PPO's invariants and the budget, step size and initial multiplier."""
        super().validate()
        if self.cost_limit < 0:
            self._value_error(f"`cost_limit` ({self.cost_limit}) must be >= 0.")
        if not self.lagrangian_lr > 0:
            self._value_error(f"`lagrangian_lr` ({self.lagrangian_lr}) must be > 0.")
        if self.lagrangian_init < 0:
            self._value_error(f"`lagrangian_init` ({self.lagrangian_init}) must be >= 0.")


class PPOLagrangian(PPO):
    """PPO whose learner adds a cost critic and a Lagrange multiplier (``training_step`` is PPO's)."""

    @classmethod
    @override(PPO)
    def get_default_config(cls) -> PPOConfig:
        return PPOLagrangianConfig()
