"""Pure tensor maths of the autoregressive skill → arguments distribution (no Ray).

The policy emits one flat vector per row (``action_dist_inputs``) that holds the skill logits and, for EVERY skill
``k``, the logits of the arguments that skill would take::

    [ skill (K) | pointer groups | set groups | sequence slots | enum (K·E·Me) | source (K·N·C1)
      | numeric mean (K·N) | numeric log_std (K·N) ]

Entity arguments are packed per node type, at that type's width ``W`` (its node cap), and only for the slots that
some skill uses:

* a *pointer group* holds every pointer slot ``(k, p)`` over one node type: ``n × (W + 1)`` logits (the last
  choice = the argument is left out);
* a *set group* every list slot with set semantics over one type: ``n × W`` per-candidate logits, a set of size in
  ``[lo, hi]`` (:mod:`agentic_ray.models.set_functional`);
* a *sequence slot* (an ordered list, a list with repeats, or a list paired by position; see
  :meth:`~agentic_ray.graph_spec.SkillSlots.is_sequence`): ``T × W`` item logits and ``T`` stop logits, and for a
  follower the rank-``R`` factors of its leader's and its own candidates (:mod:`agentic_ray.models.
  sequence_functional`).

``E`` enum slots of ``Me`` choices; ``N`` numeric slots, each with a copy-source choice of ``C1 = C + 1`` (0 = a free
value, ``c + 1`` = copy source ``c``) and a Gaussian free value. Sampling draws the skill first, then the arguments
of that skill. Given the skill, argument slots are independent (but a follower follows its leader, and with a numeric
anchor, a numeric slot's Gaussian is the one of the candidate the skill's anchor pointer chose), only the slots the
skill uses count, and a numeric slot's Gaussian counts only when it is free::

    logp(a)  = log p(k) + Σ_{used slots i of k} log p(arg_i | k),
               log p(numeric_n | k) = log p(src_n | k) + 1[src_n = 0] · log N(x_n; μ, σ)
    H        = H(skill) + Σ_k p(k) · Σ_{used i of k} H(arg_i | k),   H(numeric_n) = H(src_n) + p(free)·H(N)
    KL(p‖q)  = KL(skill) + Σ_k p(k) · Σ_{used i of k} KL(arg_i | k), KL(numeric_n) = KL(src) + p(free)·KL(N)

With a numeric anchor (:attr:`PackedActionLayout.numeric_anchor`: skill ``k``'s numeric arguments conditioned on its
pointer slot ``a_k``), the Gaussian is ``N(x_n; μ_{k,n,c}, σ_{k,n,c})`` at the anchor's chosen candidate ``c``, and
its entropy and KL terms are expectations over the anchor: ``Σ_c p(a_k = c | k) · H(N_{k,n,c})``, and
``Σ_c p(a_k = c | k) · KL(N^p_{k,n,c} ‖ N^q_{k,n,c})`` (exact, since the pointer's own entropy and KL are already
counted: ``H(a, x) = H(a) + E_a H(x | a)``).

All are exact except the entropy and KL of a sequence slot whose step distributions depend on what was drawn before
(a ``unique`` ordered list, and a follower, which reads its leader's members): for those the per-step entropy and
KL are summed along one sequence drawn from ``p`` (from the first distribution for KL), an unbiased estimate
(:mod:`agentic_ray.models.sequence_functional` says exactly what is computed). Masked choices carry a large finite
negative logit (:func:`masked_fill_value`), so every quantity stays finite: their probability underflows to exactly
0 and ``0 · finite = 0``.

The layout of the packed vector is :class:`~agentic_ray.models.packed_action_layout.PackedActionLayout` (re-exported
here). Actions (``ActionLayout.action_space()``): ``pointer (B, P)`` with ``Mp`` = left out, ``members (B, L·T)`` with
``Mp`` = the end of a list, ``enum (B, E)``, ``source (B, N)``, ``numeric (B, N)``. Within a type of width ``W`` a
pointer or member index ``>= W`` reads as left out / the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from agentic_ray.models.packed_action_layout import (
    FOLLOWER_RANK,
    LOG_STD_MAX,
    LOG_STD_MIN,
    PackedActionLayout,
    PackedActionLogits,
    PointerGroup,
    SequenceSlot,
    SetGroup,
    masked_fill_value,
)
from agentic_ray.models.sequence_functional import (
    follower_bonus,
    sequence_entropy,
    sequence_kl,
    sequence_length,
    sequence_logp,
    sequence_mode,
    sequence_sample,
    sequence_step_logits,
)
from agentic_ray.models.set_functional import (
    categorical_sample,
    set_entropy,
    set_kl,
    set_logp,
    set_marginals,
    set_mode,
    set_sample,
)

__all__ = [
    "FOLLOWER_RANK",
    "LOG_STD_MAX",
    "LOG_STD_MIN",
    "PackedActionLayout",
    "PackedActionLogits",
    "PointerGroup",
    "SequenceSlot",
    "SetGroup",
    "anchor_probs",
    "masked_fill_value",
    "member_probs",
    "numeric_params",
    "sigma_scaled_mean",
    "skill_argument_entropy",
    "skill_argument_kl",
    "skill_argument_logp",
    "skill_argument_mode",
    "skill_argument_sample",
]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _select_skill(t: torch.Tensor, skill: torch.Tensor) -> torch.Tensor:
    """``t[b, skill[b]]`` for ``t`` of shape ``(B, K, ...)`` → ``(B, ...)``."""
    idx = skill.long().view(-1, *([1] * (t.dim() - 1))).expand(-1, 1, *t.shape[2:])
    return t.gather(1, idx).squeeze(1)


def _anchor_candidate(layout: PackedActionLayout, skill: torch.Tensor, pointer: torch.Tensor) -> torch.Tensor:
    """``(B,)``: the candidate (action index space, ``Mp`` = left out) the chosen skill's anchor pointer took."""
    gi = layout.group_index(skill.device)
    anchor, width = gi.anchor[skill], gi.anchor_width[skill]
    idx = pointer.long().gather(1, anchor.clamp(min=0).unsqueeze(1)).squeeze(1)
    out_of_type = (anchor < 0) | (idx < 0) | (idx >= width)
    return torch.where(out_of_type, torch.full_like(idx, layout.max_pointer), idx)


