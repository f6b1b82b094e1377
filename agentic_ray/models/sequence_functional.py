"""Maths of a sequence-valued choice: an autoregressive pointer with a stop token (ordered lists, lists with
repeats, lists paired by position).

A sequence slot over ``W`` candidates with ``T`` positions and length bounds ``lo <= n <= hi <= T`` is generated
one step at a time. Step ``t`` (0-based, ``t`` members chosen so far) is a categorical over the ``W`` candidates and
a stop token (index ``W``), with logits

    items:  u[t, i] (+ b[t, i])    allowed while t < hi  (and, for a ``unique`` slot, i not chosen before t)
    stop:   s[t]                   allowed once  t >= lo

The sequence ends at the first stop (its entries are then the end marker ``W``), or after ``T`` members. ``b`` is
an optional bonus per position and candidate (a follower's conditioning on its leader, below). The logits of a
position do not depend on the members chosen before it, except through the ``unique`` mask.

What is computed, exactly:

* ``sequence_logp``: ``Σ_{t ≤ n} log π_t(a_t | a_<t)`` (the stop step counts when ``n < T``; a forced stop, at
  ``n = hi < T``, has probability 1): exact.
* ``sequence_entropy`` / ``sequence_kl`` of a slot that is not ``unique``: the step distributions do not depend on
  the history, so by the chain rule ``H = Σ_t ρ_t H(π_t)`` and ``KL(p‖q) = Σ_t ρ^p_t KL(π^p_t ‖ π^q_t)``, with
  ``ρ_t = Π_{τ<t} (1 − π_τ(stop))`` the probability of reaching step ``t``: exact, ``O(T · W)``.
* of a ``unique`` slot: the step distributions depend on the members already chosen, and the exact entropy is a
  sum over ``O(W^T)`` histories. What is computed is the per-step entropy (or KL) along one given sequence ``a``:
  ``Ĥ(a) = Σ_{t ≤ n(a)} H(π_t(· | a_<t))``. By the chain rule its expectation over ``a ~ p`` is exactly ``H(p)``
  (``KL(p‖q)`` for the KL along ``a ~ p``): an unbiased one-sample estimate, which the distribution draws from
  ``p`` itself. Its gradient is the per-step gradient, without the score-function term of the sampling (the
  standard per-token entropy of sequence policies); for ``KL(μ‖π)`` against a fixed ``μ`` that term is zero and the
  gradient is unbiased too.

A *follower* slot (``paired_with`` a leader) has exactly the leader's length: ``lo = hi = n_leader`` per row, so
its stop is masked before ``n_leader`` and forced there. Its position ``t`` reads the leader's member at ``t``
through a rank-``R`` bonus ``b[t, j] = ⟨f(a_t), g(j)⟩`` (``f``: the leader's candidate factors, ``g``: the
follower's), so "exchange item i for new item i" can pair by content. Given the leader's sequence the follower's
entropy is exact when it is not ``unique``; the leader's sequence is drawn from ``p`` (the estimate above).

Tensors: ``items (..., T, W)``, ``stop (..., T)``, ``lo, hi (...)`` long, sequences ``(..., T)`` long in
``[0, W]``. Masked candidates carry a large finite negative logit; every quantity stays finite. Tested against a
Python loop that enumerates every sequence at small widths.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from agentic_ray.models.set_functional import categorical_sample

__all__ = [
    "follower_bonus",
    "sequence_entropy",
    "sequence_kl",
    "sequence_length",
    "sequence_logp",
    "sequence_mode",
    "sequence_sample",
    "sequence_step_logits",
]


def _neg(t: torch.Tensor) -> float:
    return max(-1e9, torch.finfo(t.dtype).min / 4)


def sequence_length(seq: torch.Tensor, width: int) -> torch.Tensor:
    """``n (...)``: the members before the first end marker (``>= width``)."""
    return (seq < width).long().cumprod(-1).sum(-1)


def _chosen_before(seq: torch.Tensor, width: int) -> torch.Tensor:
    """``(..., T, W)`` bool: candidate ``i`` is among the members before step ``t`` (entries after the end
    ignored)."""
    n = sequence_length(seq, width)
    t = torch.arange(seq.shape[-1], device=seq.device)
    live = t < n.unsqueeze(-1)
    onehot = F.one_hot(seq.clamp(0, width), width + 1)[..., :width] * live.unsqueeze(-1).long()
    return (onehot.cumsum(-2) - onehot) > 0


def sequence_step_logits(
    items: torch.Tensor,
    stop: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    *,
    unique: bool = False,
    history: torch.Tensor | None = None,
    bonus: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(..., T, W + 1)``: the logits of every step (last column: stop), masked as the module docstring says.

    Args:
        history: for a ``unique`` slot, the sequence whose earlier members are masked at each step.
        bonus: ``(..., T, W)`` added to the item logits (a follower's conditioning).
    """
    neg = _neg(items)
    t = torch.arange(items.shape[-2], device=items.device)
    u = items if bonus is None else items + bonus
    item_ok = t < hi.unsqueeze(-1)  # (..., T)
    u = u.masked_fill(~item_ok.unsqueeze(-1), neg)
    if unique:
        if history is None:
            raise ValueError("a unique slot's step logits need the history")
        u = u.masked_fill(_chosen_before(history, items.shape[-1]), neg)
    s = stop.masked_fill(t < lo.unsqueeze(-1), neg)
    return torch.cat([u, s.unsqueeze(-1)], dim=-1)


