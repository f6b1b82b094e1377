"""Reflection: the root-cause head (the reflection module), its input to the policy and its loss.

Three observation entries are involved (see :mod:`agentic_ray.graph_spec`):

* ``failure_evidence``: what a caller sees of the last step when it failed (the result-code class, whether an
  entity argument was one the agent never learned, ..., the failed skill); agent-observable, built by the env and
  by Serve with the same function (:mod:`agentic_ray.envs.failure_evidence`). The reflection head's input (by
  default the only one; ``reflection_head_input="evidence_and_state"`` adds the reflection-free state). It never
  enters the policy's state directly: the policy gets only the head's diagnosis, so zeroing the reflection input
  (the CU ablation) leaves the policy without it.
* ``reflection``: the env's rule-based root cause of the last failed step (one-hot; zeros without a failure).
  Privileged (it reads the world's truth), so it is the head's training *label*; the policy reads it only with
  ``reflection_source="oracle_env"``.

The model feeds a reflection vector to the state readout (the last input of the readout's first ``Linear``):

* ``reflection_source="oracle_env"``: the env's one-hot itself (the reflection head reads the resulting state and the
  evidence);
* ``reflection_source="predicted"``: the reflection head predicts the root cause from the failure evidence (and,
  with ``reflection_head_input="evidence_and_state"``, the state computed with a ZERO reflection vector; no label
  leak either way), and the readout then gets ``softmax(logits).detach() · failed`` with ``failed`` = the
  evidence's ``failed`` flag (the last step failed).

:func:`readout_with_reflection` does the state-reading case without running the encoder twice: the reflection
enters only the readout's first layer, so ``W [x ‖ r] + b = (W_x x + b) + W_r r`` and only the (small) rest of
the readout runs twice. :func:`reflection_loss` is the cross-entropy the learner adds to the policy loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from agentic_ray.graph_spec import EVIDENCE_FLAGS

__all__ = ["ReflectionFn", "failed_last_step", "readout_with_reflection", "reflection_loss"]

ReflectionFn = Callable[[torch.Tensor], torch.Tensor]
"""Maps the reflection-free state ``(B, H)`` to the reflection input ``(B, C)`` of the readout."""


FAILED = EVIDENCE_FLAGS.index("failed")


def failed_last_step(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(B,)`` bool: the last step failed (the ``failed`` flag of ``failure_evidence``, agent-observable)."""
    return obs["failure_evidence"][..., FAILED] > 0


def readout_with_reflection(
    readout: nn.Sequential,
    features: torch.Tensor | list[torch.Tensor],
    reflection: torch.Tensor | None = None,
    reflection_fn: ReflectionFn | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Runs ``readout([features ‖ reflection])``; the reflection is the last ``C`` inputs (the readout's
    input width minus the features').

    Args:
        readout: ``nn.Sequential`` whose first module is a ``Linear`` over ``[features ‖ reflection]``.
        features: ``(B, D)`` everything but the reflection vector, or the parts to concatenate into it.
        reflection: ``(B, C)`` reflection input (used when ``reflection_fn`` is None).
        reflection_fn: Computes the reflection input from the reflection-free state (the readout with a zero
            reflection vector).

    Returns:
        ``(state, reflection_free_state)``; the second is None without ``reflection_fn``.
    """
    if reflection_fn is None:
        if reflection is None:
            raise ValueError("readout_with_reflection needs reflection or reflection_fn")
        parts = list(features) if isinstance(features, list) else [features]
        return readout(torch.cat([*parts, reflection.to(parts[0].dtype)], dim=-1)), None
    if isinstance(features, list):
        features = torch.cat(features, dim=-1)
    first, rest = readout[0], readout[1:]
    if not isinstance(first, nn.Linear):
        raise TypeError(f"the readout must start with nn.Linear, got {type(first).__name__}")
    c = first.in_features - features.shape[-1]
    pre = F.linear(features, first.weight[:, :-c], first.bias)
    free = rest(pre)
    refl = reflection_fn(free)
    return rest(pre + F.linear(refl.to(pre.dtype), first.weight[:, -c:])), free


def _model_of(module_or_model: Any) -> Any:
    """The :class:`AAACModel` of an ``AAACRLModule`` (or the model itself)."""
    model = getattr(module_or_model, "model", module_or_model)
    if getattr(model, "reflection_head", None) is None:
        raise ValueError(
            "this model has no reflection head (an inference-only model with reflection_source='oracle_env')"
        )
    return model


def reflection_loss(
    module_or_model: Any,
    obs_batch: dict[str, torch.Tensor],
    embeddings: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    train_encoder: bool = True,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Cross-entropy of the reflection head against the env's root cause, on rows that carry a label.

    Args:
        module_or_model: An ``AAACRLModule`` or an ``AAACModel`` with a reflection head.
        obs_batch: Batched observations; labels are ``argmax(obs["reflection"])`` on rows where it is non-zero.
        embeddings: The reflection head's input if already computed (``forward_train``'s
            ``REFLECTION_EMBEDDINGS``); else it is built from ``obs_batch`` (the policy encoder runs only when the
            head reads the state).
        mask: Optional ``(B,)`` bool row mask (e.g. RLlib's ``LOSS_MASK``), and-ed with the label mask.
        train_encoder: Let the gradient reach the encoder the head reads (the policy encoder), when it reads
            the state (``reflection_head_input="evidence_and_state"``). False trains the head alone, on detached
            features. A head on the evidence alone reads an observation: the loss trains the head only.

    Returns:
        ``(loss, stats)``: ``loss`` is the mean cross-entropy over labelled rows (an exact, differentiable 0
        when there are none); ``stats`` holds detached ``reflection_loss``, ``reflection_accuracy`` and
        ``reflection_labelled_rows``.
    """
    model = _model_of(module_or_model)
    if embeddings is None:
        embeddings = model.reflection_input(obs_batch)
    if not train_encoder:
        embeddings = embeddings.detach()
    logits = model.reflection_head(embeddings)
    target_vec = obs_batch["reflection"].to(logits.device)
    labelled = target_vec.sum(-1) > 0
    if mask is not None:
        labelled = labelled & mask.to(labelled.device).bool()
    target = target_vec.argmax(-1)
    ce = F.cross_entropy(logits.float(), target, reduction="none")
    count = labelled.sum()
    denom = count.clamp(min=1).to(ce.dtype)
    loss = torch.where(labelled, ce, torch.zeros_like(ce)).sum() / denom
    correct = (logits.argmax(-1) == target) & labelled
    stats = {
        "reflection_loss": loss.detach(),
        "reflection_accuracy": correct.sum().to(ce.dtype) / denom,
        "reflection_labelled_rows": count.detach(),
    }
    return loss, stats