def numeric_params(
    parts: PackedActionLogits, layout: PackedActionLayout, skill: torch.Tensor, pointer: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, N)`` mean and log-std of the chosen skill's numeric slots, given the action's pointers ``(B, P)``
    (read only with a numeric anchor: the Gaussian of the candidate the skill's anchor slot chose)."""
    mean = _select_skill(parts.numeric_mean, skill)
    log_std = _select_skill(parts.numeric_log_std, skill)
    if not layout.numeric_anchor:
        return mean, log_std
    c = _anchor_candidate(layout, skill, pointer).view(-1, 1, 1).expand(-1, mean.shape[1], 1)
    return mean.gather(-1, c).squeeze(-1), log_std.gather(-1, c).squeeze(-1)


def anchor_probs(parts: PackedActionLogits, layout: PackedActionLayout) -> torch.Tensor:
    """``(B, K, Mp + 1)``: the probability of each candidate of each skill's numeric anchor slot (a skill without
    an anchor takes the "left out" candidate ``Mp`` surely)."""
    b, mp = parts.skill.shape[0], layout.max_pointer
    left_out = F.one_hot(torch.tensor(mp, device=parts.skill.device), mp + 1).to(parts.skill.dtype)
    rows: list[torch.Tensor] = [left_out.expand(b, mp + 1)] * layout.num_skills
    for g, lg in zip(layout.pointer_groups, parts.pointers, strict=True):
        pr = F.softmax(lg, dim=-1)
        for n, (k, p) in enumerate(zip(g.skills, g.slots, strict=True)):
            if layout.numeric_anchor[k] == p:
                rows[k] = torch.cat([F.pad(pr[:, n, : g.width], (0, mp - g.width)), pr[:, n, g.width :]], -1)
    return torch.stack(rows, dim=1)


def _over_anchor(parts: PackedActionLogits, layout: PackedActionLayout, x: torch.Tensor) -> torch.Tensor:
    """``(B, K, N)``: a per-candidate term ``x (B, K, N, Mp + 1)`` in expectation over each skill's anchor (``x``
    itself without an anchor)."""
    if not layout.numeric_anchor:
        return x
    return (anchor_probs(parts, layout).unsqueeze(2) * x).sum(-1)


def _categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = F.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def _categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    logp = F.log_softmax(p_logits, dim=-1)
    logq = F.log_softmax(q_logits, dim=-1)
    return (logp.exp() * (logp - logq)).sum(-1)


def _members(layout: PackedActionLayout, action: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(B, L, T)`` long: the action's list members."""
    m = action["members"].long()
    return m.reshape(m.shape[0], layout.list_slots, layout.list_length)


def _as_width(idx: torch.Tensor, width: int) -> torch.Tensor:
    """Action indices → indices within a type of ``width`` (``>= width``: left out / the end)."""
    return torch.where(idx >= width, torch.full_like(idx, width), idx.clamp(min=0))


def _to_action(idx: torch.Tensor, width: int, max_pointer: int) -> torch.Tensor:
    """Indices within a type → action indices (``width`` → ``max_pointer``)."""
    return torch.where(idx >= width, torch.full_like(idx, max_pointer), idx)


def _bits(seq: torch.Tensor, width: int) -> torch.Tensor:
    """``(..., T)`` indices (``>= width`` = none) → ``(..., W)`` 0/1 membership."""
    onehot = F.one_hot(_as_width(seq, width), width + 1)[..., :width]
    return onehot.sum(-2).clamp(max=1)


def _set_to_seq(bits: torch.Tensor, length: int, width: int) -> torch.Tensor:
    """``(..., W)`` 0/1 → ``(..., length)`` the members in increasing order, then ``width`` (the end)."""
    pos = torch.arange(width, device=bits.device).expand_as(bits)
    order = torch.where(bits > 0, pos, torch.full_like(pos, width)).sort(-1).values
    if order.shape[-1] < length:
        order = F.pad(order, (0, length - order.shape[-1]), value=width)
    return order[..., :length]


def _set_lists(
    parts: PackedActionLogits,
    layout: PackedActionLayout,
    skill: torch.Tensor,
    members: torch.Tensor,
    draw: Callable[[torch.Tensor, SetGroup, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Writes the chosen skill's set slots into ``members (B, L, T)`` (``draw`` → ``(B, n, W)`` 0/1)."""
    gi = layout.group_index(skill.device)
    for g, lg, (_ks, _ls, lo, hi) in zip(layout.set_groups, parts.sets, gi.sets, strict=True):
        seq = _to_action(
            _set_to_seq(draw(lg, g, lo, hi), layout.list_length, g.width), g.width, layout.max_pointer
        )
        for n, (k, li) in enumerate(zip(g.skills, g.slots, strict=True)):
            mine = (skill == k).unsqueeze(-1)
            members[:, li] = torch.where(mine, seq[:, n], members[:, li])


def _pointer_action(
    parts: PackedActionLogits,
    layout: PackedActionLayout,
    skill: torch.Tensor,
    pick: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """``(B, P)``: the chosen skill's pointers (``pick``: ``(B, n, W + 1)`` logits → ``(B, n)`` indices)."""
    out = torch.zeros(skill.shape[0], layout.pointer_slots, dtype=torch.long, device=skill.device)
    gi = layout.group_index(skill.device)
    for g, lg, (ks, ps) in zip(layout.pointer_groups, parts.pointers, gi.pointer, strict=True):
        idx = _to_action(pick(lg), g.width, layout.max_pointer)
        mine = skill.unsqueeze(-1) == ks
        out.scatter_add_(1, ps.expand_as(idx), idx * mine.long())
    return out


def _sequence_inputs(
    parts: PackedActionLogits, layout: PackedActionLayout, i: int, lead_seq: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(lo, hi, bonus)`` of sequence slot ``i`` (a follower's from its leader's sequence ``lead_seq``)."""
    q = layout.sequences[i]
    dev = parts.skill.device
    if q.leader < 0:
        return torch.tensor(q.lo, device=dev), torch.tensor(q.hi, device=dev), None
    assert lead_seq is not None
    lead_f, own_f = parts.seq_lead[i], parts.seq_own[i]
    assert lead_f is not None and own_f is not None
    n = sequence_length(lead_seq, q.lead_width)
    return n, n, follower_bonus(lead_seq, lead_f, own_f)


def _sequences(
    parts: PackedActionLogits,
    layout: PackedActionLayout,
    decode: Callable[..., torch.Tensor],
    only: Sequence[bool] | None = None,
) -> list[torch.Tensor | None]:
    """One sequence ``(B, T)`` per sequence slot within its width, leaders first (``decode``:
    :func:`sequence_sample` or :func:`sequence_mode`); with ``only``, just the slots it marks (None elsewhere)."""
    out: list[torch.Tensor | None] = []
    for i, q in enumerate(layout.sequences):
        if only is not None and not only[i]:
            out.append(None)
            continue
        lo, hi, bonus = _sequence_inputs(parts, layout, i, out[q.leader] if q.leader >= 0 else None)
        out.append(decode(parts.seq_items[i], parts.seq_stop[i], lo, hi, unique=q.unique, bonus=bonus))
    return out


def _estimate_draws(parts: PackedActionLogits, layout: PackedActionLayout) -> list[torch.Tensor | None]:
    """The sequences the entropy and KL estimates run along, drawn from ``parts``: a ``unique`` slot's own, and a
    leader's for its followers (a history-free slot's part is exact and needs none)."""
    need = [q.unique for q in layout.sequences]
    for q in layout.sequences:
        if q.leader >= 0:
            need[q.leader] = True
    return _sequences(parts, layout, sequence_sample, need) if any(need) else [None] * len(need)


def _write_sequences(
    layout: PackedActionLayout,
    skill: torch.Tensor,
    seqs: Sequence[torch.Tensor | None],
    members: torch.Tensor,
) -> None:
    for q, seq in zip(layout.sequences, seqs, strict=True):
        assert seq is not None
        mine = (skill == q.skill).unsqueeze(-1)
        cur = members[:, q.slot, : q.length]
        members[:, q.slot, : q.length] = torch.where(mine, _to_action(seq, q.width, layout.max_pointer), cur)


def _action_sequences(layout: PackedActionLayout, action: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The action's sequence slots ``(B, T)``, each within its width."""
    members = _members(layout, action)
    return [_as_width(members[:, q.slot, : q.length], q.width) for q in layout.sequences]


def skill_argument_sample(
    parts: PackedActionLogits, layout: PackedActionLayout, *, reparameterize: bool = False
) -> dict[str, torch.Tensor]:
    """Samples the skill, then the arguments of that skill. Unused slots are 0 (lists: the end marker ``Mp``).

    Args:
        parts: Packed logits split by :meth:`PackedActionLayout.split`, batch ``B``.
        layout: Static layout (which slots each skill uses).
        reparameterize: If True the numeric sample is ``mean + std · eps`` with gradients (discrete parts
            never carry gradients).

    Returns:
        ``{"skill": (B,), "pointer": (B, P), "members": (B, L·T), "enum": (B, E), "source": (B, N)}`` int64
        and ``"numeric": (B, N)`` float.
    """
    e_used, n_used = layout.used_masks(parts.skill.device)
    skill = categorical_sample(parts.skill)
    b = skill.shape[0]
    members = torch.full(
        (b, layout.list_slots, layout.list_length), layout.max_pointer, dtype=torch.long, device=skill.device
    )
    _set_lists(parts, layout, skill, members, lambda lg, g, lo, hi: set_sample(lg, lo, hi, g.levels))
    _write_sequences(layout, skill, _sequences(parts, layout, sequence_sample), members)
    enum = categorical_sample(_select_skill(parts.enum, skill))
    source = categorical_sample(_select_skill(parts.source, skill))
    # The Gaussian's noise is drawn before the pointers, as before anchors existed, so the default layout's draws
    # (and every seeded run) stay the same.
    eps = torch.randn(b, layout.numeric_slots, dtype=parts.numeric_mean.dtype, device=skill.device)
    pointer = _pointer_action(parts, layout, skill, categorical_sample)
    mean, log_std = numeric_params(parts, layout, skill, pointer)
    std = log_std.exp()
    numeric = mean + std * eps if reparameterize else (mean + std * eps).detach()
    return {
        "skill": skill,
        "pointer": pointer,
        "members": members.flatten(1),
        "enum": enum * e_used[skill].long(),
        "source": source * n_used[skill].long(),
        "numeric": numeric * n_used[skill].to(numeric.dtype),
    }


def skill_argument_mode(parts: PackedActionLogits, layout: PackedActionLayout) -> dict[str, torch.Tensor]:
    """The greedy action: argmax skill, then the most probable arguments of that skill (the most probable set,
    the greedy sequence, argmax pointer/enum/source, the numeric mean).

    Returns:
        Same structure as :func:`skill_argument_sample`.
    """
    e_used, n_used = layout.used_masks(parts.skill.device)
    skill = parts.skill.argmax(-1)
    members = torch.full(
        (skill.shape[0], layout.list_slots, layout.list_length),
        layout.max_pointer,
        dtype=torch.long,
        device=skill.device,
    )
    _set_lists(parts, layout, skill, members, lambda lg, g, lo, hi: set_mode(lg, lo, hi, g.levels))
    _write_sequences(layout, skill, _sequences(parts, layout, sequence_mode), members)
    pointer = _pointer_action(parts, layout, skill, lambda lg: lg.argmax(-1))
    mean, _ = numeric_params(parts, layout, skill, pointer)
    return {
        "skill": skill,
        "pointer": pointer,
        "members": members.flatten(1),
        "enum": _select_skill(parts.enum, skill).argmax(-1) * e_used[skill].long(),
        "source": _select_skill(parts.source, skill).argmax(-1) * n_used[skill].long(),
        "numeric": mean * n_used[skill].to(mean.dtype),
    }


def skill_argument_logp(
    parts: PackedActionLogits, layout: PackedActionLayout, action: dict[str, torch.Tensor]
) -> torch.Tensor:
    """Log-probability of a structured action; only the slots of the chosen skill count.

    Args:
        parts: Packed logits, batch ``B``.
        layout: Static layout.
        action: as :func:`skill_argument_sample` returns; unused slots may hold anything (they are ignored).

    Returns:
        ``(B,)`` float tensor.
    """
    e_used, n_used = layout.used_masks(parts.skill.device)
    gi = layout.group_index(parts.skill.device)
    skill = action["skill"].long().reshape(-1)
    logp = F.log_softmax(parts.skill, dim=-1).gather(-1, skill[:, None]).squeeze(-1)

    ptr = action["pointer"].long()
    for pg, lg, (ks, ps) in zip(layout.pointer_groups, parts.pointers, gi.pointer, strict=True):
        lp = F.log_softmax(lg, dim=-1).gather(-1, _as_width(ptr[:, ps], pg.width).unsqueeze(-1)).squeeze(-1)
        logp = logp + (lp * (skill.unsqueeze(-1) == ks).to(lp.dtype)).sum(-1)

    members = _members(layout, action)
    for g, lg, (ks, ls, lo, hi) in zip(layout.set_groups, parts.sets, gi.sets, strict=True):
        lp = set_logp(lg, lo, hi, _bits(members[:, ls], g.width), g.levels)
        logp = logp + (lp * (skill.unsqueeze(-1) == ks).to(lp.dtype)).sum(-1)

    seqs = _action_sequences(layout, action)
    for i, q in enumerate(layout.sequences):
        lo, hi, bonus = _sequence_inputs(parts, layout, i, seqs[q.leader] if q.leader >= 0 else None)
        lp = sequence_logp(
            parts.seq_items[i], parts.seq_stop[i], lo, hi, seqs[i], unique=q.unique, bonus=bonus
        )
        logp = logp + lp * (skill == q.skill).to(lp.dtype)

    enum_logp = F.log_softmax(_select_skill(parts.enum, skill), dim=-1)
    enum = action["enum"].long().clamp(0, layout.enum_choices - 1)
    logp = logp + (enum_logp.gather(-1, enum[..., None]).squeeze(-1) * e_used[skill]).sum(-1)

    src_logp = F.log_softmax(_select_skill(parts.source, skill), dim=-1)
    src = action["source"].long().clamp(0, layout.source_choices - 1)
    src_lp = src_logp.gather(-1, src[..., None]).squeeze(-1)
    mean, log_std = numeric_params(parts, layout, skill, ptr)
    mean = sigma_scaled_mean(mean, log_std)
    x = action["numeric"].to(mean.dtype)
    gauss = -0.5 * ((x - mean) / log_std.exp()) ** 2 - log_std - _HALF_LOG_2PI
    free = (src == 0).to(gauss.dtype)
    return logp + ((src_lp + free * gauss) * n_used[skill]).sum(-1)


def member_probs(parts: PackedActionLogits, layout: PackedActionLayout) -> torch.Tensor:
    """``(B, K, L, Mp)``: for a set slot, the probability that each node is in the set; for a sequence slot, that
    each node is its first member (a follower's without its leader's conditioning). For inspection."""
    b = parts.skill.shape[0]
    out = parts.skill.new_zeros(b, layout.num_skills, layout.list_slots, layout.max_pointer)
    for g, lg in zip(layout.set_groups, parts.sets, strict=True):
        mu = set_marginals(
            lg, torch.tensor(g.lo, device=lg.device), torch.tensor(g.hi, device=lg.device), g.levels
        )
        for n, (k, li) in enumerate(zip(g.skills, g.slots, strict=True)):
            out[:, k, li, : g.width] = mu[:, n]
    for i, q in enumerate(layout.sequences):
        lo, hi = torch.tensor(q.lo, device=out.device), torch.tensor(q.hi, device=out.device)
        step = sequence_step_logits(parts.seq_items[i][:, :1], parts.seq_stop[i][:, :1], lo, hi)
        out[:, q.skill, q.slot, : q.width] = step.softmax(-1)[:, 0, : q.width]
    return out


def sigma_scaled_mean(mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``mean`` with its gradient multiplied by ``σ = exp(log_std)`` (same values; straight-through).

    The score of a Gaussian mean is ``(x − μ)/σ² = ε/σ``. After imitation σ is small and that score dwarfs the
    discrete heads', so the policy group's global-norm gradient clip spent nearly all of every RL update on the
    numeric mean, which random-walked off its target, while skill, pointer and enum heads barely moved (see
    ``benchmarks/results/quickstart.md``). Scaled by ``σ`` the score is ``ε``, on the discrete heads' scale, and
    a precise mean moves in proportion to its own spread.
    """
    return mean.detach() + (mean - mean.detach()) * log_std.detach().exp()


def _per_skill_argument_entropy(
    parts: PackedActionLogits, layout: PackedActionLayout, draws: Sequence[torch.Tensor | None] | None
) -> torch.Tensor:
    """``(B, K)``: entropy of the used argument slots of each skill."""
    e_used, n_used = layout.used_masks(parts.skill.device)
    gi = layout.group_index(parts.skill.device)
    h = (_categorical_entropy(parts.enum) * e_used).sum(-1)
    p_free = F.softmax(parts.source, dim=-1)[..., 0]
    h_gauss = _over_anchor(parts, layout, parts.numeric_log_std + 0.5 + _HALF_LOG_2PI)
    h_num = _categorical_entropy(parts.source) + p_free * h_gauss
    h = h + (h_num * n_used).sum(-1)
    for lg, (ks, _ps) in zip(parts.pointers, gi.pointer, strict=True):
        h = h.index_add(1, ks, _categorical_entropy(lg))
    for g, lg, (ks, _ls, lo, hi) in zip(layout.set_groups, parts.sets, gi.sets, strict=True):
        h = h.index_add(1, ks, set_entropy(lg, lo, hi, g.levels))
    if draws is None:
        draws = _estimate_draws(parts, layout)
    for i, q in enumerate(layout.sequences):
        lo, hi, bonus = _sequence_inputs(parts, layout, i, draws[q.leader] if q.leader >= 0 else None)
        seq = draws[i] if q.unique else None
        hq = sequence_entropy(
            parts.seq_items[i], parts.seq_stop[i], lo, hi, unique=q.unique, seq=seq, bonus=bonus
        )
        h = h.index_add(1, torch.tensor([q.skill], device=h.device), hq.unsqueeze(-1))
    return h


def skill_argument_entropy(
    parts: PackedActionLogits, layout: PackedActionLayout, draws: Sequence[torch.Tensor | None] | None = None
) -> torch.Tensor:
    """Entropy of the joint (skill, arguments): ``H(skill) + Σ_k p(k) H(args | k)`` (exact, but for the sequence
    slots the module docstring names, whose part is a one-sample unbiased estimate).

    Args:
        parts: Packed logits, batch ``B``.
        layout: Static layout.
        draws: one ``(B, T)`` sequence per sequence slot (within its width) to estimate along; default: drawn
            from ``parts``. The estimate's expectation over draws from ``parts`` is the exact entropy.

    Returns:
        ``(B,)`` float tensor.
    """
    skill_logp = F.log_softmax(parts.skill, dim=-1)
    skill_p = skill_logp.exp()
    h_skill = -(skill_p * skill_logp).sum(-1)
    return h_skill + (skill_p * _per_skill_argument_entropy(parts, layout, draws)).sum(-1)


def skill_argument_kl(
    p: PackedActionLogits,
    q: PackedActionLogits,
    layout: PackedActionLayout,
    draws: Sequence[torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """``KL(p ‖ q)`` of the joint: ``KL(skill) + Σ_k p(k) KL(args | k)`` (exact, but for the sequence slots the
    module docstring names, whose part is a one-sample unbiased estimate along a sequence drawn from ``p``).

    Args:
        draws: as for :func:`skill_argument_entropy` (default: drawn from ``p``).

    Returns:
        ``(B,)`` float tensor.
    """
    e_used, n_used = layout.used_masks(p.skill.device)
    gi = layout.group_index(p.skill.device)
    skill_logp = F.log_softmax(p.skill, dim=-1)
    skill_p = skill_logp.exp()
    kl_skill = (skill_p * (skill_logp - F.log_softmax(q.skill, dim=-1))).sum(-1)

    kl_args = (_categorical_kl(p.enum, q.enum) * e_used).sum(-1)
    var_p = (2.0 * p.numeric_log_std).exp()
    var_q = (2.0 * q.numeric_log_std).exp()
    kl_gauss = (
        q.numeric_log_std
        - p.numeric_log_std
        + (var_p + (p.numeric_mean - q.numeric_mean) ** 2) / (2.0 * var_q)
        - 0.5
    )
    p_free = F.softmax(p.source, dim=-1)[..., 0]
    kl_num = _categorical_kl(p.source, q.source) + p_free * _over_anchor(p, layout, kl_gauss)
    kl_args = kl_args + (kl_num * n_used).sum(-1)
    for lp, lq, (ks, _ps) in zip(p.pointers, q.pointers, gi.pointer, strict=True):
        kl_args = kl_args.index_add(1, ks, _categorical_kl(lp, lq))
    for g, lp, lq, (ks, _ls, lo, hi) in zip(layout.set_groups, p.sets, q.sets, gi.sets, strict=True):
        kl_args = kl_args.index_add(1, ks, set_kl(lp, lq, lo, hi, g.levels))
    if draws is None:
        draws = _estimate_draws(p, layout)
    for i, s in enumerate(layout.sequences):
        lead = draws[s.leader] if s.leader >= 0 else None
        lo, hi, p_bonus = _sequence_inputs(p, layout, i, lead)
        _, _, q_bonus = _sequence_inputs(q, layout, i, lead)
        kq = sequence_kl(
            p.seq_items[i], p.seq_stop[i], q.seq_items[i], q.seq_stop[i], lo, hi,
            unique=s.unique, seq=draws[i] if s.unique else None, p_bonus=p_bonus, q_bonus=q_bonus,
        )  # fmt: skip
        kl_args = kl_args.index_add(1, torch.tensor([s.skill], device=kl_args.device), kq.unsqueeze(-1))
    return kl_skill + (skill_p * kl_args).sum(-1)
