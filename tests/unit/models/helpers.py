"""Shared builders for model unit tests: tiny configs, batched random observations, permutations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from agentic_ray.graph_spec import ActionLayout, GraphSpec, random_observation, toy_specs
from agentic_ray.models import AAACModelConfig, stack_observations

TINY = AAACModelConfig(
    hidden_dim=32, num_layers=2, num_heads=2, ffn_mult=1, flat_hidden_dim=64, flat_layers=2
)


def toy_batch(batch_size: int, seed: int = 0) -> tuple[GraphSpec, ActionLayout, dict[str, torch.Tensor]]:
    """``toy_specs()`` and a batch of ``random_observation``s with random reflection vectors and failure evidence."""
    spec, layout = toy_specs()
    rng = np.random.default_rng(seed)
    obs = []
    for _ in range(batch_size):
        o = random_observation(spec, layout, rng)
        o["reflection"] = rng.random(o["reflection"].shape, dtype=np.float32)
        o["failure_evidence"] = (rng.random(o["failure_evidence"].shape) < 0.5).astype(np.float32)
        obs.append(o)
    return spec, layout, stack_observations(obs)


def permute_nodes(
    obs: dict[str, torch.Tensor],
    spec: GraphSpec,
    layout: ActionLayout,
    seed: int,
    fixed: tuple[str, ...] = (),
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Permutes the padded node rows of every type but ``fixed`` (same permutation for every batch row), remaps
    edges and shuffles edge columns.

    Returns:
        ``(permuted_obs, perms)`` where ``perms[nt][new_position] = old_position``.
    """
    gen = torch.Generator().manual_seed(seed)
    out = dict(obs)
    perms, inverse = {}, {}
    for nt, n in spec.max_nodes.items():
        perm = torch.arange(n) if nt in fixed else torch.randperm(n, generator=gen)
        perms[nt] = perm
        inverse[nt] = torch.argsort(perm)
        out[f"{nt}_x"] = obs[f"{nt}_x"][:, perm]
        out[f"{nt}_mask"] = obs[f"{nt}_mask"][:, perm]
    # Pointer/list masks index the nodes of their slot's type; copy sources the nodes of their entry's type.
    pm, lm = obs["pointer_mask"].clone(), obs["list_mask"].clone()
    for i, s in enumerate(layout.skills):
        for j, nt in enumerate(s.pointer_types):
            n = spec.max_nodes[nt]
            pm[:, i, j, :n] = obs["pointer_mask"][:, i, j, perms[nt]]
        for j, nt in enumerate(s.list_types):
            n = spec.max_nodes[nt]
            lm[:, i, j, :n] = obs["list_mask"][:, i, j, perms[nt]]
    out["pointer_mask"], out["list_mask"] = pm, lm
    if spec.num_sources:
        src, c = obs["source_mask"].clone(), 0
        for e in spec.numeric_sources:
            n = spec.max_nodes[e.node_type]
            src[:, c : c + n] = obs["source_mask"][:, c : c + n][:, perms[e.node_type]]
            c += n
        out["source_mask"] = src
    for r in spec.relations:
        ei = obs[f"{r.key}_ei"]
        new_ei = torch.stack([inverse[r.src][ei[:, 0]], inverse[r.dst][ei[:, 1]]], dim=1)
        cols = torch.randperm(r.max_edges, generator=gen)
        out[f"{r.key}_ei"] = new_ei[:, :, cols]
        out[f"{r.key}_mask"] = obs[f"{r.key}_mask"][:, cols]
    return out, perms


def ref_sequence_logp(
    items: torch.Tensor,
    stop: torch.Tensor,
    lo: int,
    hi: int,
    seq: tuple[int, ...],
    unique: bool,
    bonus: torch.Tensor | None = None,
) -> float:
    """``log p(seq)`` of a sequence slot, step by step with ``-inf`` for what is not allowed (the definition in
    ``models/sequence_functional``): ``items (T, W)``, ``stop (T,)``, ``seq`` the members (no end marker)."""
    w, n_pos = items.shape[-1], items.shape[-2]
    lp, chosen = 0.0, set()
    for t in range(n_pos):
        row = []
        for i in range(w):
            ok = t < hi and not (unique and i in chosen) and float(items[t, i]) > -1e8
            v = float(items[t, i]) + (float(bonus[t, i]) if bonus is not None else 0.0)
            row.append(v if ok else -math.inf)
        row.append(float(stop[t]) if t >= lo else -math.inf)
        z = torch.tensor(row, dtype=torch.float64).logsumexp(0)
        a = seq[t] if t < len(seq) else w
        if row[a] == -math.inf:
            return -math.inf
        lp += row[a] - float(z)
        if a == w:
            return lp
        chosen.add(a)
    return lp  # T members: no stop step


def all_sequences(
    w: int, n_pos: int, unique: bool, lo: int = 0, hi: int | None = None
) -> list[tuple[int, ...]]:
    """Every sequence of ``lo..hi`` members over ``w`` candidates (without repeats when ``unique``)."""
    out = []
    for n in range(lo, (n_pos if hi is None else hi) + 1):
        for s in itertools.product(range(w), repeat=n):
            if not unique or len(set(s)) == n:
                out.append(s)
    return out


def pad_sequence(s: tuple[int, ...], end: int, n_pos: int) -> torch.Tensor:
    """``s`` followed by ``end`` markers, ``(n_pos,)``."""
    return torch.tensor(list(s) + [end] * (n_pos - len(s)))
