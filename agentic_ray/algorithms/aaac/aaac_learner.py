"""Framework-agnostic part of the AAAC learner: connector wiring, module checks and the β and warm-up counters."""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any, cast

from ray.rllib.connectors.learner import AddOneTsToEpisodesAndTruncate
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import OverrideToImplementCustomLogic_CallToSuperRecommended, override
from ray.rllib.utils.typing import ParamDict, StateDict

from agentic_ray import keys
from agentic_ray.algorithms.aaac.functional import beta_schedule
from agentic_ray.algorithms.aaac.two_critic_advantages import TwoCriticAdvantages
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI, check_parameter_groups
from agentic_ray.algorithms.aaac.value_normalizer import ValueNormalizer

__all__ = ["CRITIC_REWARD_OPTIMIZER", "CRITIC_RISK_OPTIMIZER", "POLICY_OPTIMIZER", "AAACLearner"]

# Optimizer names (one optimizer per parameter group of a TwoCriticAPI module).
POLICY_OPTIMIZER = "policy"
CRITIC_REWARD_OPTIMIZER = "critic_reward"
CRITIC_RISK_OPTIMIZER = "critic_risk"


class AAACLearner(Learner):
    """Adds the two-critic advantage connector and keeps the counters of the β schedule and the critic warm-up.

    * ``num_policy_steps``, the t of ``β_t = β_0·decay^t``: optimisation steps (one per SGD minibatch update,
      ``apply_gradients``) taken with the policy terms on, i.e. after the critic warm-up. Seed 002 decays β "with
      the number of training steps" and lets the policy "explore boldly for the first ~10k steps": per
      optimisation step, AAAC's defaults (2000-step batches, 4 epochs of 128-row minibatches, 64 steps per
      iteration) halve β every ~11 iterations (~22k env steps), so it is still 0.73·β_0 at 10k env steps and
      0.05·β_0 at ~100k. Counted per env step, 0.999^t would be 0.05·β_0 after 3k env steps; counted per
      ``Learner.update()`` (as before), still 0.96·β_0 after 40 iterations.
    * ``num_updates``: completed ``Learner.update()`` calls (one per ``AAAC.training_step``), the unit of
      ``critic_warmup_updates``.

    * ``value_normalizers``: per module, the ``(reward, risk)`` critics' target normalisers
      (``normalize_values``; see ``value_normalizer.py``), shared with the advantage connector.

    All three are part of ``get_state()``, so they survive checkpoints.

    :meth:`set_reference_policy` snapshots each module as the frozen reference ``π_ref`` of the anchor term
    ``anchor_kl_coeff·KL(π_ref‖π)``; the snapshot is part of ``get_state()`` too, so a resumed run keeps its
    anchor.
    """

    @override(Learner)
    def build(self) -> None:
        self.num_updates = 0
        self.num_policy_steps = 0
        self.value_normalizers: dict[str, tuple[ValueNormalizer, ValueNormalizer]] = {}
        self.reference_modules: dict[str, Any] = {}
        # Stage override of config.reflection_coeff (the pipeline turns the reflection loss on in stage 3).
        self.reflection_coeff: float | None = None
        super().build()
        for module_id in self.module.keys():  # noqa: SIM118 (MultiRLModule is not a Mapping)
            module = self.module[module_id].unwrapped()
            if not self.rl_module_is_compatible(module):
                raise TypeError(
                    f"AAAC needs RLModules implementing TwoCriticAPI; module {module_id!r} is {type(module)}."
                )
            check_parameter_groups(cast(TwoCriticAPI, module))
        if self._learner_connector is not None and self.config.add_default_connectors_to_learner_pipeline:
            # Each episode chunk gets one artificial step whose value is the bootstrap value (as in PPO).
            self._learner_connector.prepend(AddOneTsToEpisodesAndTruncate())
            self._learner_connector.append(
                TwoCriticAdvantages(config=self.config, value_normalizers=self.value_normalizers_of)
            )

    def value_normalizers_of(self, module_id: str) -> tuple[ValueNormalizer, ValueNormalizer]:
        """The ``(reward, risk)`` critics' target normalisers of a module (created on first use)."""
        if module_id not in self.value_normalizers:
            cfg: Any = self.config.get_config_for_module(module_id)
            self.value_normalizers[module_id] = (
                ValueNormalizer(cfg.value_norm_decay),
                ValueNormalizer(cfg.value_norm_decay),
            )
        return self.value_normalizers[module_id]

    def policy_terms_on(self, config: Any) -> bool:
        """Whether the critic warm-up is over (the policy, KL and entropy terms are in the loss)."""
        return self.num_updates >= config.critic_warmup_updates

    def current_beta(self, config: Any) -> float:
        """``β_t = β_0 · beta_decay^t`` with ``t = self.num_policy_steps``; 0 when ``use_beta_kl`` is off.

        Args:
            config: The module's ``AAACConfig``.

        Returns:
            The KL coefficient of the next minibatch update.
        """
        if not config.use_beta_kl:
            return 0.0
        return beta_schedule(config.beta_0, self.num_policy_steps, config.beta_decay)

    def set_reference_policy(self) -> None:
        """Freezes a copy of every module's current weights as ``π_ref`` for the anchor KL term."""
        self.reference_modules = {}
        for module_id in self.module.keys():  # noqa: SIM118 (MultiRLModule is not a Mapping)
            self.reference_modules[module_id] = self._frozen_copy(module_id, None)

    def _frozen_copy(self, module_id: str, state: StateDict | None) -> Any:
        ref: Any = copy.deepcopy(self.module[module_id].unwrapped())  # a torch RLModule (AAAC is torch-only)
        if state is not None:
            ref.set_state(state)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    @override(Learner)
    def apply_gradients(self, gradients_dict: ParamDict) -> None:
        super().apply_gradients(gradients_dict)  # type: ignore[safe-super]
        if self.policy_terms_on(self.config):
            self.num_policy_steps += 1

    @OverrideToImplementCustomLogic_CallToSuperRecommended
    @override(Learner)
    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        self.num_updates += 1

    @override(Learner)
    def get_state(
        self,
        components: str | Collection[str] | None = None,
        *,
        not_components: str | Collection[str] | None = None,
        **kwargs: Any,
    ) -> StateDict:
        state = super().get_state(components, not_components=not_components, **kwargs)
        state[keys.AAAC_NUM_UPDATES] = self.num_updates
        state[keys.AAAC_NUM_POLICY_STEPS] = self.num_policy_steps
        state[keys.AAAC_VALUE_NORMALIZERS] = {
            mid: [n.get_state() for n in pair] for mid, pair in self.value_normalizers.items()
        }
        if self.reference_modules:
            state[keys.AAAC_REFERENCE_POLICY] = {
                mid: ref.get_state(inference_only=True) for mid, ref in self.reference_modules.items()
            }
        return state

    @override(Learner)
    def set_state(self, state: StateDict) -> None:
        super().set_state(state)
        # torch's Optimizer.load_state_dict restores the saved learning rate, and RLlib re-applies the config's
        # schedule only after the next update. Re-apply it now, so that a checkpoint restored under a different
        # `lr` (a sweep trial starting from a shared imitation checkpoint) trains at that lr from its first update.
        for optimizer, schedule in self._optimizer_lr_schedules.items():
            self._set_optimizer_lr(optimizer, lr=float(schedule.get_current_value()))
        if keys.AAAC_NUM_UPDATES in state:
            self.num_updates = int(state[keys.AAAC_NUM_UPDATES])
        if keys.AAAC_NUM_POLICY_STEPS in state:
            self.num_policy_steps = int(state[keys.AAAC_NUM_POLICY_STEPS])
        for mid, pair_state in state.get(keys.AAAC_VALUE_NORMALIZERS, {}).items():
            for normalizer, s in zip(self.value_normalizers_of(mid), pair_state, strict=True):
                normalizer.set_state(s)
        if keys.AAAC_REFERENCE_POLICY in state:
            self.reference_modules = {
                mid: self._frozen_copy(mid, s) for mid, s in state[keys.AAAC_REFERENCE_POLICY].items()
            }

    @classmethod
    @override(Learner)
    def rl_module_required_apis(cls) -> list[type]:
        return [TwoCriticAPI]
