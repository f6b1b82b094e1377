"""Exact maths of a set-valued choice: independent per-candidate logits conditioned on the set size.

A list argument picks a subset ``S`` of ``M`` candidates with ``lo <= |S| <= hi``. The distribution is the
product of Bernoullis ``σ(l_i)`` conditioned on the size, i.e. in natural parameters::

    q(S) = exp(Σ_{i∈S} l_i − A),     A = log Σ_{S: lo ≤ |S| ≤ hi} exp(Σ_{i∈S} l_i)

``A`` comes from the elementary symmetric polynomials of ``exp(l)`` (a dynamic programme over candidates, in log
space). With the inclusion marginals ``μ_i = P_q(i ∈ S) = ∂A/∂l_i`` (a leave-one-out programme):

    H(q)      = A − Σ_i μ_i l_i
    KL(q‖q')  = Σ_i μ_i (l_i − l'_i) − A + A'

Masked candidates carry a large finite negative logit (``masked_fill_value``): their probability is exactly 0 and
every quantity stays finite. All functions take logits ``(..., M)`` and bounds ``lo, hi`` broadcastable to the
leading shape, and are tested against enumeration of all subsets.
"""

from __future__ import annotations

import torch

__all__ = [
    "set_entropy",
    "set_kl",
    "set_log_partition",
    "set_logp",
    "set_marginals",
    "set_mode",
    "set_sample",
]


def _neg(t: torch.Tensor) -> float:
    return max(-1e9, torch.finfo(t.dtype).min / 4)


def _step(e: torch.Tensor, logit: torch.Tensor, neg: float) -> torch.Tensor:
    """One candidate more: ``e'_j = logaddexp(e_j, e_{j-1} + logit)``."""
    pad = torch.full_like(e[..., :1], neg)
    return torch.logaddexp(e, torch.cat([pad, e[..., :-1] + logit], dim=-1))


def _empty(shape: torch.Size, m: int, like: torch.Tensor, neg: float) -> torch.Tensor:
    e = torch.full((*shape, m + 1), neg, dtype=like.dtype, device=like.device)
    e[..., 0] = 0.0
    return e


def _elementary(logits: torch.Tensor) -> torch.Tensor:
    """``(..., M + 1)``: ``E_j = log Σ_{|S| = j} exp(Σ_{i∈S} l_i)``."""
    neg, m = _neg(logits), logits.shape[-1]
    e = _empty(logits.shape[:-1], m, logits, neg)
    for i in range(m):
        e = _step(e, logits[..., i : i + 1], neg)
    return e


def _in_range(lo: torch.Tensor, hi: torch.Tensor, m: int, like: torch.Tensor) -> torch.Tensor:
    j = torch.arange(m + 1, device=like.device)
    return (j >= lo.unsqueeze(-1)) & (j <= hi.unsqueeze(-1))


def _bounds(
    logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int
) -> tuple[torch.Tensor, torch.Tensor]:
    shape = logits.shape[:-1]
    lo_t = torch.as_tensor(lo, device=logits.device).expand(shape)
    hi_t = torch.as_tensor(hi, device=logits.device).clamp(max=logits.shape[-1]).expand(shape)
    return lo_t, hi_t


