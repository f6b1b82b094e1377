"""The sequence head's maths (ordered lists, repeats, paired lists) against a Python loop over every sequence."""

from __future__ import annotations

import math

import pytest
import torch

from agentic_ray.models.sequence_functional import (
    follower_bonus,
    sequence_entropy,
    sequence_kl,
    sequence_length,
    sequence_logp,
    sequence_mode,
    sequence_sample,
)
from tests.unit.models.helpers import all_sequences, pad_sequence, ref_sequence_logp

W, T = 3, 3


def _inputs(seed: int, masked: bool = False, w: int = W, t: int = T) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    items = torch.randn(t, w, generator=gen, dtype=torch.float64) * 1.5
    if masked:
        items[:, 1] = -1e9
    return items, torch.randn(t, generator=gen, dtype=torch.float64)


def _distribution(items, stop, lo, hi, unique, bonus=None):  # type: ignore[no-untyped-def]
    seqs = [s for s in all_sequences(items.shape[-1], items.shape[-2], unique)]
    lps = [ref_sequence_logp(items, stop, lo, hi, s, unique, bonus) for s in seqs]
    keep = [(s, lp) for s, lp in zip(seqs, lps, strict=True) if lp > -math.inf]
    return [s for s, _ in keep], torch.tensor([lp for _, lp in keep], dtype=torch.float64)


@pytest.mark.parametrize("unique", [False, True])
@pytest.mark.parametrize(("lo", "hi"), [(0, 3), (1, 2), (2, 3), (0, 1)])
def test_logp_entropy_kl_against_enumeration(unique: bool, lo: int, hi: int) -> None:
    for seed, masked in ((0, False), (1, True)):
        items, stop = _inputs(seed, masked)
        q_items, q_stop = _inputs(seed + 7, masked)
        lo_t, hi_t = torch.tensor(lo), torch.tensor(hi)
        seqs, lp = _distribution(items, stop, lo, hi, unique)
        _, lq = _distribution(q_items, q_stop, lo, hi, unique)
        torch.testing.assert_close(lp.exp().sum(), torch.tensor(1.0, dtype=torch.float64))
        padded = torch.stack([pad_sequence(s, W, T) for s in seqs])
        got = sequence_logp(items.expand(len(seqs), T, W), stop.expand(len(seqs), T), lo_t, hi_t, padded,
                            unique=unique)  # fmt: skip
        torch.testing.assert_close(got, lp)
        p = lp.exp()
        exact_h = -(p * lp).sum()
        exact_kl = (p * (lp - lq)).sum()
        n = len(seqs)
        h = sequence_entropy(items.expand(n, T, W), stop.expand(n, T), lo_t, hi_t, unique=unique, seq=padded)
        kl = sequence_kl(
            items.expand(n, T, W), stop.expand(n, T), q_items.expand(n, T, W), q_stop.expand(n, T), lo_t, hi_t,
            unique=unique, seq=padded,
        )  # fmt: skip
        if unique:  # the per-step estimate along a sequence: exact in expectation over p
            torch.testing.assert_close((p * h).sum(), exact_h)
            torch.testing.assert_close((p * kl).sum(), exact_kl)
        else:  # history-free: exact whatever the sequence
            torch.testing.assert_close(h, exact_h.expand(n))
            torch.testing.assert_close(kl, exact_kl.expand(n))


