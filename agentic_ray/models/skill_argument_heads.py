"""Policy heads: masked skill logits and skill-conditioned argument heads, packed for one RLlib distribution."""

from __future__ import annotations

import math

import torch
from torch import nn

from agentic_ray.graph_spec import NUMERIC_BOUND, TOOL_NODE_TYPE, ActionLayout, GraphSpec
from agentic_ray.models.skill_argument_functional import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    PackedActionLayout,
    masked_fill_value,
)
from agentic_ray.models.state_encoder_output import StateEncoderOutput
from agentic_ray.models.tool_grounded_scorer import ToolGroundedScorer

__all__ = ["SkillArgumentHeads", "SkillArgumentLogits", "mlp"]

INITIAL_LOG_STD = -0.7
"""Initial numeric log_std (std ≈ 0.5 in raw pre-tanh units)."""


def mlp(in_dim: int, hidden_dim: int, out_dim: int) -> nn.Sequential:
    """``Linear → GELU → Linear``."""
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, out_dim))


class SkillArgumentLogits(dict):
    """Unpacked head outputs (a dict so it can be returned as debug output).

    Keys: ``skill (B, K)``, ``pointer (B, K, P, Mp1)``, ``members (B, K, L, Mp)``, ``enum (B, K, E, Me)``,
    ``source (B, K, N, C1)``, ``numeric_mean (B, K, N)``, ``numeric_log_std (B, K, N)``, ``packed (B, D)``.
    """