def _active(seq: torch.Tensor, width: int) -> torch.Tensor:
    """``(..., T)`` float: the steps the sequence took (its members and its stop)."""
    n = sequence_length(seq, width)
    return (torch.arange(seq.shape[-1], device=seq.device) <= n.unsqueeze(-1)).to(torch.float32)


def sequence_logp(
    items: torch.Tensor,
    stop: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    seq: torch.Tensor,
    *,
    unique: bool = False,
    bonus: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log p(seq)`` of shape ``(...)`` (exact)."""
    w = items.shape[-1]
    step = sequence_step_logits(items, stop, lo, hi, unique=unique, history=seq, bonus=bonus)
    lp = F.log_softmax(step, dim=-1).gather(-1, seq.clamp(0, w).unsqueeze(-1)).squeeze(-1)
    return (lp * _active(seq, w).to(lp.dtype)).sum(-1)


def _reach(step: torch.Tensor) -> torch.Tensor:
    """``ρ (..., T)``: the probability of reaching each step of a history-free slot."""
    cont = 1.0 - F.softmax(step, dim=-1)[..., -1]
    return torch.cat([torch.ones_like(cont[..., :1]), cont[..., :-1]], dim=-1).cumprod(-1)


def sequence_entropy(
    items: torch.Tensor,
    stop: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    *,
    unique: bool = False,
    seq: torch.Tensor | None = None,
    bonus: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(...)``: the exact entropy (not ``unique``), or for a ``unique`` slot the per-step entropy along ``seq``
    (an unbiased estimate when ``seq ~ p``; see the module docstring)."""
    step = sequence_step_logits(items, stop, lo, hi, unique=unique, history=seq, bonus=bonus)
    logp = F.log_softmax(step, dim=-1)
    h = -(logp.exp() * logp).sum(-1)
    if not unique:
        return (_reach(step) * h).sum(-1)
    assert seq is not None
    return (h * _active(seq, items.shape[-1]).to(h.dtype)).sum(-1)


def sequence_kl(
    p_items: torch.Tensor,
    p_stop: torch.Tensor,
    q_items: torch.Tensor,
    q_stop: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    *,
    unique: bool = False,
    seq: torch.Tensor | None = None,
    p_bonus: torch.Tensor | None = None,
    q_bonus: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(...)``: the exact ``KL(p ‖ q)`` (not ``unique``), or for a ``unique`` slot the per-step KL along ``seq``
    (unbiased when ``seq ~ p``)."""
    ps = sequence_step_logits(p_items, p_stop, lo, hi, unique=unique, history=seq, bonus=p_bonus)
    qs = sequence_step_logits(q_items, q_stop, lo, hi, unique=unique, history=seq, bonus=q_bonus)
    lp, lq = F.log_softmax(ps, dim=-1), F.log_softmax(qs, dim=-1)
    kl = (lp.exp() * (lp - lq)).sum(-1)
    if not unique:
        return (_reach(ps) * kl).sum(-1)
    assert seq is not None
    return (kl * _active(seq, p_items.shape[-1]).to(kl.dtype)).sum(-1)


def _cut(draws: torch.Tensor, width: int) -> torch.Tensor:
    """Entries after the first stop become the end marker."""
    keep = (draws < width).long().cumprod(-1).bool()
    return torch.where(keep, draws, torch.full_like(draws, width))


@torch.no_grad()
def _decode(
    items: torch.Tensor,
    stop: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    unique: bool,
    bonus: torch.Tensor | None,
    greedy: bool,
) -> torch.Tensor:
    w, n_pos = items.shape[-1], items.shape[-2]
    if not unique:  # history-free: every position at once, then cut at the first stop
        step = sequence_step_logits(items, stop, lo, hi, bonus=bonus)
        return _cut(step.argmax(-1) if greedy else categorical_sample(step), w)
    base = sequence_step_logits(items, stop, lo, hi, bonus=bonus)  # (..., T, W + 1) before the unique mask
    neg = _neg(items)
    seq = torch.full(items.shape[:-1], w, dtype=torch.long, device=items.device)
    chosen = torch.zeros_like(base[..., 0, :], dtype=torch.bool)  # (..., W + 1): members drawn so far
    ended = torch.zeros_like(seq[..., 0], dtype=torch.bool)
    for t in range(n_pos):  # the unique mask needs the members drawn so far
        step = base[..., t, :].masked_fill(chosen, neg)
        pick = step.argmax(-1) if greedy else categorical_sample(step)
        ended = ended | (pick == w)
        seq[..., t] = torch.where(ended, torch.full_like(pick, w), pick)
        chosen = chosen | (F.one_hot(pick, w + 1).bool() & (pick < w).unsqueeze(-1))
    return seq


def sequence_sample(
    items: torch.Tensor,
    stop: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    *,
    unique: bool = False,
    bonus: torch.Tensor | None = None,
) -> torch.Tensor:
    """One exact sample ``(..., T)`` (end marker ``W`` after the last member)."""
    return _decode(items, stop, lo, hi, unique, bonus, greedy=False)


def sequence_mode(
    items: torch.Tensor,
    stop: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    *,
    unique: bool = False,
    bonus: torch.Tensor | None = None,
) -> torch.Tensor:
    """The greedy sequence (the most probable choice at every step; the exact mode of a sequence distribution is a
    search, and this is what a deterministic policy acts on)."""
    return _decode(items, stop, lo, hi, unique, bonus, greedy=True)


def follower_bonus(
    lead_seq: torch.Tensor, lead_factor: torch.Tensor, own_factor: torch.Tensor
) -> torch.Tensor:
    """``(..., T, W)``: ``b[t, j] = ⟨f(a_t), g(j)⟩`` for the leader's sequence ``a`` ``(..., T)`` (end markers read a
    zero factor), leader factors ``f (..., W_A, R)`` and the follower's ``g (..., W, R)``."""
    w_a = lead_factor.shape[-2]
    f = torch.cat([lead_factor, torch.zeros_like(lead_factor[..., :1, :])], dim=-2)  # end marker -> 0
    idx = lead_seq.clamp(0, w_a).unsqueeze(-1).expand(*lead_seq.shape, f.shape[-1])
    picked = f.gather(-2, idx)  # (..., T, R)
    return picked @ own_factor.transpose(-1, -2)
