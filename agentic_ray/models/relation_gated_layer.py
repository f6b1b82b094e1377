"""What every gated heterogeneous attention layer does after aggregating messages per relation (seed 002).

A layer first aggregates, for every destination node ``i`` and each relation ``r`` into its type, one message
``m_r,i`` (attention-weighted, see the subclasses), then (this module)::

    g_r,i  = σ(w_r · h_i + u_r · m_r,i + b_r)             gate: how much node i listens to relation r
    h_i'   = LN(h_i + Σ_r W_o,r (g_r,i · m_r,i))          output projection, residual
    h_i''  = LN(h_i' + FFN(h_i'))

Subclasses implement :meth:`RelationGatedLayer.aggregate`: the hand-written fused one
(:mod:`gated_hetero_attention_layer`) and PyG's ``HeteroConv(GATv2Conv)`` (:mod:`pyg_gatv2_hetero_layer`). The
gate, output projection, norms and FFN are this class's parameters, so they have the same names in both and a
state dict carries over between them.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Generic, TypeVar

import torch
from torch import nn

from agentic_ray.models.batched_hetero_graph import HeteroGraphLayout

__all__ = ["RelationGatedLayer"]

GraphT = TypeVar("GraphT")


class RelationGatedLayer(nn.Module, Generic[GraphT]):
    """Per-relation gate, output projection, residual + LayerNorm and FFN over aggregated relation messages.

    Args:
        layout: Static graph layout (node types, message relations incl. reverse ones).
        hidden_dim: ``H``, node embedding width (divisible by ``num_heads``).
        num_heads: ``A`` attention heads.
        ffn_mult: Width multiplier of the per-type feed-forward block; 0 disables it.
    """

    def __init__(self, layout: HeteroGraphLayout, hidden_dim: int, num_heads: int, ffn_mult: int) -> None:
        super().__init__()
        if hidden_dim % num_heads:
            raise ValueError(f"hidden_dim {hidden_dim} is not divisible by num_heads {num_heads}")
        self.layout = layout
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        h = hidden_dim
        self.gate_node = nn.ModuleDict(
            {nt: nn.Linear(h, len(layout.in_relations[nt])) for nt in layout.dst_types}
        )
        self.gate_message = nn.ParameterDict(
            {nt: nn.Parameter(torch.zeros(len(layout.in_relations[nt]), h)) for nt in layout.dst_types}
        )
        self.out_proj = nn.ModuleDict(
            {nt: nn.Linear(len(layout.in_relations[nt]) * h, h) for nt in layout.dst_types}
        )
        self.message_norm = nn.ModuleDict({nt: nn.LayerNorm(h) for nt in layout.dst_types})
        self.ffn = nn.ModuleDict(
            {
                nt: nn.Sequential(nn.Linear(h, ffn_mult * h), nn.GELU(), nn.Linear(ffn_mult * h, h))
                for nt in layout.node_types
            }
            if ffn_mult > 0
            else {}
        )
        self.ffn_norm = nn.ModuleDict({nt: nn.LayerNorm(h) for nt in self.ffn})

    @abstractmethod
    def aggregate(
        self, h: dict[str, torch.Tensor], graph: GraphT, return_attention: bool = False
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The aggregated message of every relation into every destination node.

        Args:
            h: ``{node_type: (B·N_nt, H)}`` node embeddings.
            graph: This batch's edges, in the form the subclass reads.
            return_attention: Also return the attention weights.

        Returns:
            ``(messages, attention)``: ``messages[nt]`` is ``(B·N_nt, R_nt, H)`` for each destination type, relations
            in ``layout.in_relations[nt]`` order (zeros where a node has no incoming edge of that relation);
            ``attention[rel_key]`` is ``(B, E_r, A)`` in the observation's edge order, 0 on dropped edges (empty
            unless asked).
        """

    def forward(
        self, h: dict[str, torch.Tensor], graph: GraphT, return_debug: bool = False
    ) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
        """One round of message passing.

        Args:
            h: ``{node_type: (B·N_nt, H)}`` node embeddings.
            graph: This batch's edges (see :meth:`aggregate`).
            return_debug: Also return attention weights and gates per relation.

        Returns:
            ``(h_new, debug)``: new embeddings (same shapes) and, if asked, ``{"attention": {rel_key: (B, E_r,
            A)}, "gates": {rel_key: (B, N_dst)}}`` (else empty).
        """
        messages, attention = self.aggregate(h, graph, return_debug)
        out: dict[str, torch.Tensor] = dict(h)
        gates: dict[str, torch.Tensor] = {}
        for nt in self.layout.dst_types:
            agg_t = messages[nt]
            rows, n_in, hd = agg_t.shape
            gate = torch.sigmoid(self.gate_node[nt](h[nt]) + (agg_t * self.gate_message[nt]).sum(-1))
            update = self.out_proj[nt]((gate.unsqueeze(-1) * agg_t).reshape(rows, n_in * hd))
            out[nt] = self.message_norm[nt](h[nt] + update)
            gates[nt] = gate
        for nt, ffn in self.ffn.items():
            out[nt] = self.ffn_norm[nt](out[nt] + ffn(out[nt]))
        if not return_debug:
            return out, {}
        gate_out = {}
        for r_id, rel in enumerate(self.layout.relations):
            j = self.layout.in_relations[rel.dst].index(r_id)
            gate_out[rel.key] = gates[rel.dst][:, j].view(-1, self.layout.max_nodes[rel.dst])
        return out, {"attention": attention, "gates": gate_out}
