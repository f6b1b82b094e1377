"""Skill → argument distribution maths against Python-loop references; masking keeps everything finite."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from agentic_ray.graph_spec import toy_specs
from agentic_ray.models.set_functional import set_mode
from agentic_ray.models.skill_argument_functional import (
    PackedActionLayout,
    masked_fill_value,
    skill_argument_entropy,
    skill_argument_kl,
    skill_argument_logp,
    skill_argument_mode,
    skill_argument_sample,
)

_, LAYOUT = toy_specs()
PACKED = PackedActionLayout.from_action_layout(LAYOUT)
Cat = torch.distributions.Categorical
Normal = torch.distributions.Normal


def _logits(batch: int, seed: int, masked: bool = False) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, PACKED.total_dim, generator=gen, dtype=torch.float64)
    if masked:
        parts = PACKED.split(x)
        fill = masked_fill_value(x.dtype)
        parts.skill[:, 0] = fill  # skill 0 masked everywhere
        parts.pointer[:, :, :, 2:] = fill  # only two pointer choices valid ...
        parts.pointer[0, 1, 0, :] = fill  # ... and one slot with no valid target at all
        parts.enum[:, :, :, 3] = fill
        parts.members[:, :, :, 3] = fill  # one list candidate never valid
        parts.source[:, :, :, 2:] = fill  # only the free value and source 0
    return x


def _lohi(k: int, i: int) -> tuple[int, int]:
    return PACKED.list_lo[k][i], PACKED.list_hi[k][i]


def _subsets(logits: torch.Tensor, lo: int, hi: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Every 0/1 set of allowed size and its (unnormalised) log weight, by enumeration."""
    m = logits.shape[-1]
    sets = [torch.tensor(bits, dtype=logits.dtype) for bits in itertools.product([0, 1], repeat=m)]
    sets = [x for x in sets if lo <= int(x.sum()) <= hi]
    return sets, torch.stack([(x * logits).sum() for x in sets])


def _enumerated_set_logp(logits: torch.Tensor, lo: int, hi: int, members: torch.Tensor) -> torch.Tensor:
    _, w = _subsets(logits, lo, hi)
    return (members.to(logits.dtype) * logits).sum() - w.logsumexp(0)


