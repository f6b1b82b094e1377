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
    """Head outputs (a dict so it can be returned as debug output).

    Keys: ``skill (B, K)``, ``parts`` (the :class:`PackedActionLogits`: pointer, set and sequence logits per node
    type, ``enum (B, K, E, Me)``, ``source (B, K, N, C1)``, ``numeric_mean``/``numeric_log_std (B, K, N)``) and
    ``packed (B, D)``.
    """


class SkillArgumentHeads(nn.Module):
    """Masked skill logits and, for every skill ``k``, the logits of its arguments given ``k``.

    Arguments depend on the skill through a learned skill embedding that is an input to the argument heads
    (computed for all ``K`` skills at once, so the distribution can sample the skill first and then index the
    chosen skill's arguments). Pointer slot ``p`` of skill ``k`` attends from the skill's argument context over the
    node embeddings of its type (plus a "leave it out" logit); a set slot scores every node of its type for
    membership; a sequence slot scores every node of its type at each position, from the slot's query plus a
    learned position embedding, with a stop logit per position, and a follower also reads its leader's member at
    the same position (rank-``R`` factors of both types' nodes, gated by the slot's query). Every slot is as wide as
    its node type (``ActionLayout.width``). Numeric slot ``n`` chooses, by attention over the graph spec's copy
    sources (the node embedding of the entity plus an embedding of the field), which revealed value to copy, or a
    free value from a Gaussian; with ``numeric_on_pointer`` that Gaussian is given per candidate of the skill's
    first pointer slot, from the argument context and the candidate's node embedding (so ``detect``'s threshold
    can depend on the part it inspects). Masks come from the observation (``pointer_mask``, ``list_mask``,
    ``source_mask``).

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
        numeric_on_pointer: Condition each skill's numeric arguments on the node its first pointer slot chooses
            (:attr:`PackedActionLayout.numeric_anchor`).
        task_context: Feed the encoder's task representation (:attr:`StateEncoderOutput.task`, ``(B, state_dim)``)
            to the argument context beside the state, so arguments can depend on the request directly and not only
            through the pooled state.
    """

    enum_valid: torch.Tensor
    enum_used: torch.Tensor
    numeric_used: torch.Tensor
    seq_position: nn.Parameter
    seq_stop: nn.Linear
    follow_lead: nn.ModuleDict
    follow_own: nn.ModuleDict
    follow_gate: nn.Linear
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
        numeric_on_pointer: bool = False,
        task_context: bool = False,
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
        self.packed = PackedActionLayout.from_action_layout(layout, numeric_on_pointer=numeric_on_pointer)
        pk = self.packed
        k, p, lt, e, n = pk.num_skills, pk.pointer_slots, pk.list_slots, pk.enum_slots, pk.numeric_slots
        widths = [(g.node_type, g.width) for g in pk.pointer_groups]
        widths += [(g.node_type, g.width) for g in pk.set_groups] + [
            (q.node_type, q.width) for q in pk.sequences
        ]
        for t, w in widths:
            if spec.max_nodes[t] > w:
                raise ValueError(f"node type {t!r} has {spec.max_nodes[t]} nodes > its pointer width {w}")
        ptr_types = {g.node_type for g in pk.pointer_groups}
        list_types = {g.node_type for g in pk.set_groups} | {q.node_type for q in pk.sequences}
        self.hidden_dim = hidden_dim

        enum_valid = torch.ones(k, e, pk.enum_choices, dtype=torch.bool)
        for i, s in enumerate(layout.skills):
            for j, size in enumerate(s.enum_sizes):
                enum_valid[i, j, size:] = False
        self.register_buffer("enum_valid", enum_valid, persistent=False)
        self.register_buffer(
            "enum_used", torch.tensor(pk.enum_used, dtype=torch.bool).view(k, e), persistent=False
        )
        self.register_buffer(
            "numeric_used", torch.tensor(pk.numeric_used, dtype=torch.bool).view(k, n), persistent=False
        )

        self.skill_head: nn.Module = (
            ToolGroundedScorer(state_dim, node_dim, hidden_dim, choice_skills or range(k))
            if tool_scoring
            else mlp(state_dim, hidden_dim, k)
        )
        self.skill_embedding = nn.Embedding(k, hidden_dim)
        self.tool_scoring = tool_scoring
        self.task_context = task_context
        ctx_in = (
            state_dim + hidden_dim + (node_dim if tool_scoring else 0) + (state_dim if task_context else 0)
        )
        self.argument_context = nn.Sequential(
            nn.Linear(ctx_in, hidden_dim),
            nn.GELU(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.LayerNorm(hidden_dim),
        )
        self.pointer_query = nn.Linear(hidden_dim, p * hidden_dim)
        self.pointer_omit = nn.Linear(hidden_dim, p)
        self.list_query = nn.Linear(hidden_dim, lt * hidden_dim)
        # Keys only for the types some slot points at (an unused projection would get no gradient).
        self.node_key = nn.ModuleDict({t: nn.Linear(node_dim, hidden_dim) for t in sorted(ptr_types)})
        self.list_key = nn.ModuleDict({t: nn.Linear(node_dim, hidden_dim) for t in sorted(list_types)})
        if pk.sequences:
            t_max = max(q.length for q in pk.sequences)
            self.seq_position = nn.Parameter(torch.randn(len(pk.sequences), t_max, hidden_dim) * 0.5)
            self.seq_stop = nn.Linear(hidden_dim, 1)
        followers = [q for q in pk.sequences if q.leader >= 0]
        if followers:
            r = pk.rank
            lead_types = {pk.sequences[q.leader].node_type for q in followers}
            self.follow_lead = nn.ModuleDict({t: nn.Linear(node_dim, r) for t in sorted(lead_types)})
            self.follow_own = nn.ModuleDict(
                {t: nn.Linear(node_dim, r) for t in sorted({q.node_type for q in followers})}
            )
            self.follow_gate = nn.Linear(hidden_dim, r)
        self.enum_head = nn.Linear(hidden_dim, e * pk.enum_choices)
        self.numeric_head = nn.Linear(hidden_dim, 2 * n)
        # Numeric anchor: the Gaussian of skill k's slot n for candidate c of its anchor pointer reads
        # GELU(W_ctx ctx_k + W_type node_c) (node_c = 0 for "left out" and for skills without an anchor).
        anchor_types = sorted(
            {layout.skills[i].pointer_types[a] for i, a in enumerate(pk.numeric_anchor) if a >= 0}
        )
        self.numeric_ctx = nn.Linear(hidden_dim, hidden_dim) if anchor_types else None
        self.numeric_node = nn.ModuleDict({t: nn.Linear(node_dim, hidden_dim) for t in anchor_types})
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
        if self.task_context:
            if enc.task is None:
                raise ValueError(
                    "task_context needs an encoder with a task representation (the spec's task text)"
                )
            parts.append(enc.task.unsqueeze(1).expand(b, k, enc.task.shape[-1]))
        ctx = self.argument_context(torch.cat(parts, dim=-1))  # (B, K, hd)

        def nodes(t: str, width: int) -> torch.Tensor:
            """The node embeddings of type ``t``, padded to its pointer width (a layout without per-type widths
            pads every type to ``max_pointer``)."""
            x = enc.nodes[t]
            return nn.functional.pad(x, (0, 0, 0, width - x.shape[1])) if x.shape[1] < width else x

        gi = pk.group_index(state.device)
        pq = self.pointer_query(ctx).view(b, k, p, hd)
        omit = self.pointer_omit(ctx)  # (B, K, P)
        pmask = pointer_mask
        pointers = []
        for g, (ks, ps) in zip(pk.pointer_groups, gi.pointer, strict=True):
            key = self.node_key[g.node_type](nodes(g.node_type, g.width))  # (B, W, hd)
            sc = torch.einsum("bnh,bwh->bnw", pq[:, ks, ps], key) * scale
            lg = torch.cat([sc, omit[:, ks, ps].unsqueeze(-1)], dim=-1)  # (B, n, W + 1)
            valid = torch.cat([pmask[:, ks, ps, : g.width], pmask[:, ks, ps, mp:]], dim=-1)
            pointers.append(lg.masked_fill(valid <= 0, fill))

        lq = self.list_query(ctx).view(b, k, lt, hd)
        widths = {sg.node_type: sg.width for sg in pk.set_groups} | {
            q.node_type: q.width for q in pk.sequences
        }
        lkeys = {t: self.list_key[t](nodes(t, widths[t])) for t in self.list_key}
        lmask = list_mask
        sets = []
        for sg, (ks, ls, _lo, _hi) in zip(pk.set_groups, gi.sets, strict=True):
            sc = torch.einsum("bnh,bwh->bnw", lq[:, ks, ls], lkeys[sg.node_type]) * scale
            sets.append(sc.masked_fill(lmask[:, ks, ls, : sg.width] <= 0, fill))
        seq_parts: list[torch.Tensor] = []
        for i, q in enumerate(pk.sequences):
            base = lq[:, q.skill, q.slot]  # (B, hd)
            pos_q = base.unsqueeze(1) + self.seq_position[i, : q.length]  # (B, T, hd)
            items = torch.einsum("bth,bwh->btw", pos_q, lkeys[q.node_type]) * scale
            items = items.masked_fill(lmask[:, q.skill, q.slot, None, : q.width] <= 0, fill)
            seq_parts += [items.flatten(1), self.seq_stop(pos_q).squeeze(-1)]
            if q.leader >= 0:
                lead_t = pk.sequences[q.leader].node_type
                lead_f = self.follow_lead[lead_t](nodes(lead_t, q.lead_width))  # (B, W_A, R)
                own = self.follow_own[q.node_type](nodes(q.node_type, q.width))
                own_f = own * self.follow_gate(base).unsqueeze(1)
                seq_parts += [lead_f.flatten(1), own_f.flatten(1)]

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

        if self.numeric_ctx is None:
            raw = self.numeric_head(ctx).view(b, k, n, 2)
            used = self.numeric_used
        else:
            h = self.numeric_ctx(ctx).unsqueeze(2) + self._anchor_nodes(enc, b, mp + 1)  # (B, K, Mp + 1, hd)
            raw = self.numeric_head(nn.functional.gelu(h)).view(b, k, mp + 1, n, 2).transpose(2, 3)
            used = self.numeric_used.unsqueeze(-1)
        mean = NUMERIC_BOUND * torch.tanh(raw[..., 0] / NUMERIC_BOUND)
        log_std = LOG_STD_MIN + (LOG_STD_MAX - LOG_STD_MIN) * torch.sigmoid(raw[..., 1])
        mean = torch.where(used, mean, torch.zeros_like(mean))
        log_std = torch.where(used, log_std, torch.zeros_like(log_std))

        packed = torch.cat(
            [
                skill,
                *(x.flatten(1) for x in pointers),
                *(x.flatten(1) for x in sets),
                *seq_parts,
                enum.flatten(1),
                source.flatten(1),
                mean.flatten(1),
                log_std.flatten(1),
            ],
            dim=-1,
        )
        return SkillArgumentLogits(skill=skill, parts=pk.split(packed), packed=packed)

    def _anchor_nodes(self, enc: StateEncoderOutput, b: int, candidates: int) -> torch.Tensor:
        """``(B, K, candidates, hd)``: per skill, its anchor type's projected node embeddings in the action's
        index space (zeros past the type's nodes, for "left out", and for a skill without an anchor)."""
        proj = {}
        for t, lin in self.numeric_node.items():
            x = lin(enc.nodes[t])
            proj[t] = nn.functional.pad(x, (0, 0, 0, candidates - x.shape[1]))
        zeros = enc.state.new_zeros(b, candidates, self.hidden_dim)
        rows = []
        for i, a in enumerate(self.packed.numeric_anchor):
            rows.append(proj[self.layout.skills[i].pointer_types[a]] if a >= 0 else zeros)
        return torch.stack(rows, dim=1)
