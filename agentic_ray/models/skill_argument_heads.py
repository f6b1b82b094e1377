"""Policy heads: masked skill logits and skill-conditioned argument heads, packed for one RLlib distribution."""

from __future__ import annotations

import math

import torch
from torch import nn

from agentic_ray.envs.graph_spec import NUMERIC_BOUND, ActionLayout, NumericTargetSpec
from agentic_ray.models.skill_argument_functional import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    PackedActionLayout,
    masked_fill_value,
)
from agentic_ray.models.state_encoder_output import StateEncoderOutput
from agentic_ray.models.tool_grounded_scorer import TOOL_NODE_TYPE, ToolGroundedScorer

__all__ = ["SkillArgumentHeads", "SkillArgumentLogits", "mlp"]

INITIAL_LOG_STD = -0.7
"""Initial numeric log_std (std ≈ 0.5 in raw pre-tanh units)."""

COPY_OFFSET_MAX_SIGMAS = 2.0
"""Bound of the learned offset added to a copied numeric target, in units of the argument's own σ (detached).

In σ units a precise argument stays precise under RL: Adam moves the offset's parameters by about ``lr`` per
step whatever the gradient's size, and in raw units that walked a copied coupon value sitting exactly at the
user's cap over it during a longer quickstart RL run (``benchmarks/results/quickstart.md``)."""


def mlp(in_dim: int, hidden_dim: int, out_dim: int) -> nn.Sequential:
    """``Linear → GELU → Linear``."""
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, out_dim))


class SkillArgumentLogits(dict):
    """Unpacked head outputs (a dict so it can be returned as debug output).

    Keys: ``skill (B, K)``, ``pointer (B, K, P, Mp)``, ``enum (B, K, E, Me)``, ``numeric_mean (B, K, N)``,
    ``numeric_log_std (B, K, N)``, ``packed (B, D)``.
    """


