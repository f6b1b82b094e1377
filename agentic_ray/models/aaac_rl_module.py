"""RLlib adapter: a ``TorchRLModule`` around the plain-torch :class:`AAACModel`.

``model_config`` keys (a plain dict; RLlib's own ``DefaultModelConfig`` keys such as ``vf_share_layers`` are
ignored, anything else unknown is an error):

* ``graph_spec`` (:class:`GraphSpec`, required) and ``action_layout`` (:class:`ActionLayout`, required);
* every field of :class:`AAACModelConfig` (``encoder: "gnn" | "flat"``, ``hidden_dim``, ``num_layers``,
  ``num_heads``, ``ffn_mult``, ``separate_critic_encoders``, ``reflection_source: "predicted" | "oracle_env"``,
  ``debug_outputs``, ``device``, ...).

Reflection: ``forward_train`` also returns ``REFLECTION_EMBEDDINGS``, the reflection head's input (state and
failure evidence), for :func:`agentic_ray.models.reflection.reflection_loss`. The Correction-Uplift ablation is
``module.reflection_enabled = False`` (or the forward kwarg ``reflection_enabled=False``): the diagnosis is
withheld whatever ``reflection_source`` (the failure evidence stays); ``evidence_enabled=False`` withholds the
evidence and the diagnosis (the evidence-uplift ablation). ``forward_train(..., reflection_dropout=p,
evidence_dropout=q)`` zeroes them on random shares of the rows (imitation trains the policy with and without).

The action space decides the mode: ``ActionLayout.action_space()`` → structured skill/argument actions;
``ActionLayout.prototype_action_space()`` → prototype mode (a prototype, then its skill's entity arguments). Both
act through :class:`SkillArgumentDistribution` (over the layout, or over ``layout.prototype_layout()``). Masks are
read inside the module's own forward from ``batch[Columns.OBS]``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchDistribution
from ray.rllib.core.rl_module.apis.inference_only_api import InferenceOnlyAPI
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.utils.annotations import override

from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI
from agentic_ray.graph_spec import ActionLayout, GraphSpec
from agentic_ray.keys import MODALITY_GATE_MEANS
from agentic_ray.models.aaac_model import AAACModel, AAACModelConfig
from agentic_ray.models.inference_policy import InferencePolicy
from agentic_ray.models.multimodal_node_encoder import gate_mean_vector
from agentic_ray.models.skill_argument_distribution import skill_argument_distribution_cls
from agentic_ray.models.state_encoder_output import StateEncoderOutput

__all__ = [
    "DEBUG_OUTPUTS",
    "EVIDENCE_DROPOUT",
    "EVIDENCE_ENABLED",
    "REFLECTION_DROPOUT",
    "REFLECTION_EMBEDDINGS",
    "REFLECTION_ENABLED",
    "AAACRLModule",
    "parse_model_config",
]

DEBUG_OUTPUTS = "debug_outputs"
"""Key of the debug dict in inference outputs, and the forward kwarg that asks for it."""

REFLECTION_EMBEDDINGS = "reflection_embeddings"
"""``forward_train`` output: the reflection head's input (:meth:`AAACModel.reflection_input`: the failure evidence,
after the state when the head reads it)."""

REFLECTION_ENABLED = "reflection_enabled"
"""Forward kwarg: False zeroes the reflection input for this call (the CU ablation)."""

REFLECTION_DROPOUT = "reflection_dropout"
"""``forward_train`` kwarg: share of rows whose reflection input is zeroed at random (imitation only)."""

EVIDENCE_ENABLED = "evidence_enabled"
"""Forward kwarg: False withholds the failure evidence, and with it the diagnosis (the evidence-uplift ablation)."""

EVIDENCE_DROPOUT = "evidence_dropout"
"""``forward_train`` kwarg: share of rows whose failure evidence (and diagnosis) is zeroed at random."""

_RLLIB_MODEL_KEYS = frozenset(f.name for f in dataclasses.fields(DefaultModelConfig)) | {"vf_share_layers"}


def parse_model_config(model_config: dict[str, Any]) -> tuple[GraphSpec, ActionLayout, AAACModelConfig]:
    """Splits an RLlib ``model_config`` dict into spec, layout and validated sizes.

    Raises:
        ValueError: If ``graph_spec``/``action_layout`` are missing or of the wrong type.
        pydantic.ValidationError: On an unknown key or a bad value.
    """
    spec = model_config.get("graph_spec")
    layout = model_config.get("action_layout")
    if not isinstance(spec, GraphSpec) or not isinstance(layout, ActionLayout):
        raise ValueError("model_config needs 'graph_spec' (GraphSpec) and 'action_layout' (ActionLayout)")
    sizes = {
        k: v
        for k, v in model_config.items()
        if k not in ("graph_spec", "action_layout") and k not in _RLLIB_MODEL_KEYS
    }
    return spec, layout, AAACModelConfig(**sizes)


class AAACRLModule(TorchRLModule, TwoCriticAPI, InferenceOnlyAPI):
    """Actor (structured or prototype actions), reward critic, risk critic and reflection head.

    ``compute_values`` is the reward critic (RLlib's ``ValueFunctionAPI``); ``compute_risk_values`` the risk
    critic; on EnvRunners (``inference_only``) the critics and critic encoders are not built, nor the reflection
    head unless ``reflection_source="predicted"`` (the policy then needs it to act).
    """

    @override(RLModule)
    def setup(self) -> None:
        model_config = self.model_config
        if not isinstance(model_config, dict):
            raise ValueError(f"AAACRLModule needs a dict model_config, got {type(model_config).__name__}")
        self.graph_spec, self.action_layout, self.aaac_config = parse_model_config(model_config)
        space, layout = self.action_space, self.action_layout
        structured = space == layout.action_space()
        prototype = bool(layout.prototype_skills) and space == layout.prototype_action_space()
        if structured == prototype:
            raise ValueError(
                f"AAACRLModule needs the layout's structured action space or its prototype action space "
                f"({'both match' if structured else 'got ' + str(space)})"
            )
        self.prototype_mode = prototype
        self.model = AAACModel(
            self.graph_spec,
            self.action_layout,
            self.aaac_config,
            build_critics=not self.inference_only,
            prototype_mode=self.prototype_mode,
        )
        self.aaac_dist_cls: type[TorchDistribution] = skill_argument_distribution_cls(
            self.model.policy_heads.packed
        )
        self.action_dist_cls = self.aaac_dist_cls
        self.to(self.aaac_config.resolved_device())
        if self.inference_only:
            # An EnvRunner's copy never trains (its weights come from the learner). RLlib builds it in train mode
            # and its forward_exploration switches to eval and back around every call, so the copy stayed in
            # train mode for good: each sampled step walked every submodule twice and ran the training path.
            self.eval()

    # -- forward passes ---------------------------------------------------------------------------------
    def _obs(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """``batch[OBS]`` on this module's device (EnvRunner connectors may hand over CPU tensors)."""
        device = next(self.parameters()).device
        return {
            k: v if v.device == device else v.to(device, non_blocking=True)
            for k, v in batch[Columns.OBS].items()
        }

    @property
    def reflection_enabled(self) -> bool:
        """The CU ablation switch (see :attr:`AAACModel.reflection_enabled`); not part of the module state."""
        return self.model.reflection_enabled

    @reflection_enabled.setter
    def reflection_enabled(self, value: bool) -> None:
        self.model.reflection_enabled = bool(value)

    @property
    def evidence_enabled(self) -> bool:
        """The evidence-uplift ablation switch (see :attr:`AAACModel.evidence_enabled`); not module state."""
        return self.model.evidence_enabled

    @evidence_enabled.setter
    def evidence_enabled(self, value: bool) -> None:
        self.model.evidence_enabled = bool(value)

    def _policy_outputs(
        self, obs: dict[str, torch.Tensor], return_debug: bool, kwargs: dict[str, Any], train: bool = False
    ) -> tuple[dict[str, Any], StateEncoderOutput]:
        enc = self.model.encode(
            obs,
            return_debug=return_debug,
            reflection_enabled=kwargs.get(REFLECTION_ENABLED),
            reflection_dropout=float(kwargs.get(REFLECTION_DROPOUT, 0.0)) if train else 0.0,
            evidence_enabled=kwargs.get(EVIDENCE_ENABLED),
            evidence_dropout=float(kwargs.get(EVIDENCE_DROPOUT, 0.0)) if train else 0.0,
        )
        logits = self.model.policy_logits(obs, enc)
        out: dict[str, Any] = {Columns.ACTION_DIST_INPUTS: logits["packed"]}
        if return_debug:
            out[DEBUG_OUTPUTS] = self.model.debug_outputs(enc, logits)
        return out, enc

    @override(TorchRLModule)
    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """TorchRLModule's, without its ``self.eval()`` on every call when the module is already in eval mode:
        that call walks all submodules (143 on the tiny config, 0.7 ms of CPU, about 7% of a batch-1 forward,
        measured), and it is the common case (EnvRunners, evaluation and serving all act in eval mode)."""
        if self.training:
            return super().forward_inference(batch, **kwargs)
        return self._forward_inference(batch, **kwargs)

    @override(TorchRLModule)
    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The logits to sample from. In eval mode (EnvRunners; the learner's frozen reference policy) through the
        inference path, as :meth:`forward_inference_fast` (the same logits within 1e-5,
        ``tests/unit/models/test_inference_policy.py``), returned as ordinary tensors (a clone made outside
        inference mode, so the learner may use the reference's logits in a loss); in train mode RLlib's (an eval
        forward of the training path)."""
        if self.training:
            return super().forward_exploration(batch, **kwargs)
        out = self.forward_inference_fast(batch, **kwargs)
        return {
            k: v.clone() if isinstance(v, torch.Tensor) and v.is_inference() else v for k, v in out.items()
        }

    def forward_inference_fast(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """:meth:`forward_inference` through the inference path (:class:`InferencePolicy`: the same logits in
        fewer, larger tensor operations, under ``torch.inference_mode``), what evaluation and serving act with.
        Falls back to :meth:`forward_inference` in train mode, when debug outputs are asked for, and for a model
        the inference path does not cover (:meth:`InferencePolicy.unsupported`)."""
        debug = bool(kwargs.get(DEBUG_OUTPUTS, self.aaac_config.debug_outputs))
        if self.training or debug or not InferencePolicy.supports(self.model):
            return self.forward_inference(batch, **kwargs)
        policy = InferencePolicy.for_model(self.model)
        with torch.inference_mode():
            out = policy(
                self._obs(batch),
                reflection=kwargs.get(REFLECTION_ENABLED),
                evidence=kwargs.get(EVIDENCE_ENABLED),
            )
        return {Columns.ACTION_DIST_INPUTS: out.packed}

    @override(RLModule)
    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Action logits; with ``debug_outputs`` (model_config flag or kwarg) also ``batch["debug_outputs"]``."""
        return_debug = bool(kwargs.get(DEBUG_OUTPUTS, self.aaac_config.debug_outputs))
        return self._policy_outputs(self._obs(batch), return_debug, kwargs)[0]

    @override(RLModule)
    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._policy_outputs(self._obs(batch), False, kwargs)[0]

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Action logits plus ``EMBEDDINGS`` = the policy encoder's ``(B, H)`` state, reused by the critics, and
        ``REFLECTION_EMBEDDINGS`` = the reflection head's input (for ``reflection_loss``)."""
        obs = self._obs(batch)
        out, enc = self._policy_outputs(obs, False, kwargs, train=True)
        out[Columns.EMBEDDINGS] = enc.state
        out[REFLECTION_EMBEDDINGS] = self.model.reflection_input(obs, enc)
        if enc.modality_gates:
            out[MODALITY_GATE_MEANS] = gate_mean_vector(enc.modality_gates, enc.node_masks)
        return out

    # -- critics (TwoCriticAPI / ValueFunctionAPI) ------------------------------------------------------
    def _critic_state(self, which: str, batch: dict[str, Any], embeddings: Any | None) -> torch.Tensor:
        if embeddings is not None and not self.aaac_config.separate_critic_encoders:
            return embeddings
        obs = self._obs(batch)
        if self.aaac_config.separate_critic_encoders:
            return self.model.critic_encoder(which)(obs).state
        return self.model.encode(obs).state

    @override(TwoCriticAPI)
    def compute_both_values(
        self, batch: dict[str, Any], embeddings: Any | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Both critics, running each encoder they read only once (see :meth:`AAACModel.critic_values`)."""
        if embeddings is not None and not self.aaac_config.separate_critic_encoders:
            return self.model.reward_critic(embeddings).squeeze(-1), self.model.risk_critic(
                embeddings
            ).squeeze(-1)
        return self.model.critic_values(self._obs(batch))

    @override(TwoCriticAPI)
    def compute_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        """Reward critic, ``(B,)``; ``embeddings`` is ``forward_train``'s ``EMBEDDINGS`` (shared trunk only)."""
        return self.model.reward_critic(self._critic_state("reward_critic", batch, embeddings)).squeeze(-1)

    @override(TwoCriticAPI)
    def compute_risk_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        """Risk critic, ``(B,)``."""
        return self.model.risk_critic(self._critic_state("risk_critic", batch, embeddings)).squeeze(-1)

    def compute_reflection_logits(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        """``(B, len(ROOT_CAUSES))`` root-cause logits of the reflection head; ``embeddings`` is
        ``forward_train``'s ``REFLECTION_EMBEDDINGS`` (its full input: state and evidence)."""
        if embeddings is not None and self.model.reflection_head is not None:
            return self.model.reflection_head(embeddings)
        return self.model.reflection_logits(self._obs(batch))

    # -- parameter groups and inference-only --------------------------------------------------------------
    @override(TwoCriticAPI)
    def policy_parameters(self) -> list[torch.nn.Parameter]:
        """Shared encoder, action heads and reflection head."""
        return self.model.policy_parameters()

    @override(TwoCriticAPI)
    def reward_critic_parameters(self) -> list[torch.nn.Parameter]:
        return self.model.reward_critic_parameters()

    @override(TwoCriticAPI)
    def risk_critic_parameters(self) -> list[torch.nn.Parameter]:
        return self.model.risk_critic_parameters()

    @override(InferenceOnlyAPI)
    def get_non_inference_attributes(self) -> list[str]:
        """Critics and critic encoders; also the reflection head unless ``reflection_source="predicted"``
        (then the EnvRunner's policy needs it to act)."""
        return [f"model.{name}" for name in self.model.non_inference_attributes()]

    @override(TorchRLModule)
    def get_inference_action_dist_cls(self) -> type[TorchDistribution]:
        return self.aaac_dist_cls

    @override(TorchRLModule)
    def get_exploration_action_dist_cls(self) -> type[TorchDistribution]:
        return self.aaac_dist_cls

    @override(TorchRLModule)
    def get_train_action_dist_cls(self) -> type[TorchDistribution]:
        return self.aaac_dist_cls
