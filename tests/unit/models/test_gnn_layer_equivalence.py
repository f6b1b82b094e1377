"""The hand-written fused layer and PyG's HeteroConv(GATv2Conv) compute the same attention and messages.

Shared maths (per relation r, head, destination i, neighbour j): the score ``a_r · LeakyReLU(W_dst h_i + b_dst +
W_src h_j)``, the softmax over the real in-edges of i, the message ``Σ_j α_ij W_src h_j``, and everything after
(gate, output projection, residual, norms, FFN: the same :class:`RelationGatedLayer` code and parameter names).

What differs and how the test handles it (see :mod:`agentic_ray.models.pyg_gatv2_hetero_layer`):
* the fused layer keeps all relations in one table (``neighbour_proj[src]`` holds every out-relation of a type,
  ``node_proj[dst]`` every in-relation, ``attention`` every relation); PyG has one ``lin_l`` / ``lin_r`` / ``att``
  per relation. :func:`copy_fused_into_pyg` slices one into the other;
* PyG's ``lin_l.bias`` (neighbour-side bias, in the score and the message) and ``bias`` (output bias) have no fused
  counterpart; the copy sets them to 0 (:func:`test_pyg_biases_are_the_difference` shows what they change);
* invalid edges: the fused layer gives them weight 0 (padded) or drops them (compacted), PyG drops them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agentic_ray.graph_spec import GraphSpec, random_observation, specs_from_dict
from agentic_ray.models.batched_hetero_graph import BatchedHeteroGraph, HeteroGraphLayout
from agentic_ray.models.gated_hetero_attention_layer import GatedHeteroAttentionLayer
from agentic_ray.models.hetero_edge_index import HeteroEdgeIndex
from agentic_ray.models.hetero_gnn_encoder import HeteroGNNEncoder
from agentic_ray.models.obs_batching import stack_observations
from agentic_ray.models.pyg_gatv2_hetero_layer import PyGGATv2HeteroLayer

SPECS = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "ecommerce_specs.json"
HIDDEN, HEADS = 16, 2
BATCH, NO_EDGES_ROW, NOISY_ROW = 5, 1, 3
TOL = {"atol": 1e-5, "rtol": 1e-5}


def _batch(seed: int = 0) -> tuple[GraphSpec, dict[str, torch.Tensor]]:
    """``BATCH`` random observations of the e-commerce spec; row ``NO_EDGES_ROW`` has no edge at all, and row
    ``NOISY_ROW`` has random features on its padded nodes and random endpoints (padded nodes included) in its masked
    edge slots, which must carry no message."""
    spec, layout = specs_from_dict(json.loads(SPECS.read_text()))
    rng = np.random.default_rng(seed)
    obs = [random_observation(spec, layout, rng) for _ in range(BATCH)]
    noisy = obs[NOISY_ROW]
    for r in spec.relations:
        obs[NO_EDGES_ROW][f"{r.key}_mask"][:] = 0
        dead = noisy[f"{r.key}_mask"] == 0
        noisy[f"{r.key}_ei"][0, dead] = rng.integers(0, spec.max_nodes[r.src], int(dead.sum()))
        noisy[f"{r.key}_ei"][1, dead] = rng.integers(0, spec.max_nodes[r.dst], int(dead.sum()))
    for nt in spec.node_types:
        pad = noisy[f"{nt}_mask"] == 0
        noisy[f"{nt}_x"][pad] = rng.random((int(pad.sum()), spec.feat_dims[nt]), dtype=np.float32)
    return spec, stack_observations(obs)


def copy_fused_into_pyg(fused: GatedHeteroAttentionLayer, pyg: PyGGATv2HeteroLayer) -> None:
    """Makes ``pyg`` compute what ``fused`` computes: shared parameters by name, attention parameters by slicing
    the fused tables per relation, PyG's extra biases zeroed."""
    missing, unexpected = pyg.load_state_dict(fused.state_dict(), strict=False)
    assert all(k.startswith("conv.") for k in missing)
    assert set(unexpected) == {"attention"} | {
        k for k in fused.state_dict() if k.startswith(("neighbour_proj.", "node_proj."))
    }
    layout, h = fused.layout, fused.hidden_dim
    with torch.no_grad():
        for r_id, rel in enumerate(layout.relations):
            conv = pyg.conv.convs[rel.edge_type]
            k = layout.out_relations[rel.src].index(r_id)
            j = layout.in_relations[rel.dst].index(r_id)
            conv.lin_l.weight.copy_(fused.neighbour_proj[rel.src].weight[k * h : (k + 1) * h])
            conv.lin_l.bias.zero_()
            conv.lin_r.weight.copy_(fused.node_proj[rel.dst].weight[j * h : (j + 1) * h])
            conv.lin_r.bias.copy_(fused.node_proj[rel.dst].bias[j * h : (j + 1) * h])
            conv.att.copy_(fused.attention[r_id].unsqueeze(0))
            conv.bias.zero_()


