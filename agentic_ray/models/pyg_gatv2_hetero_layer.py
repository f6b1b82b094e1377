"""The gated heterogeneous attention layer built from PyG: ``HeteroConv({edge_type: GATv2Conv(...)})``.

Per relation ``r``, PyG's ``GATv2Conv`` (``share_weights=False``, no self-loops, no dropout) computes, per head::

    e_ij   = a_r · LeakyReLU(W_r,dst h_i + b_r,dst + W_r,src h_j + b_r,src)
    α_ij   = softmax_j(e_ij)
    m_r,i  = Σ_j α_ij (W_r,src h_j + b_r,src) + b_r

and ``HeteroConv(aggr=None)`` stacks the relations into each destination type as ``(N, R_nt, H)``; the gate,
output projection, residual, norms and FFN are those of :class:`RelationGatedLayer`, shared with the fused layer.

Maths shared with :class:`GatedHeteroAttentionLayer`: the score, softmax and weighted sum are the same GATv2 form
(GATv2's ``a · LeakyReLU(W [h_i ‖ h_j])`` is ``W_dst h_i + W_src h_j`` with the two halves of ``W``, which is what
both compute with two projections; the message reuses the neighbour projection). What differs:

* PyG has two extra bias vectors per relation: ``b_r,src`` on the neighbour projection (it enters the score and
  every message) and the output bias ``b_r`` (added to every node's message, including nodes with no edge of that
  relation, whose fused message is 0). With both set to 0 the two layers compute the same function (tested in
  ``tests/unit/models/test_gnn_layer_equivalence.py``);
* initialisation: PyG's glorot on the projections, the fused layer's ``nn.Linear`` default;
* edges: PyG has no edge mask, so invalid edges are dropped before the convolution (:class:`HeteroEdgeIndex`, one
  host sync per batch); the fused layer can also keep them with weight 0 and static shapes (what CUDA wants);
* execution: one ``GATv2Conv`` (two linears, gathers, softmax, scatter) per relation, in a Python loop, against
  one fused gather/softmax/scatter for all relations.

Measured with ``python benchmarks/gnn_layer.py`` (the figures and why the fused layer is the default are in the
docstring of :class:`GatedHeteroAttentionLayer`): about 2.5x slower than the fused layer at batch 1 (26 relations,
one convolution each) and 1.07-1.24x slower for a learner step at minibatch 128-256; faster only in forwards at
batch >= 256 and in a default-sized learner step at batch 1,024.
"""

from __future__ import annotations

import torch
from torch_geometric.nn import GATv2Conv, HeteroConv

from agentic_ray.models.batched_hetero_graph import HeteroGraphLayout
from agentic_ray.models.hetero_edge_index import HeteroEdgeIndex
from agentic_ray.models.relation_gated_layer import RelationGatedLayer

__all__ = ["PyGGATv2HeteroLayer"]


class PyGGATv2HeteroLayer(RelationGatedLayer[HeteroEdgeIndex]):
    """Gated multi-head attention message passing with one PyG ``GATv2Conv`` per relation.

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
        h = hidden_dim
        self.conv = HeteroConv(
            {
                rel.edge_type: GATv2Conv(
                    (h, h),
                    self.head_dim,
                    heads=num_heads,
                    concat=True,
                    negative_slope=negative_slope,
                    add_self_loops=False,
                    share_weights=False,
                )
                for rel in layout.relations
            },
            aggr=None,  # stack per destination type: (N, R_nt, H), relations in layout order
        )

    def aggregate(
        self, h: dict[str, torch.Tensor], graph: HeteroEdgeIndex, return_attention: bool = False
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Attention and aggregated messages, one ``GATv2Conv`` per relation (see
        :meth:`RelationGatedLayer.aggregate`)."""
        if not return_attention:
            return self.conv(h, graph.edge_index_dict), {}
        # HeteroConv cannot group the (out, (edge_index, alpha)) tuples that return_attention_weights gives, so the
        # debug path runs its convolutions one by one, in the same order.
        per_dst: dict[str, list[torch.Tensor]] = {}
        attention: dict[str, torch.Tensor] = {}
        for rel in self.layout.relations:
            et = rel.edge_type
            out, (_, alpha) = self.conv.convs[et](
                (h[rel.src], h[rel.dst]), graph.edge_index_dict[et], return_attention_weights=True
            )
            per_dst.setdefault(rel.dst, []).append(out)
            attention[rel.key] = graph.to_padded(et, alpha)
        return {nt: torch.stack(v, dim=1) for nt, v in per_dst.items()}, attention
