"""The set-valued head's maths (list arguments) against enumeration of every subset."""

from __future__ import annotations

import itertools

import pytest
import torch

from agentic_ray.models.set_functional import (
    set_entropy,
    set_kl,
    set_log_partition,
    set_logp,
    set_marginals,
    set_mode,
    set_sample,
)

M = 5
LO = torch.tensor([1, 0, 2, 3])
HI = torch.tensor([3, 5, 2, 5])


def _logits(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4, M, generator=gen, dtype=torch.float64) * 2
    x[1, 4] = -1e9  # a masked candidate
    x[3, 0] = -1e9
    return x


def _enumerate(logits: torch.Tensor, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    sets = [torch.tensor(b, dtype=logits.dtype) for b in itertools.product([0, 1], repeat=M)]
    sets = [s for s in sets if lo <= int(s.sum()) <= hi]
    w = torch.stack([(s * logits).sum() for s in sets])
    return torch.stack(sets), w - w.logsumexp(0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_logp_partition_marginals_entropy_kl_match_enumeration(seed: int) -> None:
    x, y = _logits(seed), _logits(seed + 10)
    y[1, 4], y[3, 0] = -1e9, -1e9
    for b in range(4):
        lo, hi = int(LO[b]), int(HI[b])
        sets, lp = _enumerate(x[b], lo, hi)
        p = lp.exp()
        row, lo_t, hi_t = x[b : b + 1], LO[b : b + 1], HI[b : b + 1]
        torch.testing.assert_close(set_logp(row.expand(len(sets), M), lo, hi, sets), lp)
        torch.testing.assert_close(set_marginals(row, lo_t, hi_t)[0], (p[:, None] * sets).sum(0))
        ent = -(p * lp.clamp(min=-700)).sum()
        torch.testing.assert_close(set_entropy(row, lo_t, hi_t)[0], ent)
        _, lq = _enumerate(y[b], lo, hi)
        torch.testing.assert_close(set_kl(row, y[b : b + 1], lo_t, hi_t)[0], (p * (lp - lq)).sum())
        assert torch.equal(set_mode(row, lo_t, hi_t)[0].double(), sets[int(lp.argmax())])
    # Sizes outside the bounds have (masked) zero probability.
    assert set_logp(x[2:3], 2, 2, torch.ones(1, M, dtype=torch.long))[0] < -1e8
    assert torch.isfinite(set_log_partition(x, LO, HI)).all()


def test_wide_logits_and_fewer_levels_stay_exact() -> None:
    """Logits 150 apart (far past float32's exp range) and a forced size that only tiny weights can fill; the
    programme with ``levels`` = the largest ``hi`` (below ``M``) gives what enumeration gives."""
    x = torch.tensor([[40.0, -40.0, -110.0, 3.0, -1e9], [-60.0, -70.0, -80.0, -90.0, 60.0]])
    lo, hi = torch.tensor([3, 1]), torch.tensor([3, 2])
    for b in range(2):
        sets, lp = _enumerate(x[b].double(), int(lo[b]), int(hi[b]))
        p = lp.exp()
        row = x[b : b + 1]
        mu = set_marginals(row, lo[b : b + 1], hi[b : b + 1], levels=3)[0].double()
        torch.testing.assert_close(mu, (p[:, None] * sets).sum(0), atol=1e-6, rtol=1e-5)
        ent = set_entropy(row, lo[b : b + 1], hi[b : b + 1], levels=3)[0].double()
        torch.testing.assert_close(ent, -(p * lp).sum(), atol=1e-5, rtol=1e-5)
        got = set_logp(row.expand(len(sets), M), lo[b], hi[b], sets.float(), levels=3).double()
        torch.testing.assert_close(got, lp, atol=1e-4, rtol=1e-6)


def test_sample_frequencies_match_marginals_and_respect_bounds() -> None:
    torch.manual_seed(0)
    x = _logits(3)
    n = 20_000
    for b in range(4):
        draws = set_sample(x[b : b + 1].expand(n, M), LO[b], HI[b]).double()
        size = draws.sum(-1)
        assert ((size >= LO[b]) & (size <= HI[b])).all()
        mu = set_marginals(x[b : b + 1], LO[b : b + 1], HI[b : b + 1])[0]
        assert (draws.mean(0) - mu).abs().max() < 0.02
        masked = x[b] < -1e8
        assert (draws[:, masked] == 0).all()


def test_gradients_are_finite_with_masked_candidates() -> None:
    x = _logits(4).requires_grad_(True)
    y = _logits(5)
    members = set_sample(x.detach(), LO, HI)
    loss = set_logp(x, LO, HI, members).sum() + set_entropy(x, LO, HI).sum() + set_kl(x, y, LO, HI).sum()
    loss.backward()
    assert torch.isfinite(x.grad).all()