def _layers(spec: GraphSpec) -> tuple[GatedHeteroAttentionLayer, PyGGATv2HeteroLayer, HeteroGraphLayout]:
    layout = HeteroGraphLayout(spec)
    torch.manual_seed(0)
    fused = GatedHeteroAttentionLayer(layout, HIDDEN, HEADS, ffn_mult=1)
    with torch.no_grad():  # non-zero gate weights on messages, so the gate depends on them
        for p in fused.gate_message.values():
            p.normal_()
    pyg = PyGGATv2HeteroLayer(layout, HIDDEN, HEADS, ffn_mult=1)
    copy_fused_into_pyg(fused, pyg)
    return fused, pyg, layout


def _embeddings(spec: GraphSpec, batch_size: int, seed: int = 1) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        nt: torch.randn(batch_size * n, HIDDEN, generator=gen, requires_grad=True)
        for nt, n in spec.max_nodes.items()
    }


@pytest.mark.parametrize("compact", [False, True])
def test_attention_and_messages_match(compact: bool) -> None:
    spec, obs = _batch()
    fused, pyg, layout = _layers(spec)
    h = _embeddings(spec, BATCH)
    msg_f, att_f = fused.aggregate(h, BatchedHeteroGraph.from_padded(obs, layout, compact=compact), True)
    msg_p, att_p = pyg.aggregate(h, HeteroEdgeIndex.from_padded(obs, layout), True)
    assert att_f.keys() == att_p.keys() == {r.key for r in layout.relations}
    for key, a in att_f.items():
        torch.testing.assert_close(att_p[key], a, **TOL, msg=key)
    assert msg_f.keys() == msg_p.keys()
    for nt, m in msg_f.items():
        torch.testing.assert_close(msg_p[nt], m, **TOL, msg=nt)
    # The comparison is not vacuous: there is attention mass, and the edge-less and padded nodes get nothing.
    for rel in layout.relations:
        att = att_f[rel.key]
        real = obs[f"{rel.obs_key}_mask"] > 0
        assert (att[~real] == 0).all()
        assert (att[NO_EDGES_ROW] == 0).all()
    for nt, m in msg_f.items():
        rows = m.view(BATCH, spec.max_nodes[nt], *m.shape[1:])
        assert (rows[NO_EDGES_ROW] == 0).all()
        assert (rows[obs[f"{nt}_mask"] == 0] == 0).all()
    assert sum(float(m.detach().abs().sum()) for m in msg_f.values()) > 1.0


