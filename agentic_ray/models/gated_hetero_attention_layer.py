"""One layer of gated attention message passing over every relation of a heterogeneous graph (seed 002),
hand-written with all relations fused into one gather/softmax/scatter.

For relation ``r`` with destination node ``i`` and neighbour ``j`` (per head)::

    e_ij   = a_r · LeakyReLU(W_h,r h_i + b_h,r + W_r h_j)  attention score (GATv2: the learnable attention vector
                                                          is applied after the non-linearity)
    α_ij   = softmax_j(e_ij)                              over the neighbours of i in relation r
    m_r,i  = Σ_j α_ij W_r h_j                             aggregated message

then the gate, output projection, residual, norms and FFN of :class:`RelationGatedLayer`. All relations are
processed in one fused gather/softmax/scatter (see :mod:`batched_hetero_graph`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import softmax

from agentic_ray.models.batched_hetero_graph import BatchedHeteroGraph, HeteroGraphLayout
from agentic_ray.models.relation_gated_layer import RelationGatedLayer
from agentic_ray.models.skill_argument_functional import masked_fill_value

__all__ = ["GatedHeteroAttentionLayer"]


class GatedHeteroAttentionLayer(RelationGatedLayer[BatchedHeteroGraph]):
    """Gated multi-head attention message passing over all relations, with per-node-type update.

    Why it is hand-written, and the default (``AAACModelConfig.gnn_layer="fused"``), although PyG's
    ``HeteroConv(GATv2Conv)`` (:class:`PyGGATv2HeteroLayer`) computes the same attention and messages: a run of
    ``python benchmarks/gnn_layer.py --batches 1 4 128 256 1024`` (e-commerce env, the scripted expert's
    observations, 26 message relations, 1 CPU thread, medians of paired repeats, on a shared 2-CPU machine; the
    lines are in ``benchmarks/results/gnn_layer.md``) measured these PyG / fused time ratios, forward and
    forward+backward, at the batch sizes the defaults use (4 = ``num_envs_per_env_runner``, the env runners'
    inference; 128 = the RL ``minibatch_size``; 256 = the imitation minibatch):

    * default sizes (H=88, 3 layers, 4 heads): batch 1: 2.78 / 2.35; batch 4: 2.72 / 2.25; batch 128: 1.08 /
      1.16; batch 256: 0.87 / 1.07; batch 1,024: 0.71 / 0.89;
    * quickstart sizes (H=32, 2 layers, 2 heads): batch 1: 2.61 / 2.49; batch 4: 2.54 / 2.37; batch 128: 1.03 /
      1.24; batch 256: 0.94 / 1.23; batch 1,024: 0.67 / 1.01.

    PyG runs one ``GATv2Conv`` per relation in a Python loop where this layer runs one fused pass; that overhead
    dominates at the small batches of serving and the env runners (2.2-2.8x), and the fused learner step is still
    ahead at the RL and imitation minibatches (1.07-1.24x). PyG is faster only in a forward at batch >= 256 and in
    a default-sized learner step at 1,024 (1.1x), which the defaults do not use. PyG also needs a host sync per
    batch to drop padded edges, where this layer keeps static shapes on CUDA (not measured here: no GPU).
    ``gnn_layer="pyg"`` stays available.

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
        super().__init__(layout, hidden_dim, num_heads, ffn_mult)
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

    def aggregate(
        self, h: dict[str, torch.Tensor], graph: BatchedHeteroGraph, return_attention: bool = False
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Attention and aggregated messages of all relations in one fused pass (see
        :meth:`RelationGatedLayer.aggregate`)."""
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
        # One split (backward: one cat) instead of a slice per type (backward: a zero-filled (G, H) buffer each).
        blocks = agg.split([h[nt].shape[0] * len(layout.in_relations[nt]) for nt in layout.dst_types])
        per_type = {
            nt: block.view(h[nt].shape[0], len(layout.in_relations[nt]), hd)
            for nt, block in zip(layout.dst_types, blocks, strict=True)
        }
        if not return_attention:
            return per_type, {}
        padded = graph.to_padded(alpha)
        attention = {
            rel.key: padded[start : start + b * e].view(b, e, a)
            for rel, (start, b, e) in zip(layout.relations, graph.edge_slices, strict=True)
        }
        return per_type, attention