def _enumerated_set_entropy(logits: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    _, w = _subsets(logits, lo, hi)
    lp = w - w.logsumexp(0)
    return -(lp.exp() * lp).sum()


def _enumerated_set_kl(p: torch.Tensor, q: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    _, wp = _subsets(p, lo, hi)
    _, wq = _subsets(q, lo, hi)
    lp, lq = wp - wp.logsumexp(0), wq - wq.logsumexp(0)
    return (lp.exp() * (lp - lq)).sum()


def _ref_logp(x: torch.Tensor, action: dict[str, torch.Tensor]) -> torch.Tensor:
    parts = PACKED.split(x)
    out = []
    for b in range(x.shape[0]):
        k = int(action["skill"][b])
        s = LAYOUT.skills[k]
        lp = Cat(logits=parts.skill[b]).log_prob(torch.tensor(k))
        for i in range(len(s.pointer_types)):
            lp = lp + Cat(logits=parts.pointer[b, k, i]).log_prob(action["pointer"][b, i])
        mp = LAYOUT.max_pointer
        for i in range(len(s.list_types)):
            lo, hi = _lohi(k, i)
            mem = action["members"][b, i * mp : (i + 1) * mp]
            lp = lp + _enumerated_set_logp(parts.members[b, k, i], lo, hi, mem)
        for i in range(len(s.enum_sizes)):
            lp = lp + Cat(logits=parts.enum[b, k, i]).log_prob(action["enum"][b, i])
        for i in range(s.numeric_count):
            src = int(action["source"][b, i])
            lp = lp + Cat(logits=parts.source[b, k, i]).log_prob(torch.tensor(src))
            if src == 0:
                lp = lp + Normal(parts.numeric_mean[b, k, i], parts.numeric_log_std[b, k, i].exp()).log_prob(
                    action["numeric"][b, i]
                )
        out.append(lp)
    return torch.stack(out)


def _ref_entropy(x: torch.Tensor) -> torch.Tensor:
    parts = PACKED.split(x)
    out = []
    for b in range(x.shape[0]):
        p = parts.skill[b].softmax(-1)
        h = Cat(logits=parts.skill[b]).entropy()
        for k, s in enumerate(LAYOUT.skills):
            hk = sum(Cat(logits=parts.pointer[b, k, i]).entropy() for i in range(len(s.pointer_types)))
            hk = hk + sum(Cat(logits=parts.enum[b, k, i]).entropy() for i in range(len(s.enum_sizes)))
            hk = hk + sum(
                _enumerated_set_entropy(parts.members[b, k, i], *_lohi(k, i))
                for i in range(len(s.list_types))
            )
            hk = hk + sum(
                Cat(logits=parts.source[b, k, i]).entropy()
                + parts.source[b, k, i].softmax(-1)[0]
                * Normal(parts.numeric_mean[b, k, i], parts.numeric_log_std[b, k, i].exp()).entropy()
                for i in range(s.numeric_count)
            )
            h = h + p[k] * hk
        out.append(h)
    return torch.stack(out)


def _ref_kl(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    p, q = PACKED.split(x), PACKED.split(y)
    kl = torch.distributions.kl_divergence
    out = []
    for b in range(x.shape[0]):
        pk = p.skill[b].softmax(-1)
        total = kl(Cat(logits=p.skill[b]), Cat(logits=q.skill[b]))
        for k, s in enumerate(LAYOUT.skills):
            t = sum(
                kl(Cat(logits=p.pointer[b, k, i]), Cat(logits=q.pointer[b, k, i]))
                for i in range(len(s.pointer_types))
            )
            t = t + sum(
                kl(Cat(logits=p.enum[b, k, i]), Cat(logits=q.enum[b, k, i])) for i in range(len(s.enum_sizes))
            )
            t = t + sum(
                _enumerated_set_kl(p.members[b, k, i], q.members[b, k, i], *_lohi(k, i))
                for i in range(len(s.list_types))
            )
            t = t + sum(
                kl(Cat(logits=p.source[b, k, i]), Cat(logits=q.source[b, k, i]))
                + p.source[b, k, i].softmax(-1)[0]
                * kl(
                    Normal(p.numeric_mean[b, k, i], p.numeric_log_std[b, k, i].exp()),
                    Normal(q.numeric_mean[b, k, i], q.numeric_log_std[b, k, i].exp()),
                )
                for i in range(s.numeric_count)
            )
            total = total + pk[k] * t
        out.append(total)
    return torch.stack(out)


def test_logp_entropy_kl_match_loop_reference() -> None:
    x, y = _logits(7, 0), _logits(7, 1)
    torch.manual_seed(0)
    action = skill_argument_sample(PACKED.split(x), PACKED)
    torch.testing.assert_close(skill_argument_logp(PACKED.split(x), PACKED, action), _ref_logp(x, action))
    torch.testing.assert_close(skill_argument_entropy(PACKED.split(x), PACKED), _ref_entropy(x))
    torch.testing.assert_close(skill_argument_kl(PACKED.split(x), PACKED.split(y), PACKED), _ref_kl(x, y))
    torch.testing.assert_close(
        skill_argument_kl(PACKED.split(x), PACKED.split(x), PACKED), torch.zeros(7, dtype=torch.float64)
    )


def test_entropy_matches_monte_carlo_of_minus_logp() -> None:
    x = _logits(1, 2).expand(20000, -1)
    torch.manual_seed(1)
    parts = PACKED.split(x)
    mc = -skill_argument_logp(parts, PACKED, skill_argument_sample(parts, PACKED)).mean()
    exact = skill_argument_entropy(parts, PACKED)[0]
    assert abs(float(mc - exact)) < 0.05, (float(mc), float(exact))


def test_unused_slots_do_not_count() -> None:
    x = _logits(5, 3)
    torch.manual_seed(2)
    parts = PACKED.split(x)
    action = skill_argument_sample(parts, PACKED)
    for b, k in enumerate(action["skill"].tolist()):
        s = LAYOUT.skills[k]
        assert action["pointer"][b, len(s.pointer_types) :].eq(0).all()
        assert action["enum"][b, len(s.enum_sizes) :].eq(0).all()
        assert action["numeric"][b, s.numeric_count :].eq(0).all()
        assert action["source"][b, s.numeric_count :].eq(0).all()
        mp = LAYOUT.max_pointer
        assert action["members"][b, len(s.list_types) * mp :].eq(0).all()
    # Garbage in unused action slots does not change logp.
    garbage = {k: v.clone() for k, v in action.items()}
    for b, k in enumerate(action["skill"].tolist()):
        s = LAYOUT.skills[k]
        garbage["pointer"][b, len(s.pointer_types) :] = 3
        garbage["enum"][b, len(s.enum_sizes) :] = 2
        garbage["numeric"][b, s.numeric_count :] = 4.0
        garbage["source"][b, s.numeric_count :] = 1
        garbage["members"][b, len(s.list_types) * LAYOUT.max_pointer :] = 1
    torch.testing.assert_close(
        skill_argument_logp(parts, PACKED, garbage), skill_argument_logp(parts, PACKED, action)
    )
    # Logits of unused slots do not change entropy or KL.
    y = x.clone()
    py = PACKED.split(y)
    handoff = LAYOUT.skill_index("e.handoff")  # uses no slot at all
    py.pointer[:, handoff] += 5.0
    py.enum[:, handoff] -= 3.0
    py.members[:, handoff] += 2.0
    py.source[:, handoff] -= 1.0
    torch.testing.assert_close(
        skill_argument_entropy(py, PACKED), skill_argument_entropy(PACKED.split(x), PACKED)
    )
    torch.testing.assert_close(
        skill_argument_kl(PACKED.split(x), py, PACKED),
        torch.zeros(5, dtype=torch.float64),
        atol=1e-12,
        rtol=0,
    )


def test_masked_logits_stay_finite_with_finite_gradients() -> None:
    for dtype in (torch.float32, torch.float64):
        x = _logits(6, 4, masked=True).to(dtype).requires_grad_(True)
        y = _logits(6, 5, masked=True).to(dtype)
        parts = PACKED.split(x)
        torch.manual_seed(3)
        action = skill_argument_sample(parts, PACKED)
        assert not (action["skill"] == 0).any()
        logp = skill_argument_logp(parts, PACKED, action)
        ent = skill_argument_entropy(parts, PACKED)
        kl = skill_argument_kl(parts, PACKED.split(y), PACKED)
        for t in (logp, ent, kl):
            assert torch.isfinite(t).all()
        assert (kl >= -1e-5).all()
        (logp.sum() + ent.sum() + kl.sum()).backward()
        assert torch.isfinite(x.grad).all()


def test_mode_is_argmax() -> None:
    x = _logits(4, 6)
    parts = PACKED.split(x)
    mode = skill_argument_mode(parts, PACKED)
    assert torch.equal(mode["skill"], parts.skill.argmax(-1))
    for b, k in enumerate(mode["skill"].tolist()):
        s = LAYOUT.skills[k]
        for i in range(len(s.pointer_types)):
            assert mode["pointer"][b, i] == parts.pointer[b, k, i].argmax()
        for i in range(s.numeric_count):
            assert math.isclose(float(mode["numeric"][b, i]), float(parts.numeric_mean[b, k, i]))
            assert mode["source"][b, i] == parts.source[b, k, i].argmax()
        mp = LAYOUT.max_pointer
        for i in range(len(s.list_types)):
            lo, hi = _lohi(k, i)
            sets, w = _subsets(parts.members[b, k, i], lo, hi)
            assert torch.equal(mode["members"][b, i * mp : (i + 1) * mp].to(x.dtype), sets[int(w.argmax())])
    for b in range(4):  # the set mode of every skill's list slot, not only the chosen skill's
        for k, s in enumerate(LAYOUT.skills):
            for i in range(len(s.list_types)):
                lo, hi = _lohi(k, i)
                sets, w = _subsets(parts.members[b, k, i], lo, hi)
                got = set_mode(parts.members[b : b + 1, k, i], torch.tensor([lo]), torch.tensor([hi]))[0]
                assert torch.equal(got.to(x.dtype), sets[int(w.argmax())])


def test_numeric_mean_gradient_is_scaled_by_its_sigma() -> None:
    """Same logp values, but d logp / d mean = (x − μ)/σ (= ε) instead of (x − μ)/σ²."""
    x = _logits(32, 7)
    torch.manual_seed(3)
    action = skill_argument_sample(PACKED.split(x), PACKED)
    action["source"] = torch.zeros_like(action["source"])  # free values: the Gaussian counts
    x = x.clone().requires_grad_(True)
    parts = PACKED.split(x)
    logp = skill_argument_logp(parts, PACKED, action)
    torch.testing.assert_close(logp.detach(), _ref_logp(x.detach(), action))
    (grad,) = torch.autograd.grad(logp.sum(), x)
    g_mean = PACKED.split(grad).numeric_mean
    checked = 0
    for b, k in enumerate(action["skill"].tolist()):
        for i in range(LAYOUT.skills[k].numeric_count):
            mu, log_std = parts.numeric_mean[b, k, i].detach(), parts.numeric_log_std[b, k, i].detach()
            expected = (action["numeric"][b, i] - mu) / log_std.exp()
            assert float(g_mean[b, k, i]) == pytest.approx(float(expected), rel=1e-6)
            checked += 1
    assert checked > 0
