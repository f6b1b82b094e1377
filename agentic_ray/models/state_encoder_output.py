"""What every state encoder returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["StateEncoderOutput"]


@dataclass
class StateEncoderOutput:
    """Output of a state encoder over a batch of ``B`` graph observations.

    Attributes:
        state: ``(B, H)`` fixed-size state embedding (includes the ``reflection`` obs input).
        nodes: ``{node_type: (B, N_nt, H)}`` per-node embeddings, for pointer heads (padded rows included).
        node_masks: ``{node_type: (B, N_nt)}`` bool, True for real nodes.
        debug: Optional diagnostics (empty unless asked for), e.g. ``{"attention": {...}, "gates": {...}}``.
        reflection_free_state: ``(B, H)`` the state computed with a zero reflection input (what the reflection
            head reads with ``reflection_source="predicted"``); None when the encoder was not asked for it.
        skill_prior: ``(B, K)`` added to the skill logits (and to each prototype's skill): the fix the reflection
            input proposes (:attr:`~agentic_ray.models.aaac_model.AAACModel.fix_prior`); None without one.
        modality_gates: ``{"modality/<node type>/<modality>": (B, N_nt)}`` the per-modality gates of the
            multimodal input projections (NaN where a node has not revealed that modality); empty without one.
        task: ``(B, H)`` the request's task text through the text encoder (the multimodal fusion's query); None
            when the encoder has none.
    """

    state: torch.Tensor
    nodes: dict[str, torch.Tensor]
    node_masks: dict[str, torch.Tensor]
    debug: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    reflection_free_state: torch.Tensor | None = None
    skill_prior: torch.Tensor | None = None
    modality_gates: dict[str, torch.Tensor] = field(default_factory=dict)
    task: torch.Tensor | None = None
