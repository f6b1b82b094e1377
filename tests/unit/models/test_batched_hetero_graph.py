"""The vectorised batching: offsets, sink routing of dropped edges, reverse relations."""

from __future__ import annotations

import torch

from agentic_ray.graph_spec import GraphSpec, RelationSpec, toy_specs
from agentic_ray.models import BatchedHeteroGraph, HeteroGraphLayout

SPEC = GraphSpec(
    max_nodes={"a": 2, "b": 3},
    feat_dims={"a": 1, "b": 1},
    relations=(RelationSpec("a", "to", "b", 3),),
)


def _obs() -> dict[str, torch.Tensor]:
    return {
        "a_mask": torch.tensor([[1, 1], [1, 0]], dtype=torch.int8),
        "b_mask": torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.int8),
        # row 0: a0→b1 (real), a1→b2 (b2 is padding → dropped), padding column
        # row 1: a0→b2 (real), a1→b0 (a1 is padding → dropped), a0→b0 (edge mask 0 → dropped)
        "a__to__b_ei": torch.tensor([[[0, 1, 0], [1, 2, 0]], [[0, 1, 0], [2, 0, 0]]]),
        "a__to__b_mask": torch.tensor([[1, 1, 0], [1, 1, 0]], dtype=torch.int8),
    }


def test_offsets_and_dropped_edges() -> None:
    layout = HeteroGraphLayout(SPEC, add_reverse_relations=True)
    assert [r.key for r in layout.relations] == ["a__to__b", "b__rev_to__a"]
    g = BatchedHeteroGraph.from_padded(_obs(), layout)
    # groups: dst types in node-type order: a (2 rows × 2 nodes × 1 in-rel) then b (2 × 3 × 1) → G = 10.
    assert g.num_groups == 10
    fwd = slice(0, 6)
    # a→b edges: group = 4 + (b·3 + dst), clamped in range for dropped ones.
    assert g.query_row[fwd].tolist() == [4 + 1, 4 + 2, 4 + 0, 4 + 3 + 2, 4 + 3 + 0, 4 + 3 + 0]
    # source rows: src types a (rows 0..3) then b (rows 4..9), one out-relation each.
    assert g.src_row[fwd].tolist() == [0, 1, 0, 2, 3, 2]
    assert g.edge_valid[fwd].tolist() == [True, False, False, True, False, False]
    # reverse edges b→a read the same columns swapped: destination a, group = b·2 + a.
    rev = slice(6, 12)
    assert g.query_row[rev].tolist() == [0, 1, 0, 2, 3, 2]
    assert g.edge_valid[rev].tolist() == g.edge_valid[fwd].tolist()
    assert g.src_row[rev].tolist() == [4 + 1, 4 + 2, 4 + 0, 4 + 3 + 2, 4 + 3 + 0, 4 + 3 + 0]
    assert g.edge_slices == ((0, 2, 3), (6, 2, 3))


def test_reverse_relations_reach_every_node_type() -> None:
    spec, _ = toy_specs()
    without = HeteroGraphLayout(spec, add_reverse_relations=False)
    with_rev = HeteroGraphLayout(spec, add_reverse_relations=True)
    assert "order" not in without.dst_types  # order is only ever a source in the observed relations
    assert set(with_rev.dst_types) == set(spec.node_types)


def test_compact_keeps_only_valid_edges_in_relation_segments() -> None:
    layout = HeteroGraphLayout(SPEC)
    padded = BatchedHeteroGraph.from_padded(_obs(), layout)
    g = BatchedHeteroGraph.from_padded(_obs(), layout, compact=True)
    assert g.compacted and not padded.compacted
    kept = padded.edge_valid.nonzero().squeeze(1)
    assert torch.equal(g.kept, kept) and g.edge_valid.all()
    assert torch.equal(g.src_row, padded.src_row[kept]) and torch.equal(g.query_row, padded.query_row[kept])
    assert g.segment_sizes == (2, 2) and padded.segment_sizes == (6, 6)
    assert g.edge_slices == padded.edge_slices
    values = torch.arange(1, 5, dtype=torch.float32)
    full = g.to_padded(values)
    assert full.shape == (12,) and torch.equal(full[kept], values) and full.sum() == values.sum()
