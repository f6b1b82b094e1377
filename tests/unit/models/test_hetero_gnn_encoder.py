"""HeteroGNNEncoder: shapes, permutation invariance, padding is ignored, batching equals per-row encoding."""

from __future__ import annotations

import pytest
import torch

from agentic_ray.models import HeteroGNNEncoder
from tests.unit.models.helpers import permute_nodes, toy_batch


def _encoder(spec, **kw) -> HeteroGNNEncoder:
    torch.manual_seed(0)
    return HeteroGNNEncoder(spec, hidden_dim=32, num_layers=2, num_heads=2, **kw).eval()


def test_shapes_and_debug_outputs() -> None:
    spec, _, obs = toy_batch(6)
    out = _encoder(spec)(obs, return_debug=True)
    assert out.state.shape == (6, 32)
    for nt, n in spec.max_nodes.items():
        assert out.nodes[nt].shape == (6, n, 32)
        assert torch.equal(out.node_masks[nt], obs[f"{nt}_mask"] > 0)
    assert torch.isfinite(out.state).all()
    # 8 observed + 8 reverse relations, 2 layers.
    n_rel = 2 * 2 * len(spec.relations)  # layers x (forward + reverse) x relations
    assert len(out.debug["attention"]) == n_rel and len(out.debug["gates"]) == n_rel
    att = out.debug["attention"]["layer1/tool__operates__b"]
    assert att.shape == (6, 12, 2)
    gate = out.debug["gates"]["layer0/tool__rev_calls__a"]
    assert gate.shape == (6, 1) and ((gate > 0) & (gate < 1)).all()


def test_attention_is_a_softmax_over_real_incoming_edges() -> None:
    spec, _, obs = toy_batch(5, seed=3)
    out = _encoder(spec)(obs, return_debug=True)
    att = out.debug["attention"]["layer0/tool__operates__b"]  # (B, E, heads)
    ei, em = obs["tool__operates__b_ei"], obs["tool__operates__b_mask"] > 0
    assert (att[~em] == 0).all()
    for b in range(5):
        for dst in torch.unique(ei[b, 1][em[b]]).tolist():
            sel = em[b] & (ei[b, 1] == dst)
            torch.testing.assert_close(att[b][sel].sum(0), torch.ones(2))


def test_node_order_invariance() -> None:
    spec, layout, obs = toy_batch(8, seed=1)
    enc = _encoder(spec)
    perm_obs, perms = permute_nodes(obs, spec, layout, seed=7)
    with torch.no_grad():
        a, b = enc(obs), enc(perm_obs)
    torch.testing.assert_close(a.state, b.state, atol=1e-5, rtol=1e-5)
    for nt, perm in perms.items():
        torch.testing.assert_close(a.nodes[nt][:, perm], b.nodes[nt], atol=1e-5, rtol=1e-5)


def test_padding_and_masked_edges_are_ignored() -> None:
    spec, _, obs = toy_batch(8, seed=2)
    enc = _encoder(spec)
    noisy = dict(obs)
    gen = torch.Generator().manual_seed(0)
    for nt in spec.node_types:
        pad = obs[f"{nt}_mask"] == 0
        noisy[f"{nt}_x"] = torch.where(
            pad.unsqueeze(-1), torch.rand(obs[f"{nt}_x"].shape, generator=gen), obs[f"{nt}_x"]
        )
    for r in spec.relations:
        dead = obs[f"{r.key}_mask"] == 0
        rand_ei = torch.stack(
            [
                torch.randint(0, spec.max_nodes[r.src], dead.shape, generator=gen),
                torch.randint(0, spec.max_nodes[r.dst], dead.shape, generator=gen),
            ],
            dim=1,
        )
        noisy[f"{r.key}_ei"] = torch.where(dead.unsqueeze(1), rand_ei, obs[f"{r.key}_ei"])
    with torch.no_grad():
        a, b = enc(obs), enc(noisy)
    torch.testing.assert_close(a.state, b.state)
    for nt in spec.node_types:
        m = obs[f"{nt}_mask"] > 0
        torch.testing.assert_close(a.nodes[nt][m], b.nodes[nt][m])


def test_batched_equals_row_by_row() -> None:
    spec, _, obs = toy_batch(5, seed=4)
    enc = _encoder(spec)
    with torch.no_grad():
        full = enc(obs).state
        rows = torch.cat([enc({k: v[i : i + 1] for k, v in obs.items()}).state for i in range(5)])
    torch.testing.assert_close(full, rows, atol=1e-5, rtol=1e-5)


def test_edges_change_the_state() -> None:
    spec, _, obs = toy_batch(4, seed=5)
    enc = _encoder(spec)
    cut = dict(obs)
    for r in spec.relations:
        cut[f"{r.key}_mask"] = torch.zeros_like(obs[f"{r.key}_mask"])
    with torch.no_grad():
        diff = (enc(obs).state - enc(cut).state).abs().max()
    assert diff > 1e-3


def test_reflection_is_an_input() -> None:
    spec, _, obs = toy_batch(4, seed=6)
    enc = _encoder(spec)
    other = dict(obs, reflection=torch.zeros_like(obs["reflection"]))
    with torch.no_grad():
        assert (enc(obs).state - enc(other).state).abs().max() > 1e-4


@pytest.mark.parametrize("bad", [0, -1])
def test_no_lazy_or_invalid_sizes(bad: int) -> None:
    spec, _, _ = toy_batch(1)
    with pytest.raises((ValueError, RuntimeError)):
        HeteroGNNEncoder(spec, hidden_dim=30, num_heads=4 if bad == 0 else 7)
    enc = HeteroGNNEncoder(spec, hidden_dim=16, num_layers=1, num_heads=2)
    assert all(not isinstance(p, torch.nn.parameter.UninitializedParameter) for p in enc.parameters())


def test_compacted_edges_equal_padded_edges() -> None:
    """Dropping invalid edge slots (the CPU default) changes nothing: outputs, attention and gradients."""
    spec, _, obs = toy_batch(7, seed=5)
    outs, grads = [], []
    for compact in (False, True):
        enc = _encoder(spec, compact_edges=compact).train()
        out = enc(obs, return_debug=True)
        (out.state.square().sum() + sum(n.sum() for n in out.nodes.values())).backward()
        outs.append(out)
        grads.append({n: p.grad.clone() for n, p in enc.named_parameters() if p.grad is not None})
    padded, compacted = outs
    torch.testing.assert_close(compacted.state, padded.state, atol=1e-5, rtol=1e-5)
    for nt in spec.node_types:
        torch.testing.assert_close(compacted.nodes[nt], padded.nodes[nt], atol=1e-5, rtol=1e-5)
    for kind in ("attention", "gates"):
        for key, value in padded.debug[kind].items():
            torch.testing.assert_close(compacted.debug[kind][key], value, atol=1e-5, rtol=1e-5)
    assert grads[0].keys() == grads[1].keys()
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, atol=1e-4, rtol=1e-4)
