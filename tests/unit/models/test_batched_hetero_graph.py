"""The vectorised batching: offsets, sink routing of dropped edges, reverse relations."""

from __future__ import annotations

import torch

from agentic_ray.graph_spec import GraphSpec, RelationSpec, toy_specs
from agentic_ray.models import BatchedHeteroGraph, HeteroGraphLayout
from agentic_ray.models.batched_hetero_graph import node_mask, relation_edges

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


def _loop_reference(obs: dict[str, torch.Tensor], layout: HeteroGraphLayout) -> tuple[torch.Tensor, ...]:
    """The edge indices as one loop over relations with ``relation_edges`` computes them (the construction
    ``from_padded`` vectorises)."""
    b = obs[f"{layout.node_types[0]}_mask"].shape[0]
    src_off, (dst_off, _) = layout.src_offsets(b), layout.dst_offsets(b)
    rows = torch.arange(b).unsqueeze(1)
    masks = {nt: node_mask(obs, nt) for nt in layout.node_types}
    src_rows, query_rows, valids = [], [], []
    for r_id, rel in enumerate(layout.relations):
        s, d, v = relation_edges(obs, rel, layout.max_nodes, masks)
        outs, ins = layout.out_relations[rel.src], layout.in_relations[rel.dst]
        n_s, n_d = layout.max_nodes[rel.src], layout.max_nodes[rel.dst]
        src_rows.append((src_off[rel.src] + (rows * n_s + s) * len(outs) + outs.index(r_id)).reshape(-1))
        query_rows.append((dst_off[rel.dst] + (rows * n_d + d) * len(ins) + ins.index(r_id)).reshape(-1))
        valids.append(v.reshape(-1))
    return torch.cat(src_rows), torch.cat(query_rows), torch.cat(valids)


def test_vectorised_batching_equals_the_loop_over_relations() -> None:
    spec, _ = toy_specs()
    layout = HeteroGraphLayout(spec)
    gen = torch.Generator().manual_seed(0)
    for b in (1, 3, 5):
        obs: dict[str, torch.Tensor] = {}
        for nt, n in spec.max_nodes.items():
            obs[f"{nt}_mask"] = (torch.rand(b, n, generator=gen) > 0.3).to(torch.int8)
        for r in spec.relations:
            hi = max(spec.max_nodes[r.src], spec.max_nodes[r.dst]) + 2  # some endpoints out of range
            obs[f"{r.key}_ei"] = torch.randint(-1, hi, (b, 2, r.max_edges), generator=gen)
            obs[f"{r.key}_mask"] = (torch.rand(b, r.max_edges, generator=gen) > 0.2).to(torch.int8)
        src_row, query_row, valid = _loop_reference(obs, layout)
        g = BatchedHeteroGraph.from_padded(obs, layout)
        assert torch.equal(g.src_row, src_row) and torch.equal(g.query_row, query_row)
        assert torch.equal(g.edge_valid, valid)
        c = BatchedHeteroGraph.from_padded(obs, layout, compact=True)
        assert torch.equal(c.src_row, src_row[valid]) and torch.equal(c.query_row, query_row[valid])
        sizes = [int(v.sum()) for v in valid.split([b * r.max_edges for r in layout.relations])]
        assert list(c.segment_sizes) == sizes
