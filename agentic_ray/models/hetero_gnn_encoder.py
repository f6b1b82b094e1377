"""Heterogeneous-graph state encoder: per-type input projections, gated attention layers, masked readout.

A node type whose features hold image or text blocks (``GraphSpec.modalities``) gets a
:class:`~agentic_ray.models.multimodal_node_encoder.MultimodalNodeEncoder` as its input projection (per-modality
sub-encoders, gated cross-attention fusion with the task text as query) unless ``modality_fusion="flat"``, which
keeps the one ``Linear`` over the concatenated columns (seed 000's flattening, for the comparison)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from agentic_ray.graph_spec import GraphSpec
from agentic_ray.models.batched_hetero_graph import BatchedHeteroGraph, HeteroGraphLayout, node_mask
from agentic_ray.models.gated_hetero_attention_layer import GatedHeteroAttentionLayer
from agentic_ray.models.hetero_edge_index import HeteroEdgeIndex
from agentic_ray.models.multimodal_node_encoder import MultimodalNodeEncoder, TaskQuery, TextTokenEncoder
from agentic_ray.models.pyg_gatv2_hetero_layer import PyGGATv2HeteroLayer
from agentic_ray.models.reflection import ReflectionFn, readout_with_reflection
from agentic_ray.models.state_encoder_output import StateEncoderOutput

__all__ = ["HeteroGNNEncoder", "masked_mean_max"]


def masked_mean_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean and max over real nodes, zeros for a row without any.

    Args:
        x: ``(B, N, H)``.
        mask: ``(B, N)`` bool.

    Returns:
        ``(B, 2H)``: ``[mean ‖ max]``.
    """
    m = mask.unsqueeze(-1)
    count = m.sum(1).clamp(min=1).to(x.dtype)
    mean = (x * m).sum(1) / count
    maxed = x.masked_fill(~m, torch.finfo(x.dtype).min).amax(1)
    maxed = torch.where(mask.any(1, keepdim=True), maxed, torch.zeros_like(maxed))
    return torch.cat([mean, maxed], dim=-1)


