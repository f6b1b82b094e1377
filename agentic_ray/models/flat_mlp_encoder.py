"""Flat-MLP baseline state encoder over the same padded observation (for comparison with the GNN)."""

from __future__ import annotations

import torch
from torch import nn

from agentic_ray.graph_spec import GraphSpec
from agentic_ray.models.batched_hetero_graph import node_mask
from agentic_ray.models.reflection import ReflectionFn, readout_with_reflection
from agentic_ray.models.state_encoder_output import StateEncoderOutput

__all__ = ["FlatMLPEncoder"]


class FlatMLPEncoder(nn.Module):
    """Concatenates masked node features, node masks, per-relation dense adjacency counts and the reflection
    vector into one vector and runs an MLP. Node embeddings (for pointer heads) come from a per-type MLP over
    ``[node features ‖ state]``.

    Args:
        spec: Graph spec.
        hidden_dim: ``H``, width of the state and node embeddings.
        mlp_hidden_dim: Width of the trunk's hidden layers.
        mlp_layers: Number of hidden layers of the trunk.
        reflection_dim: Width of the failure input, ``obs["reflection"]`` (default: the spec's root causes).
    """

    def __init__(
        self,
        spec: GraphSpec,
        hidden_dim: int = 128,
        mlp_hidden_dim: int = 768,
        mlp_layers: int = 3,
        reflection_dim: int | None = None,
    ):
        super().__init__()
        self.spec = spec
        self.hidden_dim = hidden_dim
        in_dim = sum(n * (spec.feat_dims[nt] + 1) for nt, n in spec.max_nodes.items())
        in_dim += sum(spec.max_nodes[r.src] * spec.max_nodes[r.dst] for r in spec.relations)
        in_dim += reflection_dim or len(spec.root_causes)
        self.input_dim = in_dim
        layers: list[nn.Module] = []
        width = in_dim
        for _ in range(mlp_layers):
            layers += [nn.Linear(width, mlp_hidden_dim), nn.GELU()]
            width = mlp_hidden_dim
        layers += [nn.Linear(width, hidden_dim), nn.LayerNorm(hidden_dim)]
        self.trunk = nn.Sequential(*layers)
        self.node_proj = nn.ModuleDict(
            {
                nt: nn.Sequential(
                    nn.Linear(spec.feat_dims[nt] + hidden_dim, hidden_dim),
                    nn.GELU(),
                    nn.Linear(hidden_dim, hidden_dim),
                )
                for nt in spec.node_types
            }
        )

    def adjacency_counts(self, obs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Dense per-relation edge counts of real edges: one ``(B, N_src·N_dst)`` tensor per relation."""
        out = []
        for r in self.spec.relations:
            ei = obs[f"{r.key}_ei"].long()
            n_src, n_dst = self.spec.max_nodes[r.src], self.spec.max_nodes[r.dst]
            b = ei.shape[0]
            valid = (obs[f"{r.key}_mask"] > 0) & (ei[:, 0] < n_src) & (ei[:, 1] < n_dst)
            flat = ei[:, 0].clamp(0, n_src - 1) * n_dst + ei[:, 1].clamp(0, n_dst - 1)
            counts = torch.zeros(b, n_src * n_dst, device=ei.device)
            out.append(counts.scatter_add_(1, flat, valid.float()))
        return out

    def forward(
        self,
        obs: dict[str, torch.Tensor],
        return_debug: bool = False,
        reflection_fn: ReflectionFn | None = None,
    ) -> StateEncoderOutput:
        """Encodes a batch.

        Args:
            obs: Batched observation tensors (see ``graph_spec``).
            return_debug: Accepted for interface parity; the flat encoder has no attention to report.
            reflection_fn: If given, the trunk's reflection input is ``reflection_fn(reflection_free_state)``
                instead of ``obs["reflection"]`` (see :mod:`agentic_ray.models.reflection`).

        Returns:
            ``StateEncoderOutput`` with ``state (B, H)`` and ``nodes {nt: (B, N_nt, H)}``.
        """
        masks = {nt: node_mask(obs, nt) for nt in self.spec.node_types}
        xs = {nt: obs[f"{nt}_x"].float() * masks[nt].unsqueeze(-1) for nt in self.spec.node_types}
        b = masks[self.spec.node_types[0]].shape[0]
        parts = [xs[nt].reshape(b, -1) for nt in self.spec.node_types]
        parts += [masks[nt].float() for nt in self.spec.node_types]
        parts += self.adjacency_counts(obs)
        state, free = readout_with_reflection(self.trunk, parts, obs["reflection"].float(), reflection_fn)
        nodes = {}
        for nt in self.spec.node_types:
            n = self.spec.max_nodes[nt]
            ctx = state.unsqueeze(1).expand(b, n, self.hidden_dim)
            nodes[nt] = self.node_proj[nt](torch.cat([xs[nt], ctx], dim=-1))
        return StateEncoderOutput(state=state, nodes=nodes, node_masks=masks, reflection_free_state=free)