def set_log_partition(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """``A`` of shape ``(...)``."""
    lo_t, hi_t = _bounds(logits, lo, hi)
    e = _elementary(logits)
    return e.masked_fill(~_in_range(lo_t, hi_t, logits.shape[-1], logits), _neg(logits)).logsumexp(-1)


def set_logp(
    logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int, members: torch.Tensor
) -> torch.Tensor:
    """``log q(S)`` for the 0/1 ``members`` ``(..., M)`` (sizes outside ``[lo, hi]`` get the masked value)."""
    lo_t, hi_t = _bounds(logits, lo, hi)
    x = members.to(logits.dtype)
    n = x.sum(-1)
    lp = (x * logits).sum(-1) - set_log_partition(logits, lo_t, hi_t)
    return torch.where((n >= lo_t) & (n <= hi_t), lp, torch.full_like(lp, _neg(logits)))


def set_marginals(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """``μ (..., M)``: the probability that each candidate is in the set."""
    neg, m = _neg(logits), logits.shape[-1]
    lo_t, hi_t = _bounds(logits, lo, hi)
    lead = logits.shape[:-1]
    prefix = [_empty(lead, m, logits, neg)]
    for i in range(m):
        prefix.append(_step(prefix[-1], logits[..., i : i + 1], neg))
    suffix = [_empty(lead, m, logits, neg)]
    for i in reversed(range(m)):
        suffix.append(_step(suffix[-1], logits[..., i : i + 1], neg))
    suffix = suffix[::-1]  # suffix[i]: candidates i .. M-1
    keep = _in_range(lo_t - 1, hi_t - 1, m, logits)  # counts j of the OTHERS for which i can join
    a = set_log_partition(logits, lo_t, hi_t)
    mus = []
    for i in range(m):
        p, q = prefix[i], suffix[i + 1]
        # others_j = log Σ_{a + b = j} exp(p_a + q_b)
        shifted = torch.stack(
            [
                torch.cat([torch.full_like(q[..., :s], neg), q[..., : m + 1 - s]], dim=-1)
                for s in range(m + 1)
            ],
            dim=-2,
        )  # (..., a, j) = q_{j - a}
        others = (p.unsqueeze(-1) + shifted).logsumexp(-2)
        joined = others.masked_fill(~keep, neg).logsumexp(-1) + logits[..., i]
        mus.append((joined - a).exp())
    return torch.stack(mus, dim=-1)


def set_entropy(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """``H(q)`` of shape ``(...)``."""
    return set_log_partition(logits, lo, hi) - (set_marginals(logits, lo, hi) * logits).sum(-1)


def set_kl(
    p_logits: torch.Tensor, q_logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int
) -> torch.Tensor:
    """``KL(q_p ‖ q_q)`` for two logit vectors with the same bounds."""
    mu = set_marginals(p_logits, lo, hi)
    return (
        (mu * (p_logits - q_logits)).sum(-1)
        - set_log_partition(p_logits, lo, hi)
        + set_log_partition(q_logits, lo, hi)
    )


def set_sample(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """One exact sample ``(..., M)`` of 0/1 (candidate by candidate, conditioned on the sizes still reachable)."""
    neg, m = _neg(logits), logits.shape[-1]
    lo_t, hi_t = _bounds(logits, lo, hi)
    lead = logits.shape[:-1]
    suffix = [_empty(lead, m, logits, neg)]
    for i in reversed(range(m)):
        suffix.append(_step(suffix[-1], logits[..., i : i + 1], neg))
    suffix = suffix[::-1]
    count = torch.zeros(lead, dtype=torch.long, device=logits.device)
    out = []
    with torch.no_grad():
        for i in range(m):
            rest = suffix[i + 1]
            inc = rest.masked_fill(~_in_range(lo_t - count - 1, hi_t - count - 1, m, logits), neg).logsumexp(
                -1
            )
            exc = rest.masked_fill(~_in_range(lo_t - count, hi_t - count, m, logits), neg).logsumexp(-1)
            p = torch.sigmoid(logits[..., i] + inc - exc)
            x = torch.bernoulli(p).long()
            out.append(x)
            count = count + x
    return torch.stack(out, dim=-1)


def set_mode(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """The most probable set: every candidate with a positive logit, the count clamped into ``[lo, hi]`` by
    taking the largest logits."""
    lo_t, hi_t = _bounds(logits, lo, hi)
    order = logits.argsort(dim=-1, descending=True)
    n = (logits > 0).sum(-1).clamp(min=lo_t, max=hi_t)
    rank = torch.arange(logits.shape[-1], device=logits.device).expand_as(logits)
    chosen = (rank < n.unsqueeze(-1)).long()
    return torch.zeros_like(chosen).scatter(-1, order, chosen)
