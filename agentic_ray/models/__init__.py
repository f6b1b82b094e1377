"""State encoders, policy heads, critics and the AAAC RLModule.

Names exported here are plain torch / torch-geometric and are loaded lazily (so e.g. the GPU benchmark can use
the encoder where pydantic, gymnasium or Ray are not installed). The RLlib pieces live in
``agentic_ray.models.aaac_rl_module`` (``AAACRLModule``) and ``agentic_ray.models.skill_argument_distribution``
(``SkillArgumentDistribution``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AAACModel": "aaac_model",
    "AAACModelConfig": "aaac_model",
    "build_state_encoder": "aaac_model",
    "default_device": "aaac_model",
    "BatchedHeteroGraph": "batched_hetero_graph",
    "HeteroGraphLayout": "batched_hetero_graph",
    "MessageRelation": "batched_hetero_graph",
    "FlatMLPEncoder": "flat_mlp_encoder",
    "GatedHeteroAttentionLayer": "gated_hetero_attention_layer",
    "HeteroEdgeIndex": "hetero_edge_index",
    "HeteroGNNEncoder": "hetero_gnn_encoder",
    "PyGGATv2HeteroLayer": "pyg_gatv2_hetero_layer",
    "RelationGatedLayer": "relation_gated_layer",
    "stack_observations": "obs_batching",
    "reflection_loss": "reflection",
    "PackedActionLayout": "packed_action_layout",
    "PackedActionLogits": "packed_action_layout",
    "SkillArgumentHeads": "skill_argument_heads",
    "StateEncoderOutput": "state_encoder_output",
}

__all__ = [
    "AAACModel",
    "AAACModelConfig",
    "BatchedHeteroGraph",
    "FlatMLPEncoder",
    "GatedHeteroAttentionLayer",
    "HeteroEdgeIndex",
    "HeteroGNNEncoder",
    "HeteroGraphLayout",
    "MessageRelation",
    "PackedActionLayout",
    "PackedActionLogits",
    "PyGGATv2HeteroLayer",
    "RelationGatedLayer",
    "SkillArgumentHeads",
    "StateEncoderOutput",
    "build_state_encoder",
    "default_device",
    "reflection_loss",
    "stack_observations",
]

if TYPE_CHECKING:
    from agentic_ray.models.aaac_model import AAACModel, AAACModelConfig, build_state_encoder, default_device
    from agentic_ray.models.batched_hetero_graph import BatchedHeteroGraph, HeteroGraphLayout, MessageRelation
    from agentic_ray.models.flat_mlp_encoder import FlatMLPEncoder
    from agentic_ray.models.gated_hetero_attention_layer import GatedHeteroAttentionLayer
    from agentic_ray.models.hetero_edge_index import HeteroEdgeIndex
    from agentic_ray.models.hetero_gnn_encoder import HeteroGNNEncoder
    from agentic_ray.models.obs_batching import stack_observations
    from agentic_ray.models.packed_action_layout import PackedActionLayout, PackedActionLogits
    from agentic_ray.models.pyg_gatv2_hetero_layer import PyGGATv2HeteroLayer
    from agentic_ray.models.reflection import reflection_loss
    from agentic_ray.models.relation_gated_layer import RelationGatedLayer
    from agentic_ray.models.skill_argument_heads import SkillArgumentHeads
    from agentic_ray.models.state_encoder_output import StateEncoderOutput


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"agentic_ray.models.{_EXPORTS[name]}"), name)
