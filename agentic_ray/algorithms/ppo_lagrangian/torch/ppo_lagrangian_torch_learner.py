"""PPO-Lagrangian's torch loss: PPO's loss on the Lagrangian advantage, plus the cost critic's regression."""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.annotations import override
from ray.rllib.utils.typing import ModuleID, TensorType

from agentic_ray import keys
from agentic_ray.algorithms.ppo_lagrangian.functional import lagrangian_advantages
from agentic_ray.algorithms.ppo_lagrangian.ppo_lagrangian_learner import PPOLagrangianLearner

__all__ = ["PPOLagrangianTorchLearner"]


class PPOLagrangianTorchLearner(PPOLagrangianLearner, PPOTorchLearner):
    """``PPO loss with A = (A_r − λ·A_c)/(1 + λ)`` ``+ vf_loss_coeff·clip((V_c − G_c)², vf_clip_param)``.

    The cost critic's loss is clipped like PPO's value loss; its parameters sit in PPO's one optimizer (all
    module parameters), so ``grad_clip`` covers them too.
    """

    @override(TorchLearner)
    def compute_loss_for_module(
        self,
        *,
        module_id: ModuleID,
        config: Any,
        batch: dict[str, Any],
        fwd_out: dict[str, TensorType],
    ) -> TensorType:
        multiplier = self.multiplier(module_id)
        mixed = lagrangian_advantages(
            batch[Postprocessing.ADVANTAGES], batch[keys.COST_ADVANTAGES], multiplier
        )
        ppo_loss = super().compute_loss_for_module(
            module_id=module_id,
            config=config,
            batch={**batch, Postprocessing.ADVANTAGES: mixed},
            fwd_out=fwd_out,
        )
        module: Any = self.module[module_id].unwrapped()  # implements TwoCriticAPI (rl_module_required_apis)
        mask = batch[Columns.LOSS_MASK]
        cost_values = module.compute_risk_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        cost_error = torch.clamp((cost_values - batch[keys.COST_VALUE_TARGETS]) ** 2, 0, config.vf_clip_param)
        vf_loss_cost = torch.sum(cost_error[mask]) / mask.sum().clamp(min=1)
        self.metrics.log_value((module_id, keys.PPO_LAG_VF_LOSS_COST), vf_loss_cost, window=1)
        return ppo_loss + config.vf_loss_coeff * vf_loss_cost
