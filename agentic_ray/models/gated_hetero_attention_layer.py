"""One layer of gated attention message passing over every relation of a heterogeneous graph (seed 002).

For relation ``r`` with destination node ``i`` and neighbour ``j`` (per head)::

    e_ij   = a_r · LeakyReLU(W_h,r h_i + W_r h_j)        attention score (GATv2 form of a learnable attention
                                                          vector over the node and neighbour projections)
    α_ij   = softmax_j(e_ij)                              over the neighbours of i in relation r
    m_r,i  = Σ_j α_ij W_r h_j                             aggregated message
    g_r,i  = σ(w_r · h_i + u_r · m_r,i + b_r)             gate: how much node i listens to relation r
    h_i'   = LN(h_i + Σ_r W_o,r (g_r,i · m_r,i))          output projection, residual
    h_i''  = LN(h_i' + FFN(h_i'))

All relations are processed in one fused gather/softmax/scatter (see :mod:`batched_hetero_graph`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import softmax

from agentic_ray.models.batched_hetero_graph import BatchedHeteroGraph, HeteroGraphLayout
from agentic_ray.models.skill_argument_functional import masked_fill_value

__all__ = ["GatedHeteroAttentionLayer"]


class GatedHeteroAttentionLayer(nn.Module):
    """Gated multi-head attention message passing over all relations, with per-node-type update.

    Args:
        layout: Static graph layout (node types, message relations incl. reverse ones).
        hidden_dim: ``H``, node embedding width (divisible by ``num_heads``).
        num_heads: ``A`` attention heads.
        ffn_mult: Width multiplier of the per-type feed-forward block; 0 disables it.
        negative_slope: LeakyReLU slope of the attention score.
    """

    def __init__(
        self,
        layout: HeteroGraphLayout,
        hidden_dim: int,
        num_heads: int,
        ffn_mult: int = 2,
        negative_slope: float = 0.2,
    ) -> None:
        super().__init__()
        if hidden_dim % num_heads:
            raise ValueError(f"hidden_dim {hidden_dim} is not divisible by num_heads {num_heads}")
        self.layout = layout
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.negative_slope = negative_slope
        h = hidden_dim
        self.neighbour_proj = nn.ModuleDict(
            {nt: nn.Linear(h, len(layout.out_relations[nt]) * h, bias=False) for nt in layout.src_types}
        )
        self.node_proj = nn.ModuleDict(
            {nt: nn.Linear(h, len(layout.in_relations[nt]) * h) for nt in layout.dst_types}
        )
        self.attention = nn.Parameter(torch.empty(len(layout.relations), num_heads, self.head_dim))
        nn.init.xavier_uniform_(self.attention)
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

    def forward(
        self, h: dict[str, torch.Tensor], graph: BatchedHeteroGraph, return_debug: bool = False
    ) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
        """One round of message passing.

        Args:
            h: ``{node_type: (B·N_nt, H)}`` node embeddings.
            graph: Edge indices of this batch.
            return_debug: Also return attention weights and gates per relation.

        Returns:
            ``(h_new, debug)``: new embeddings (same shapes) and, if asked, ``{"attention": {rel_key: (B, E_r,
            A)}, "gates": {rel_key: (B, N_dst)}}`` (else empty).
        """
        layout, a, dh, hd = self.layout, self.num_heads, self.head_dim, self.hidden_dim
        messages = torch.cat([self.neighbour_proj[nt](h[nt]).reshape(-1, hd) for nt in layout.src_types])
        queries = torch.cat([self.node_proj[nt](h[nt]).reshape(-1, hd) for nt in layout.dst_types])
        msg_e = messages.index_select(0, graph.src_row).view(-1, a, dh)
        query_e = queries.index_select(0, graph.query_row).view(-1, a, dh)
        z = F.leaky_relu(msg_e + query_e, self.negative_slope)
        # Edges of each relation are one contiguous segment: a per-segment broadcast keeps the backward of the
        # attention vectors a plain reduction (a gather by relation id would scatter-add E rows into R rows).
        score = torch.cat(
            [
                (z_r * a_r).sum(-1)
                for z_r, a_r in zip(z.split(list(graph.segment_sizes)), self.attention, strict=True)
            ]
        )
        if graph.compacted:  # only real edges
            alpha = softmax(score, graph.query_row, num_nodes=graph.num_groups, dim=0)
        else:
            # Dropped edges take no softmax mass (score -1e9) and weight exactly 0 (groups with no real edge
            # would otherwise spread a uniform weight over their dropped ones).
            valid = graph.edge_valid.unsqueeze(-1)
            score = score.masked_fill(~valid, masked_fill_value(score.dtype))
            alpha = softmax(score, graph.query_row, num_nodes=graph.num_groups, dim=0) * valid
        # index_add (backward: a row index_select) rather than scatter-sum (backward: a gather over an expanded
        # (E, A, dh) index, several times slower on the CPU); same sums.
        agg = (
            msg_e.new_zeros(graph.num_groups, a, dh)
            .index_add_(0, graph.query_row, alpha.unsqueeze(-1) * msg_e)
            .reshape(graph.num_groups, hd)
        )

        out: dict[str, torch.Tensor] = dict(h)
        gates: dict[str, torch.Tensor] = {}
        # One split (backward: one cat) instead of a slice per type (backward: a zero-filled (G, H) buffer each).
        blocks = agg.split([h[nt].shape[0] * len(layout.in_relations[nt]) for nt in layout.dst_types])
        for nt, block in zip(layout.dst_types, blocks, strict=True):
            n_in = len(layout.in_relations[nt])
            rows = h[nt].shape[0]
            agg_t = block.view(rows, n_in, hd)
            gate = torch.sigmoid(self.gate_node[nt](h[nt]) + (agg_t * self.gate_message[nt]).sum(-1))
            update = self.out_proj[nt]((gate.unsqueeze(-1) * agg_t).reshape(rows, n_in * hd))
            out[nt] = self.message_norm[nt](h[nt] + update)
            if return_debug:
                gates[nt] = gate
        for nt, ffn in self.ffn.items():
            out[nt] = self.ffn_norm[nt](out[nt] + ffn(out[nt]))

        if not return_debug:
            return out, {}
        return out, self._debug(alpha, gates, graph)

    def _debug(
        self, alpha: torch.Tensor, gates: dict[str, torch.Tensor], graph: BatchedHeteroGraph
    ) -> dict[str, dict[str, torch.Tensor]]:
        alpha = graph.to_padded(alpha)
        attention, gate_out = {}, {}
        for r_id, (rel, (start, b, e)) in enumerate(
            zip(self.layout.relations, graph.edge_slices, strict=True)
        ):
            attention[rel.key] = alpha[start : start + b * e].view(b, e, self.num_heads)
            j = self.layout.in_relations[rel.dst].index(r_id)
            gate_out[rel.key] = gates[rel.dst][:, j].view(b, -1)
        return {"attention": attention, "gates": gate_out}
