"""AAAC's torch learner: the loss (one function), three optimizers and per-group gradient clipping."""

from __future__ import annotations

from typing import Any, cast

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.torch_utils import clip_gradients
from ray.rllib.utils.typing import ModuleID, ParamDict, TensorType

from agentic_ray import keys
from agentic_ray.algorithms.aaac.aaac_learner import (
    CRITIC_REWARD_OPTIMIZER,
    CRITIC_RISK_OPTIMIZER,
    POLICY_OPTIMIZER,
    AAACLearner,
)
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI

__all__ = ["AAACTorchLearner"]


class AAACTorchLearner(AAACLearner, TorchLearner):
    """Torch implementation of the AAAC loss.

    Policy term: importance-weighted advantages against the behaviour policy μ that sampled the episode
    (``batch[Columns.ACTION_LOGP]``), ``ρ = π(a|s)/μ(a|s)``, because held-back episodes arrive one or more updates
    late. Two forms:

    * ``policy_clip=ε`` (default 0.2): the clipped surrogate ``−E[min(ρA, clip(ρ, 1−ε, 1+ε)A)]``, a hard trust
      region for several epochs per batch.
    * ``policy_clip=None``: truncated importance weights ``−E[min(ρ, ρ̄)·A·∇log π]`` with the weight held
      constant (V-trace style): every sample keeps a gradient, so a rare high-advantage sample still pushes at
      weight ≤ ρ̄ where clipping would drop it (the seed's "17 high-value feedbacks clipped away"). The only
      brake is then the KL penalty; on the e-commerce env the policy's entropy collapsed within ~8k env steps
      and completion fell back (notes in ``benchmarks/results/aaac_vs_ppo.md``), so this is an option, not the
      default.

    Both are followed by the progressive KL penalty to the behaviour policy, ``β_t·KL(μ‖π)``, strongest early
    (``t`` counts policy optimisation steps, see :class:`AAACLearner`),
    and, with ``anchor_kl_coeff > 0`` and a reference set (:meth:`AAACLearner.set_reference_policy`), by
    ``anchor_kl_coeff·KL(π_ref‖π)`` to the frozen reference.

    Critics: the reward critic (``compute_values``) regresses on ``Columns.VALUE_TARGETS``, the risk critic
    (``compute_risk_values``) on ``keys.RISK_VALUE_TARGETS``; both targets are TD(λ) λ-returns from
    :class:`TwoCriticAdvantages`. With ``normalize_values`` (default) the critics' outputs are normalised values
    and the targets are normalised with the learner's running statistics first, so the logged value losses are
    in normalised units.
    """

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id: ModuleID, config: Any = None) -> None:
        module = cast(TwoCriticAPI, self.module[module_id].unwrapped())
        critic_lr = config.lr if config.critic_lr is None else config.critic_lr
        groups = (
            (POLICY_OPTIMIZER, module.policy_parameters(), config.lr),
            (CRITIC_REWARD_OPTIMIZER, module.reward_critic_parameters(), critic_lr),
            (CRITIC_RISK_OPTIMIZER, module.risk_critic_parameters(), critic_lr),
        )
        for name, params, lr in groups:
            params = list(params)
            self.register_optimizer(
                module_id=module_id,
                optimizer_name=name,
                optimizer=torch.optim.Adam(params),
                params=params,
                lr_or_lr_schedule=lr,
            )

    @override(Learner)
    def postprocess_gradients_for_module(
        self,
        *,
        module_id: ModuleID,
        config: Any = None,
        module_gradients_dict: ParamDict,
    ) -> ParamDict:
        """Clips each optimizer's gradients by global norm with its own limit and logs the pre-clip norm."""
        clip_by_optimizer = {
            POLICY_OPTIMIZER: config.policy_grad_clip,
            CRITIC_REWARD_OPTIMIZER: config.reward_critic_grad_clip,
            CRITIC_RISK_OPTIMIZER: config.risk_critic_grad_clip,
        }
        for name, optimizer in self.get_optimizers_for_module(module_id):
            grads = self.filter_param_dict_for_optimizer(module_gradients_dict, optimizer)
            grads = {ref: g for ref, g in grads.items() if g is not None}
            grad_norm = clip_gradients(grads, grad_clip=clip_by_optimizer[name], grad_clip_by="global_norm")
            module_gradients_dict.update(grads)
            self.metrics.log_value((module_id, keys.AAAC_GRAD_NORM_PREFIX + name), grad_norm, window=1)
        return module_gradients_dict

    @override(TorchLearner)
    def compute_loss_for_module(
        self,
        *,
        module_id: ModuleID,
        config: Any,
        batch: dict[str, Any],
        fwd_out: dict[str, TensorType],
    ) -> TensorType:
        module: Any = self.module[module_id].unwrapped()  # an RLModule implementing TwoCriticAPI
        mask = batch[Columns.LOSS_MASK]  # False at each chunk's artificial bootstrap step
        num_valid = mask.sum().clamp(min=1)

        def masked_mean(x: torch.Tensor) -> torch.Tensor:
            return torch.sum(x[mask]) / num_valid

        # Current policy π and behaviour policy μ (the one that sampled the episode, possibly updates ago).
        pi = module.get_train_action_dist_cls().from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        mu = module.get_exploration_action_dist_cls().from_logits(batch[Columns.ACTION_DIST_INPUTS])
        logp = pi.logp(batch[Columns.ACTIONS])

        # Advantage = standardise(w_reward·s(adv_reward) + w_risk·s(adv_risk)), s = per-stream standardisation,
        # TD(λ) per stream (connector; see functional.mix_advantages).
        adv_reward = batch[keys.REWARD_ADVANTAGES]
        adv_risk = batch[keys.RISK_ADVANTAGES]
        advantages = batch[Columns.ADVANTAGES]
        lambda_ = batch[keys.TD_LAMBDA]

        # Policy: importance-weighted advantages, clipped surrogate or truncated weights (see class docstring).
        ratio = torch.exp(logp - batch[Columns.ACTION_LOGP])
        if config.policy_clip is None:
            is_weight = torch.clamp(ratio, max=config.is_ratio_cap).detach()
            policy_loss = -masked_mean(is_weight * advantages * logp)
        else:
            eps = config.policy_clip
            is_weight = torch.clamp(ratio, 1.0 - eps, 1.0 + eps).detach()
            surrogate = torch.minimum(
                ratio * advantages, torch.clamp(ratio, 1.0 - eps, 1.0 + eps) * advantages
            )
            policy_loss = -masked_mean(surrogate)

        # Two critics, each regressed on its own stream's λ-returns.
        embeddings = fwd_out.get(Columns.EMBEDDINGS)
        values_reward, values_risk = module.compute_both_values(batch, embeddings=embeddings)
        targets_reward, targets_risk = batch[Columns.VALUE_TARGETS], batch[keys.RISK_VALUE_TARGETS]
        if config.normalize_values:  # the critics learn normalised targets (the connector updated the stats)
            norm_reward, norm_risk = self.value_normalizers_of(module_id)
            targets_reward, targets_risk = (
                norm_reward.normalize(targets_reward),
                norm_risk.normalize(targets_risk),
            )
        vf_loss_reward = masked_mean((values_reward - targets_reward) ** 2)
        # One-critic ablation: the risk critic gets no loss (and so no gradient).
        vf_loss_risk = (
            masked_mean((values_risk - targets_risk) ** 2)
            if config.use_risk_critic
            else torch.zeros((), device=logp.device)
        )

        # Progressive KL penalty to the behaviour policy, β_t = β_0·decay^t (t = policy optimisation steps; 0 with
        # the no-β-KL ablation), plus an entropy bonus.
        beta_t = self.current_beta(config)
        kl = masked_mean(mu.kl(pi))
        kl_penalty = beta_t * kl if beta_t > 0 else torch.zeros((), device=logp.device)  # 0·inf would be nan
        entropy = masked_mean(pi.entropy())
        anchor_kl = torch.zeros((), device=logp.device)
        ref = self.reference_modules.get(module_id)
        if config.anchor_kl_coeff > 0 and ref is not None:
            with torch.no_grad():
                ref_inputs = ref.forward_exploration(batch)[Columns.ACTION_DIST_INPUTS]
            anchor_kl = masked_mean(pi.__class__.from_logits(ref_inputs).kl(pi))

        # Reflection (stage 3): root-cause cross-entropy on the steps that follow a failure.
        reflection_coeff = (
            self.reflection_coeff if self.reflection_coeff is not None else config.reflection_coeff
        )
        loss_reflection, reflection_accuracy = torch.zeros((), device=logp.device), None
        if reflection_coeff > 0 and hasattr(module, "compute_reflection_logits"):
            from agentic_ray.models.aaac_rl_module import REFLECTION_EMBEDDINGS
            from agentic_ray.models.reflection import reflection_loss

            loss_reflection, stats = reflection_loss(
                module,
                batch[Columns.OBS],
                embeddings=cast(Any, fwd_out.get(REFLECTION_EMBEDDINGS)),
                mask=mask,
                train_encoder=config.reflection_trains_encoder,
            )
            reflection_accuracy = stats.get("reflection_accuracy")

        # Critic warm-up: the first updates after imitation fit the critics only.
        policy_on = float(self.policy_terms_on(config))

        total_loss = (
            policy_on
            * (policy_loss + kl_penalty + config.anchor_kl_coeff * anchor_kl - config.entropy_coeff * entropy)
            + config.vf_loss_coeff * (vf_loss_reward + vf_loss_risk)
            + reflection_coeff * loss_reflection
        )

        self.metrics.log_dict(
            {
                keys.AAAC_POLICY_LOSS: policy_loss,
                keys.AAAC_VF_LOSS_REWARD: vf_loss_reward,
                keys.AAAC_VF_LOSS_RISK: vf_loss_risk,
                keys.AAAC_BETA: beta_t,
                keys.AAAC_KL: kl,
                keys.AAAC_ANCHOR_KL: anchor_kl,
                keys.AAAC_ENTROPY: entropy,
                keys.AAAC_LAMBDA_MEAN: masked_mean(lambda_),
                keys.AAAC_IS_WEIGHT_MEAN: masked_mean(is_weight),
                keys.AAAC_RATIO_MAX: ratio[mask].max() if mask.any() else ratio.new_ones(()),
                keys.AAAC_ADV_REWARD_MEAN: masked_mean(adv_reward),
                keys.AAAC_ADV_RISK_MEAN: masked_mean(adv_risk),
                keys.AAAC_REFLECTION_LOSS: loss_reflection,
                **(
                    {keys.AAAC_REFLECTION_ACCURACY: reflection_accuracy}
                    if reflection_accuracy is not None
                    else {}
                ),
            },
            key=module_id,
            window=1,
        )
        gate_means = fwd_out.get(keys.MODALITY_GATE_MEANS)
        if gate_means is not None:  # the multimodal encoder's gates (absent without modality blocks)
            self.metrics.log_dict(
                {
                    keys.GATE_PREFIX + kind: g
                    for kind, g in zip(keys.MODALITY_KINDS, gate_means.tolist(), strict=True)
                    if g == g  # NaN: no node revealed that modality in this batch
                },
                key=module_id,
                window=1,
            )
        return total_loss