class HeteroGNNEncoder(nn.Module):
    """Encodes a batch of padded graph observations into a state embedding and per-node embeddings.

    Built from the spec's metadata; every size is explicit (no lazy modules).

    Args:
        spec: Graph spec (node types, maxima, feature widths, relations).
        hidden_dim: ``H``.
        num_layers: Message-passing layers (2-3 recommended).
        num_heads: Attention heads per relation.
        ffn_mult: Feed-forward width multiplier inside each layer (0 disables).
        add_reverse_relations: Add ``dst → src`` relations so every node type receives messages.
        compact_edges: Drop padded/invalid edge slots before message passing (same result, about half the
            per-edge work on the e-commerce env, one host sync per batch). None = only when the batch is on the
            CPU (CUDA keeps static shapes and no host sync). Fused layers only (PyG's always drop them).
        gnn_layer: ``"fused"``: :class:`GatedHeteroAttentionLayer`, all relations in one hand-written
            gather/softmax/scatter; ``"pyg"``: :class:`PyGGATv2HeteroLayer`, ``HeteroConv(GATv2Conv)``. Same
            attention and messages (what differs: :mod:`pyg_gatv2_hetero_layer`; the measured speed and why
            ``"fused"`` is the default: :class:`GatedHeteroAttentionLayer`).
        reflection_dim: Width of the readout's failure input, ``obs["reflection"]`` (default: the spec's root
            causes; the AAAC policy feeds the diagnosis and the failure evidence there).
        modality_fusion: ``"gated"``: node types with image or text blocks are encoded per modality and fused
            (:class:`MultimodalNodeEncoder`); ``"flat"``: one ``Linear`` over all their columns. No effect on a
            spec without modality blocks.
        task_output: Also return the task text's encoding (:attr:`StateEncoderOutput.task`); with
            ``modality_fusion="flat"`` it gets a text encoder of its own, which nothing else reads. Needs a spec
            with a task text.
    """

    def __init__(
        self,
        spec: GraphSpec,
        hidden_dim: int = 128,
        num_layers: int = 3,
        num_heads: int = 4,
        ffn_mult: int = 2,
        add_reverse_relations: bool = True,
        compact_edges: bool | None = None,
        gnn_layer: Literal["fused", "pyg"] = "fused",
        reflection_dim: int | None = None,
        modality_fusion: Literal["gated", "flat"] = "gated",
        task_output: bool = False,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.compact_edges = compact_edges
        self.gnn_layer = gnn_layer
        self.hidden_dim = hidden_dim
        self.layout = HeteroGraphLayout(spec, add_reverse_relations)
        fused = {b.node_type for b in spec.modalities} if modality_fusion == "gated" else set()
        self.input_proj = nn.ModuleDict(
            {
                nt: nn.Sequential(nn.Linear(spec.feat_dims[nt], hidden_dim), nn.LayerNorm(hidden_dim))
                for nt in spec.node_types
                if nt not in fused
            }
        )
        self.multimodal = nn.ModuleDict()
        self.task_query: TaskQuery | None = None
        if fused:
            text = TextTokenEncoder(hidden_dim)
            self.task_query = TaskQuery(spec, text, hidden_dim)
            self.multimodal.update(
                {nt: MultimodalNodeEncoder(spec, nt, hidden_dim, text, num_heads) for nt in sorted(fused)}
            )
        if task_output and spec.task_text is None:
            raise ValueError("task_output needs a spec with a task text")
        if task_output and self.task_query is None:
            self.task_query = TaskQuery(spec, TextTokenEncoder(hidden_dim), hidden_dim)
        layer_cls: type[GatedHeteroAttentionLayer] | type[PyGGATv2HeteroLayer] = (
            PyGGATv2HeteroLayer if gnn_layer == "pyg" else GatedHeteroAttentionLayer
        )
        self.layers = nn.ModuleList(
            layer_cls(self.layout, hidden_dim, num_heads, ffn_mult) for _ in range(num_layers)
        )
        readout_in = 2 * hidden_dim * len(spec.node_types) + (reflection_dim or len(spec.root_causes))
        self.readout = nn.Sequential(
            nn.Linear(readout_in, hidden_dim),
            nn.GELU(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.LayerNorm(hidden_dim),
        )

    def forward(
        self,
        obs: dict[str, torch.Tensor],
        return_debug: bool = False,
        reflection_fn: ReflectionFn | None = None,
    ) -> StateEncoderOutput:
        """Encodes a batch.

        Args:
            obs: Batched observation tensors (see ``graph_spec``): ``{nt}_x (B, N, F)``, ``{nt}_mask (B, N)``,
                ``{rk}_ei (B, 2, E)``, ``{rk}_mask (B, E)``, ``reflection (B, C)``.
            return_debug: Also return attention weights and gate values per layer and relation.
            reflection_fn: If given, the readout's reflection input is ``reflection_fn(reflection_free_state)``
                instead of ``obs["reflection"]`` (see :mod:`agentic_ray.models.reflection`).

        Returns:
            ``StateEncoderOutput`` with ``state (B, H)`` and ``nodes {nt: (B, N_nt, H)}``; ``debug`` holds
            ``{"attention": {"layer{l}/{rel}": (B, E_r, heads)}, "gates": {"layer{l}/{rel}": (B, N_dst)}}``.
        """
        first = obs[f"{self.spec.node_types[0]}_mask"]
        graph: BatchedHeteroGraph | HeteroEdgeIndex
        if self.gnn_layer == "pyg":
            graph = HeteroEdgeIndex.from_padded(obs, self.layout)
        else:
            compact = first.device.type == "cpu" if self.compact_edges is None else self.compact_edges
            graph = BatchedHeteroGraph.from_padded(obs, self.layout, compact=compact)
        masks = {nt: node_mask(obs, nt) for nt in self.spec.node_types}
        h = {
            nt: self.input_proj[nt](obs[f"{nt}_x"].float().reshape(-1, self.spec.feat_dims[nt]))
            for nt in self.spec.node_types
            if nt in self.input_proj
        }
        modality_gates: dict[str, torch.Tensor] = {}
        query = None
        if self.task_query is not None:
            query = self.task_query(obs, first.shape[0])
            for nt, enc in self.multimodal.items():
                h[nt], gates = enc(obs[f"{nt}_x"], query)
                modality_gates.update({f"modality/{nt}/{k}": v for k, v in gates.items()})
        h = {nt: h[nt] for nt in self.spec.node_types}  # the layers read the types in spec order
        debug: dict[str, dict[str, torch.Tensor]] = {"attention": {}, "gates": {}} if return_debug else {}
        if return_debug:
            debug["gates"].update(modality_gates)
        for i, layer in enumerate(self.layers):
            h, layer_debug = layer(h, graph, return_debug)
            for kind, per_rel in layer_debug.items():
                debug[kind].update({f"layer{i}/{k}": v for k, v in per_rel.items()})
        b = graph.batch_size
        nodes = {nt: h[nt].view(b, self.spec.max_nodes[nt], self.hidden_dim) for nt in self.spec.node_types}
        pooled = [masked_mean_max(nodes[nt], masks[nt]) for nt in self.spec.node_types]
        state, free = readout_with_reflection(self.readout, pooled, obs["reflection"].float(), reflection_fn)
        return StateEncoderOutput(
            state=state,
            nodes=nodes,
            node_masks=masks,
            debug=debug,
            reflection_free_state=free,
            modality_gates=modality_gates,
            task=query,
        )
