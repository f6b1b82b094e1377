"""FlatMLPEncoder: shapes, adjacency counts, padding ignored."""

from __future__ import annotations

import torch

from agentic_ray.models import FlatMLPEncoder
from tests.unit.models.helpers import toy_batch


def test_shapes_and_padding_ignored() -> None:
    spec, _, obs = toy_batch(6)
    torch.manual_seed(0)
    enc = FlatMLPEncoder(spec, hidden_dim=32, mlp_hidden_dim=64, mlp_layers=2)
    out = enc(obs)
    assert out.state.shape == (6, 32)
    for nt, n in spec.max_nodes.items():
        assert out.nodes[nt].shape == (6, n, 32)
    noisy = dict(obs)
    for nt in spec.node_types:
        pad = obs[f"{nt}_mask"] == 0
        noisy[f"{nt}_x"] = torch.where(pad.unsqueeze(-1), torch.ones_like(obs[f"{nt}_x"]), obs[f"{nt}_x"])
    torch.testing.assert_close(enc(noisy).state, out.state)


def test_adjacency_counts_real_edges_only() -> None:
    spec, _, obs = toy_batch(3, seed=1)
    enc = FlatMLPEncoder(spec, hidden_dim=8, mlp_hidden_dim=8, mlp_layers=1)
    counts = enc.adjacency_counts(obs)
    for r, c in zip(spec.relations, counts, strict=True):
        n_dst = spec.max_nodes[r.dst]
        for b in range(3):
            ref = torch.zeros(spec.max_nodes[r.src] * n_dst)
            ei, em = obs[f"{r.key}_ei"][b], obs[f"{r.key}_mask"][b]
            for j in range(ei.shape[1]):
                if em[j]:
                    ref[ei[0, j] * n_dst + ei[1, j]] += 1
            torch.testing.assert_close(c[b], ref)