class SkillArgumentHeads(nn.Module):
    """Masked skill logits and, for every skill ``k``, the logits of its arguments given ``k``.

    Arguments depend on the skill through a learned skill embedding that is an input to the argument heads
    (computed for all ``K`` skills at once, so the distribution can sample the skill first and then index the
    chosen skill's arguments). Pointer slot ``i`` of skill ``k`` attends from the state/skill context over the
    valid node embeddings of type ``layout.skills[k].pointer_types[i]`` (``ptr_mask_{type}``).

    Args:
        layout: The action layout.
        max_nodes: Node maxima of the graph spec (pointer types must fit into ``layout.max_pointer``).
        state_dim: Width of the state embedding.
        node_dim: Width of node embeddings.
        hidden_dim: Width of the heads' hidden layers.
        tool_scoring: Score each skill from its tool node too (:class:`ToolGroundedScorer`; tool node ``k`` must
            be skill ``k``) and feed tool node ``k`` to skill ``k``'s argument heads, instead of the pooled state
            only.
        numeric_targets: Where the observation states numeric targets. When given, the mean of each skill's
            first numeric argument is copied: attention from the skill's argument context over the nodes that
            state a target for that skill picks one, and an offset of at most ``COPY_OFFSET_MAX_SIGMAS`` σ is
            added. Regressing the value through the encoder instead misses narrow tolerances (a coupon of 10
            within 2% is ±0.014 raw units). Skills with no stated target in a state keep the regressed mean.
    """

    type_index: torch.Tensor
    enum_valid: torch.Tensor
    pointer_used: torch.Tensor
    enum_used: torch.Tensor
    numeric_used: torch.Tensor

    def __init__(
        self,
        layout: ActionLayout,
        max_nodes: dict[str, int],
        state_dim: int,
        node_dim: int,
        hidden_dim: int,
        tool_scoring: bool = False,
        numeric_targets: NumericTargetSpec | None = None,
    ) -> None:
        super().__init__()
        self.layout = layout
        self.packed = PackedActionLayout.from_action_layout(layout)
        pk = self.packed
        k, p, e, n = pk.num_skills, pk.pointer_slots, pk.enum_slots, pk.numeric_slots
        types = list(layout.pointer_node_types)
        for s in layout.skills:
            types += [t for t in s.pointer_types if t not in types]
        for t in types:
            if max_nodes[t] > layout.max_pointer:
                raise ValueError(
                    f"node type {t!r} has {max_nodes[t]} nodes > max_pointer {layout.max_pointer}"
                )
        self.pointer_types: tuple[str, ...] = tuple(types) or (next(iter(max_nodes)),)
        self.max_nodes = dict(max_nodes)
        self.hidden_dim = hidden_dim

        type_index = torch.zeros(k, p, dtype=torch.long)
        enum_valid = torch.ones(k, e, pk.enum_choices, dtype=torch.bool)
        for i, s in enumerate(layout.skills):
            for j, t in enumerate(s.pointer_types):
                type_index[i, j] = self.pointer_types.index(t)
            for j, size in enumerate(s.enum_sizes):
                enum_valid[i, j, size:] = False
        self.register_buffer("type_index", type_index, persistent=False)
        self.register_buffer("enum_valid", enum_valid, persistent=False)
        self.register_buffer("pointer_used", torch.tensor(pk.pointer_used).view(k, p), persistent=False)
        self.register_buffer("enum_used", torch.tensor(pk.enum_used).view(k, e), persistent=False)
        self.register_buffer("numeric_used", torch.tensor(pk.numeric_used).view(k, n), persistent=False)

        self.skill_head: nn.Module = (
            ToolGroundedScorer(state_dim, node_dim, hidden_dim, range(k))
            if tool_scoring
            else mlp(state_dim, hidden_dim, k)
        )
        self.skill_embedding = nn.Embedding(k, hidden_dim)
        self.tool_scoring = tool_scoring
        self.argument_context = nn.Sequential(
            nn.Linear(state_dim + hidden_dim + (node_dim if tool_scoring else 0), hidden_dim),
            nn.GELU(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.LayerNorm(hidden_dim),
        )
        self.pointer_query = nn.Linear(hidden_dim, p * hidden_dim)
        self.pointer_key = nn.ModuleDict({t: nn.Linear(node_dim, hidden_dim) for t in self.pointer_types})
        self.enum_head = nn.Linear(hidden_dim, e * pk.enum_choices)
        self.numeric_head = nn.Linear(hidden_dim, 2 * n)
        with torch.no_grad():
            self.numeric_head.bias.view(n, 2)[:, 1] = math.log(
                (INITIAL_LOG_STD - LOG_STD_MIN) / (LOG_STD_MAX - INITIAL_LOG_STD)
            )
        self.numeric_targets = numeric_targets
        if numeric_targets is not None:
            nt = numeric_targets
            if nt.node_type not in max_nodes:
                raise ValueError(f"numeric_targets.node_type {nt.node_type!r} is not a node type")
            self.copy_query = nn.Linear(hidden_dim, hidden_dim)
            self.copy_key = nn.Linear(node_dim, hidden_dim)
            self.copy_offset = nn.Linear(hidden_dim, 1)
            nn.init.zeros_(self.copy_offset.weight)
            nn.init.zeros_(self.copy_offset.bias)

    def pointer_masks(self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput) -> torch.Tensor:
        """``(B, T_ptr, Mp)`` bool: valid pointer targets per pointer node type, padded to ``max_pointer``."""
        out = []
        for t in self.pointer_types:
            m = enc.node_masks[t]
            key = f"ptr_mask_{t}"
            if key in obs:
                m = m & (obs[key] > 0)
            out.append(nn.functional.pad(m, (0, self.layout.max_pointer - m.shape[1]), value=False))
        return torch.stack(out, dim=1)

    def forward(self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput) -> SkillArgumentLogits:
        """Computes all policy logits.

        Args:
            obs: Batched observation tensors (``skill_mask (B, K)``, ``ptr_mask_{nt} (B, N_nt)``).
            enc: Encoder output (``state (B, H)``, ``nodes {nt: (B, N_nt, H)}``).

        Returns:
            :class:`SkillArgumentLogits`; ``packed (B, D)`` is the distribution input (see
            ``skill_argument_functional``). Masked skills, invalid pointer targets and out-of-range enum choices
            carry :func:`masked_fill_value`; slots a skill does not use are zeros.
        """
        pk, hd = self.packed, self.hidden_dim
        state = enc.state
        b, k, p = state.shape[0], pk.num_skills, pk.pointer_slots
        fill = masked_fill_value(state.dtype)

        if isinstance(self.skill_head, ToolGroundedScorer):
            skill = self.skill_head(state, enc.nodes[TOOL_NODE_TYPE])
        else:
            skill = self.skill_head(state)
        skill = skill.masked_fill(obs["skill_mask"] <= 0, fill)

        parts = [
            state.unsqueeze(1).expand(b, k, state.shape[-1]),
            self.skill_embedding.weight.expand(b, k, hd),
        ]
        if self.tool_scoring:
            # Arguments of skill k also read tool node k: what the goal that needs this tool asks for (its
            # enum values, its numeric target) reaches the tool over the goal -needs-> tool edge.
            parts.append(enc.nodes[TOOL_NODE_TYPE])
        ctx_in = torch.cat(parts, dim=-1)
        ctx = self.argument_context(ctx_in)  # (B, K, hd)

        query = self.pointer_query(ctx).view(b, k, p, hd)
        keys = []
        for t in self.pointer_types:
            key = self.pointer_key[t](enc.nodes[t])
            keys.append(nn.functional.pad(key, (0, 0, 0, self.layout.max_pointer - key.shape[1])))
        keys_all = torch.stack(keys, dim=1)  # (B, T_ptr, Mp, hd)
        scores = torch.einsum("bkph,btmh->bkptm", query, keys_all) / math.sqrt(hd)
        k_idx = torch.arange(k, device=state.device).view(k, 1).expand(k, p)
        p_idx = torch.arange(p, device=state.device).view(1, p).expand(k, p)
        pointer = scores[:, k_idx, p_idx, self.type_index]  # (B, K, P, Mp)
        ptr_valid = self.pointer_masks(obs, enc)[:, self.type_index]  # (B, K, P, Mp)
        pointer = pointer.masked_fill(~ptr_valid, fill)
        pointer = torch.where(self.pointer_used.unsqueeze(-1), pointer, torch.zeros_like(pointer))

        enum = self.enum_head(ctx).view(b, k, pk.enum_slots, pk.enum_choices)
        enum = enum.masked_fill(~self.enum_valid, fill)
        enum = torch.where(self.enum_used.unsqueeze(-1), enum, torch.zeros_like(enum))

        raw = self.numeric_head(ctx).view(b, k, pk.numeric_slots, 2)
        mean = NUMERIC_BOUND * torch.tanh(raw[..., 0] / NUMERIC_BOUND)
        log_std = LOG_STD_MIN + (LOG_STD_MAX - LOG_STD_MIN) * torch.sigmoid(raw[..., 1])
        if self.numeric_targets is not None:
            mean = self._copy_numeric_targets(obs, enc, ctx, mean, log_std, fill)
        mean = torch.where(self.numeric_used, mean, torch.zeros_like(mean))
        log_std = torch.where(self.numeric_used, log_std, torch.zeros_like(log_std))

        packed = torch.cat(
            [skill, pointer.flatten(1), enum.flatten(1), mean.flatten(1), log_std.flatten(1)], dim=-1
        )
        return SkillArgumentLogits(
            skill=skill, pointer=pointer, enum=enum, numeric_mean=mean, numeric_log_std=log_std, packed=packed
        )

    def _copy_numeric_targets(
        self,
        obs: dict[str, torch.Tensor],
        enc: StateEncoderOutput,
        ctx: torch.Tensor,
        mean: torch.Tensor,
        log_std: torch.Tensor,
        fill: float,
    ) -> torch.Tensor:
        """``mean (B, K, N)`` with slot 0 replaced by an attention-weighted copy of the stated targets plus an
        offset of at most :data:`COPY_OFFSET_MAX_SIGMAS` σ, where skill ``k`` has at least one target node in the
        state."""
        nt = self.numeric_targets
        assert nt is not None
        x = obs[f"{nt.node_type}_x"]  # (B, G, F)
        b, g = x.shape[0], x.shape[1]
        k = ctx.shape[1]
        stated = (obs[f"{nt.node_type}_mask"] > 0) & (x[..., nt.flag_col] > 0.5)  # (B, G)
        cand = stated.unsqueeze(1).expand(b, k, g)
        if nt.skill_col is not None:
            cand = cand & (x[..., nt.skill_col : nt.skill_col + k].transpose(1, 2) > 0.5)  # (B, K, G)
        target = nt.action_value(x[..., nt.value_col])  # (B, G)
        score = torch.einsum(
            "bkh,bgh->bkg", self.copy_query(ctx), self.copy_key(enc.nodes[nt.node_type])
        ) / math.sqrt(self.hidden_dim)
        attn = torch.softmax(score.masked_fill(~cand, fill), dim=-1)
        copied = (attn * target.unsqueeze(1)).sum(-1)  # (B, K)
        sigma = log_std[..., 0].detach().exp()  # (B, K)
        offset = sigma * COPY_OFFSET_MAX_SIGMAS * torch.tanh(self.copy_offset(ctx).squeeze(-1))
        anchored = (copied + offset).clamp(-NUMERIC_BOUND, NUMERIC_BOUND)
        use = cand.any(-1) & self.numeric_used[:, 0]  # (B, K)
        slot0 = torch.where(use, anchored, mean[..., 0])
        return torch.cat([slot0.unsqueeze(-1), mean[..., 1:]], dim=-1)