class SkillArgumentHeads(nn.Module):
    """Masked skill logits and, for every skill ``k``, the logits of its arguments given ``k``.

    Arguments depend on the skill through a learned skill embedding that is an input to the argument heads
    (computed for all ``K`` skills at once, so the distribution can sample the skill first and then index the
    chosen skill's arguments). Pointer slot ``p`` of skill ``k`` attends from the skill's argument context over the
    node embeddings of its type (plus a "leave it out" logit); list slot ``l`` scores every node of its type for
    membership; numeric slot ``n`` chooses, by attention over the graph spec's copy sources (the node embedding of
    the entity plus an embedding of the field), which revealed value to copy, or a free value from a Gaussian.
    Masks come from the observation (``pointer_mask``, ``list_mask``, ``source_mask``).

    Args:
        spec: The graph spec (node maxima, copy sources).
        layout: The action layout.
        state_dim: Width of the state embedding.
        node_dim: Width of node embeddings.
        hidden_dim: Width of the heads' hidden layers.
        tool_scoring: Score each skill from its tool node too (:class:`ToolGroundedScorer`; tool node ``k`` must
            be skill ``k``) and feed tool node ``k`` to skill ``k``'s argument heads.
        choice_skills: Prototype mode: ``layout`` is the prototype layout (one choice per prototype,
            :meth:`~agentic_ray.graph_spec.ActionLayout.prototype_layout`) and choice ``j`` acts with skill
            ``choice_skills[j]``: its tool node, its fix prior, and its rows of the observation's
            ``pointer_mask``/``list_mask``; the choice mask is ``proto_mask``. None: one choice per skill.
    """

    type_index: torch.Tensor
    list_type_index: torch.Tensor
    enum_valid: torch.Tensor
    pointer_used: torch.Tensor
    list_used: torch.Tensor
    enum_used: torch.Tensor
    numeric_used: torch.Tensor
    choice_skills: torch.Tensor | None

    def __init__(
        self,
        spec: GraphSpec,
        layout: ActionLayout,
        state_dim: int,
        node_dim: int,
        hidden_dim: int,
        tool_scoring: bool = False,
        choice_skills: tuple[int, ...] | None = None,
    ) -> None:
        super().__init__()
        self.spec, self.layout = spec, layout
        if choice_skills is not None and len(choice_skills) != layout.num_skills:
            raise ValueError(
                f"choice_skills has {len(choice_skills)} entries for {layout.num_skills} choices"
            )
        self.register_buffer(
            "choice_skills",
            None if choice_skills is None else torch.tensor(choice_skills, dtype=torch.long),
            persistent=False,
        )
        self.packed = PackedActionLayout.from_action_layout(layout)
        pk = self.packed
        k, p, lt, e, n = pk.num_skills, pk.pointer_slots, pk.list_slots, pk.enum_slots, pk.numeric_slots
        types = [
            t
            for t in layout.pointer_node_types
            if any(t in (*s.pointer_types, *s.list_types) for s in layout.skills)
        ]
        for s in layout.skills:
            types += [t for t in (*s.pointer_types, *s.list_types) if t not in types]
        for t in types:
            if spec.max_nodes[t] > layout.max_pointer:
                raise ValueError(
                    f"node type {t!r} has {spec.max_nodes[t]} nodes > max_pointer {layout.max_pointer}"
                )
        self.pointer_types: tuple[str, ...] = tuple(types) or (next(iter(spec.max_nodes)),)
        ptr_types = {t for s in layout.skills for t in s.pointer_types}
        list_types = {t for s in layout.skills for t in s.list_types}
        self.hidden_dim = hidden_dim

        type_index = torch.zeros(k, p, dtype=torch.long)
        list_type_index = torch.zeros(k, lt, dtype=torch.long)
        enum_valid = torch.ones(k, e, pk.enum_choices, dtype=torch.bool)
        for i, s in enumerate(layout.skills):
            for j, t in enumerate(s.pointer_types):
                type_index[i, j] = self.pointer_types.index(t)
            for j, t in enumerate(s.list_types):
                list_type_index[i, j] = self.pointer_types.index(t)
            for j, size in enumerate(s.enum_sizes):
                enum_valid[i, j, size:] = False
        self.register_buffer("type_index", type_index, persistent=False)
        self.register_buffer("list_type_index", list_type_index, persistent=False)
        self.register_buffer("enum_valid", enum_valid, persistent=False)
        self.register_buffer("pointer_used", torch.tensor(pk.pointer_used).view(k, p), persistent=False)
        self.register_buffer("list_used", torch.tensor(pk.list_used).view(k, lt), persistent=False)
        self.register_buffer("enum_used", torch.tensor(pk.enum_used).view(k, e), persistent=False)
        self.register_buffer("numeric_used", torch.tensor(pk.numeric_used).view(k, n), persistent=False)

        self.skill_head: nn.Module = (
            ToolGroundedScorer(state_dim, node_dim, hidden_dim, choice_skills or range(k))
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
        self.pointer_omit = nn.Linear(hidden_dim, p)
        self.list_query = nn.Linear(hidden_dim, lt * hidden_dim)
        # Keys only for the types some slot points at (an unused projection would get no gradient).
        self.node_key = nn.ModuleDict(
            {t: nn.Linear(node_dim, hidden_dim) for t in self.pointer_types if t in ptr_types}
        )
        self.list_key = nn.ModuleDict(
            {t: nn.Linear(node_dim, hidden_dim) for t in self.pointer_types if t in list_types}
        )
        self.enum_head = nn.Linear(hidden_dim, e * pk.enum_choices)
        self.numeric_head = nn.Linear(hidden_dim, 2 * n)
        with torch.no_grad():
            self.numeric_head.bias.view(n, 2)[:, 1] = math.log(
                (INITIAL_LOG_STD - LOG_STD_MIN) / (LOG_STD_MAX - INITIAL_LOG_STD)
            )
        # Copy sources: source c = (entry j, node i); key = W_type(node embedding) + field embedding e_j.
        table = spec.source_table()
        self.num_sources = len(table)
        src_types = sorted({s.node_type for s in spec.numeric_sources})
        self.source_types = tuple(src_types)
        self.source_key = nn.ModuleDict({t: nn.Linear(node_dim, hidden_dim) for t in src_types})
        self.source_field = nn.Embedding(max(len(spec.numeric_sources), 1), hidden_dim)
        self.source_query = nn.Linear(hidden_dim, n * hidden_dim)
        self.source_free = nn.Linear(hidden_dim, n)
        self.register_buffer(
            "source_entry", torch.tensor([j for j, _ in table] or [0], dtype=torch.long), persistent=False
        )

    def forward(self, obs: dict[str, torch.Tensor], enc: StateEncoderOutput) -> SkillArgumentLogits:
        """Computes all policy logits.

        Args:
            obs: Batched observation tensors (``skill_mask (B, K)``, ``pointer_mask (B, K, P, Mp1)``,
                ``list_mask (B, K, L, Mp)``, ``source_mask (B, C)``; in prototype mode ``proto_mask``, and the
                prototypes' skills' rows of the argument masks).
            enc: Encoder output (``state (B, H)``, ``nodes {nt: (B, N_nt, H)}``).

        Returns:
            :class:`SkillArgumentLogits`; ``packed (B, D)`` is the distribution input (see
            ``skill_argument_functional``). Masked choices carry :func:`masked_fill_value`; slots a skill does
            not use are zeros.
        """
        pk, hd, lay = self.packed, self.hidden_dim, self.layout
        state = enc.state
        b, k, p, lt, n = state.shape[0], pk.num_skills, pk.pointer_slots, pk.list_slots, pk.numeric_slots
        mp = lay.max_pointer
        fill = masked_fill_value(state.dtype)
        scale = 1.0 / math.sqrt(hd)
        sel = self.choice_skills
        if sel is None:
            choice_mask, pointer_mask, list_mask = obs["skill_mask"], obs["pointer_mask"], obs["list_mask"]
            prior, tools = enc.skill_prior, enc.nodes.get(TOOL_NODE_TYPE)
        else:  # prototype j acts with skill sel[j]: its masks, fix prior and tool node
            choice_mask = obs["proto_mask"]
            pointer_mask, list_mask = obs["pointer_mask"][:, sel, :p], obs["list_mask"][:, sel, :lt]
            prior = None if enc.skill_prior is None else enc.skill_prior[:, sel]
            tools = enc.nodes[TOOL_NODE_TYPE][:, sel] if self.tool_scoring else None

        if isinstance(self.skill_head, ToolGroundedScorer):
            skill = self.skill_head(state, enc.nodes[TOOL_NODE_TYPE])
        else:
            skill = self.skill_head(state)
        if prior is not None:
            skill = skill + prior
        skill = skill.masked_fill(choice_mask <= 0, fill)

        parts = [
            state.unsqueeze(1).expand(b, k, state.shape[-1]),
            self.skill_embedding.weight.expand(b, k, hd),
        ]
        if self.tool_scoring:
            # Arguments of skill k also read tool node k: what the goal that needs this tool asks for (its enum
            # values, its hints) reaches the tool over the goal -needs-> tool edge.
            assert tools is not None
            parts.append(tools)
        ctx = self.argument_context(torch.cat(parts, dim=-1))  # (B, K, hd)

        def keys(proj: nn.ModuleDict) -> torch.Tensor:
            ks = []
            for t in self.pointer_types:  # zeros for a type this kind of slot never points at
                key = proj[t](enc.nodes[t]) if t in proj else state.new_zeros(b, mp, hd)
                ks.append(nn.functional.pad(key, (0, 0, 0, mp - key.shape[1])))
            return torch.stack(ks, dim=1)  # (B, T_ptr, Mp, hd)

        k_idx = torch.arange(k, device=state.device).view(k, 1)
        query = self.pointer_query(ctx).view(b, k, p, hd)
        scores = torch.einsum("bkph,btmh->bkptm", query, keys(self.node_key)) * scale
        pointer = scores[
            :,
            k_idx.expand(k, p),
            torch.arange(p, device=state.device).view(1, p).expand(k, p),
            self.type_index,
        ]
        pointer = torch.cat([pointer, self.pointer_omit(ctx).unsqueeze(-1)], dim=-1)  # (B, K, P, Mp1)
        pointer = pointer.masked_fill(pointer_mask <= 0, fill)
        pointer = torch.where(self.pointer_used.unsqueeze(-1), pointer, torch.zeros_like(pointer))

        lq = self.list_query(ctx).view(b, k, lt, hd)
        lscores = torch.einsum("bklh,btmh->bkltm", lq, keys(self.list_key)) * scale
        members = lscores[
            :,
            k_idx.expand(k, lt),
            torch.arange(lt, device=state.device).view(1, lt).expand(k, lt),
            self.list_type_index,
        ]  # (B, K, L, Mp)
        members = members.masked_fill(list_mask <= 0, fill)
        members = torch.where(self.list_used.unsqueeze(-1), members, torch.zeros_like(members))

        enum = self.enum_head(ctx).view(b, k, pk.enum_slots, pk.enum_choices)
        enum = enum.masked_fill(~self.enum_valid, fill)
        enum = torch.where(self.enum_used.unsqueeze(-1), enum, torch.zeros_like(enum))

        free = self.source_free(ctx).view(b, k, n, 1)
        if self.num_sources:
            src_keys = []
            for s in self.spec.numeric_sources:
                src_keys.append(self.source_key[s.node_type](enc.nodes[s.node_type]))
            skey = torch.cat(src_keys, dim=1) + self.source_field(self.source_entry)  # (B, C, hd)
            sq = self.source_query(ctx).view(b, k, n, hd)
            sscore = torch.einsum("bknh,bch->bknc", sq, skey) * scale
            sscore = sscore.masked_fill(obs["source_mask"][:, None, None, : self.num_sources] <= 0, fill)
            source = torch.cat([free, sscore], dim=-1)
        else:
            source = free
        source = torch.where(self.numeric_used.unsqueeze(-1), source, torch.zeros_like(source))

        raw = self.numeric_head(ctx).view(b, k, n, 2)
        mean = NUMERIC_BOUND * torch.tanh(raw[..., 0] / NUMERIC_BOUND)
        log_std = LOG_STD_MIN + (LOG_STD_MAX - LOG_STD_MIN) * torch.sigmoid(raw[..., 1])
        mean = torch.where(self.numeric_used, mean, torch.zeros_like(mean))
        log_std = torch.where(self.numeric_used, log_std, torch.zeros_like(log_std))

        packed = torch.cat(
            [
                skill,
                pointer.flatten(1),
                members.flatten(1),
                enum.flatten(1),
                source.flatten(1),
                mean.flatten(1),
                log_std.flatten(1),
            ],
            dim=-1,
        )
        return SkillArgumentLogits(
            skill=skill,
            pointer=pointer,
            members=members,
            enum=enum,
            source=source,
            numeric_mean=mean,
            numeric_log_std=log_std,
            packed=packed,
        )