def test_follower_has_the_leaders_length_and_reads_its_members() -> None:
    """A paired list: the joint (leader, follower) distribution by enumeration; the follower's entropy given the
    leader is exact, and its expectation over the leader is the joint entropy minus the leader's."""
    items, stop = _inputs(2, t=2)
    f_items, f_stop = _inputs(3, t=2)
    gen = torch.Generator().manual_seed(4)
    lead_f = torch.randn(W, 2, generator=gen, dtype=torch.float64)
    own_f = torch.randn(W, 2, generator=gen, dtype=torch.float64)
    lo, hi = 1, 2
    leads, lp_lead = _distribution(items, stop, lo, hi, False)
    joint_h = 0.0
    total = 0.0
    for a, lpa in zip(leads, lp_lead.tolist(), strict=True):
        a_pad = pad_sequence(a, W, 2)
        bonus = follower_bonus(a_pad, lead_f, own_f)
        n = len(a)
        follows, lp_f = _distribution(f_items, f_stop, n, n, False, bonus)
        assert all(len(b) == n for b in follows)
        got = sequence_logp(
            f_items.expand(len(follows), 2, W), f_stop.expand(len(follows), 2), torch.tensor(n), torch.tensor(n),
            torch.stack([pad_sequence(b, W, 2) for b in follows]), bonus=bonus,
        )  # fmt: skip
        torch.testing.assert_close(got, lp_f)
        h_given = sequence_entropy(f_items, f_stop, torch.tensor(n), torch.tensor(n), bonus=bonus)
        torch.testing.assert_close(h_given, -(lp_f.exp() * lp_f).sum())
        joint = lpa + lp_f
        joint_h += float(-(joint.exp() * joint).sum())
        total += float(joint.exp().sum())
        bonus_ref = torch.stack(
            [lead_f[x] @ own_f.T if x < W else torch.zeros(W, dtype=torch.float64) for x in a_pad]
        )
        torch.testing.assert_close(bonus, bonus_ref)
    assert total == pytest.approx(1.0)
    h_lead = float(sequence_entropy(items, stop, torch.tensor(lo), torch.tensor(hi)))
    p_lead = lp_lead.exp()
    h_follow = sum(
        float(p) * float(sequence_entropy(f_items, f_stop, torch.tensor(len(a)), torch.tensor(len(a)),
                                          bonus=follower_bonus(pad_sequence(a, W, 2), lead_f, own_f)))
        for a, p in zip(leads, p_lead, strict=True)
    )  # fmt: skip
    assert h_lead + h_follow == pytest.approx(joint_h)


@pytest.mark.parametrize("unique", [False, True])
def test_sample_frequencies_match_probabilities(unique: bool) -> None:
    torch.manual_seed(0)
    items, stop = _inputs(0, w=3, t=2)
    lo, hi, n = 0, 2, 6000
    seqs, lp = _distribution(items, stop, lo, hi, unique)
    draws = sequence_sample(items.expand(n, 2, 3), stop.expand(n, 2), torch.tensor(lo), torch.tensor(hi),
                            unique=unique)  # fmt: skip
    counts = {s: 0 for s in seqs}
    for row in draws.tolist():
        key = tuple(x for x in row if x < 3)
        assert key in counts, f"sampled an impossible sequence {row}"
        counts[key] += 1
    freq = torch.tensor([counts[s] / n for s in seqs], dtype=torch.float64)
    assert (freq - lp.exp()).abs().max() < 0.025
    mode = sequence_mode(items, stop, torch.tensor(lo), torch.tensor(hi), unique=unique)
    assert int(sequence_length(mode, 3)) <= hi


def test_gradients_are_finite_with_masked_candidates() -> None:
    items, stop = _inputs(1, masked=True)
    items = items.expand(4, T, W).clone().requires_grad_(True)
    stop = stop.expand(4, T).clone().requires_grad_(True)
    lo, hi = torch.tensor([0, 1, 2, 3]), torch.tensor([3, 3, 2, 3])
    for unique in (False, True):
        seq = sequence_sample(items.detach(), stop.detach(), lo, hi, unique=unique)
        loss = (
            sequence_logp(items, stop, lo, hi, seq, unique=unique)
            + sequence_entropy(items, stop, lo, hi, unique=unique, seq=seq)
            + sequence_kl(items, stop, items.detach() * 0.5, stop.detach(), lo, hi, unique=unique, seq=seq)
        ).sum()
        loss.backward()
        assert torch.isfinite(items.grad).all() and torch.isfinite(stop.grad).all()