def test_layer_outputs_gates_and_gradients_match() -> None:
    spec, obs = _batch(seed=2)
    fused, pyg, layout = _layers(spec)
    grads = []
    outs = []
    for layer, graph in (
        (fused, BatchedHeteroGraph.from_padded(obs, layout, compact=False)),
        (pyg, HeteroEdgeIndex.from_padded(obs, layout)),
    ):
        h = _embeddings(spec, BATCH)
        out, debug = layer(h, graph, return_debug=True)
        sum(v.square().sum() for v in out.values()).backward()
        outs.append((out, debug))
        grads.append({nt: x.grad for nt, x in h.items()} | {n: p.grad for n, p in layer.named_parameters()})
    (out_f, dbg_f), (out_p, dbg_p) = outs
    for nt in spec.node_types:
        torch.testing.assert_close(out_p[nt], out_f[nt], **TOL)
    for key, g in dbg_f["gates"].items():
        torch.testing.assert_close(dbg_p["gates"][key], g, **TOL)
    shared = [n for n in grads[0] if n in grads[1]]
    assert len(shared) > len(spec.node_types)  # input embeddings and the gate/projection/norm/FFN parameters
    for name in shared:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-4, rtol=1e-4, msg=name)


def test_encoders_match_with_copied_weights() -> None:
    spec, obs = _batch(seed=3)
    torch.manual_seed(0)
    fused = HeteroGNNEncoder(spec, hidden_dim=HIDDEN, num_layers=2, num_heads=HEADS, gnn_layer="fused").eval()
    pyg = HeteroGNNEncoder(spec, hidden_dim=HIDDEN, num_layers=2, num_heads=HEADS, gnn_layer="pyg").eval()
    outer = {k: v for k, v in fused.state_dict().items() if not k.startswith("layers.")}
    pyg.load_state_dict(outer, strict=False)
    for f_layer, p_layer in zip(fused.layers, pyg.layers, strict=True):
        copy_fused_into_pyg(f_layer, p_layer)
    with torch.no_grad():
        a, b = fused(obs), pyg(obs)
    torch.testing.assert_close(b.state, a.state, **TOL)
    for nt in spec.node_types:
        m = a.node_masks[nt]
        torch.testing.assert_close(b.nodes[nt][m], a.nodes[nt][m], **TOL)


def test_single_row_without_edges() -> None:
    """A batch in which whole relations have no edge: PyG runs its convolutions on empty edge indices."""
    spec, obs = _batch(seed=4)
    row = {k: v[NO_EDGES_ROW : NO_EDGES_ROW + 1] for k, v in obs.items()}
    fused, pyg, layout = _layers(spec)
    h = _embeddings(spec, 1)
    graph = HeteroEdgeIndex.from_padded(row, layout)
    assert all(ei.shape == (2, 0) for ei in graph.edge_index_dict.values())
    msg_p, _ = pyg.aggregate(h, graph)
    msg_f, _ = fused.aggregate(h, BatchedHeteroGraph.from_padded(row, layout))
    for nt, m in msg_f.items():
        assert (m == 0).all()
        torch.testing.assert_close(msg_p[nt], m)
    out_f, _ = fused(h, BatchedHeteroGraph.from_padded(row, layout))
    out_p, _ = pyg(h, graph)
    for nt in spec.node_types:
        torch.testing.assert_close(out_p[nt], out_f[nt], **TOL)


def test_pyg_biases_are_the_difference() -> None:
    """PyG's output bias is every node's message where it has no edge; the neighbour-side bias shifts messages."""
    spec, obs = _batch(seed=5)
    fused, pyg, layout = _layers(spec)
    h = _embeddings(spec, BATCH)
    graph = HeteroEdgeIndex.from_padded(obs, layout)
    with torch.no_grad():
        for conv in pyg.conv.convs.values():
            conv.bias.normal_()
            conv.lin_l.bias.normal_()
    msg_p, _ = pyg.aggregate(h, graph)
    msg_f, _ = fused.aggregate(h, BatchedHeteroGraph.from_padded(obs, layout))
    for nt, m in msg_p.items():
        rows = m.view(BATCH, spec.max_nodes[nt], *m.shape[1:])
        for j, r_id in enumerate(layout.in_relations[nt]):
            expected = pyg.conv.convs[layout.relations[r_id].edge_type].bias
            torch.testing.assert_close(rows[NO_EDGES_ROW, :, j], expected.expand_as(rows[NO_EDGES_ROW, :, j]))
    assert max(float((msg_p[nt] - msg_f[nt]).detach().abs().max()) for nt in msg_f) > 0.1
