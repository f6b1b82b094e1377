"""AAAC maths against Python-loop references: TD(λ), λ selection, β schedule, standardisation, padding."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agentic_ray.algorithms.aaac.functional import (
    beta_schedule,
    masked_standardize,
    mix_advantages,
    pad_episodes,
    select_lambda,
    td_lambda_advantages,
    unpad_episodes,
)


def forward_view_lambda_return(
    rewards: list[float], values: list[float], bootstrap: float, terminated: bool, gamma: float, lam: float
) -> list[float]:
    """λ-return by its definition (forward view), with plain Python floats.

    ``G^λ_t = (1−λ)·Σ_{n=1}^{L−t−1} λ^{n−1}·G^{(n)}_t + λ^{L−t−1}·G^{(L−t)}_t`` where the n-step return
    ``G^{(n)}_t = Σ_{k<n} γ^k r_{t+k} + γ^n V(s_{t+n})`` and ``V(s_L)`` is the bootstrap (0 if terminated).
    """
    L = len(rewards)
    v_ext = [*values, 0.0 if terminated else bootstrap]

    def n_step(t: int, n: int) -> float:
        return sum(gamma**k * rewards[t + k] for k in range(n)) + gamma**n * v_ext[t + n]

    out = []
    for t in range(L):
        horizon = L - t
        g = sum((1 - lam) * lam ** (n - 1) * n_step(t, n) for n in range(1, horizon))
        g += lam ** (horizon - 1) * n_step(t, horizon)
        out.append(g)
    return out


def _random_batch(rng: np.random.Generator, num_episodes: int, max_len: int):
    lengths = rng.integers(1, max_len + 1, size=num_episodes)
    T = int(lengths.max())
    rewards = rng.normal(size=(num_episodes, T))
    values = rng.normal(size=(num_episodes, T))
    bootstrap = rng.normal(size=num_episodes)
    terminated = rng.random(num_episodes) < 0.5
    lambdas = rng.uniform(0.0, 1.0, size=num_episodes)
    return lengths, rewards, values, bootstrap, terminated, lambdas


@pytest.mark.parametrize("seed", range(8))
def test_td_lambda_matches_forward_view_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    gamma = float(rng.uniform(0.8, 1.0))
    lengths, rewards, values, bootstrap, terminated, lambdas = _random_batch(rng, num_episodes=6, max_len=12)

    adv, ret = td_lambda_advantages(
        torch.tensor(rewards),
        torch.tensor(values),
        torch.tensor(bootstrap),
        torch.tensor(terminated),
        torch.tensor(lengths),
        gamma=gamma,
        lambda_=torch.tensor(lambdas),
    )

    expected_ret = torch.zeros_like(ret)
    expected_adv = torch.zeros_like(adv)
    for b, L in enumerate(lengths):
        g = forward_view_lambda_return(
            list(rewards[b, :L]),
            list(values[b, :L]),
            float(bootstrap[b]),
            bool(terminated[b]),
            gamma,
            lambdas[b],
        )
        expected_ret[b, :L] = torch.tensor(g)
        expected_adv[b, :L] = torch.tensor(g) - torch.tensor(values[b, :L])
    torch.testing.assert_close(ret, expected_ret)
    torch.testing.assert_close(adv, expected_adv)
    # Padding is exactly zero.
    pad = torch.arange(ret.shape[1]).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)
    assert torch.all(adv[pad] == 0) and torch.all(ret[pad] == 0)


def test_truncated_bootstraps_from_final_value_terminated_does_not() -> None:
    rewards = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64).repeat(2, 1)
    values = torch.tensor([[0.5, -0.5, 0.25]], dtype=torch.float64).repeat(2, 1)
    lengths = torch.tensor([3, 3])
    terminated = torch.tensor([True, False])
    gamma, lam = 0.9, 0.7

    _, ret_a = td_lambda_advantages(
        rewards, values, torch.tensor([10.0, 10.0]), terminated, lengths, gamma=gamma, lambda_=lam
    )
    _, ret_b = td_lambda_advantages(
        rewards, values, torch.tensor([-7.0, -7.0]), terminated, lengths, gamma=gamma, lambda_=lam
    )
    # Terminated: the bootstrap value is ignored.
    torch.testing.assert_close(ret_a[0], ret_b[0])
    # Truncated: last step's target is r + γ·V(s_L) exactly.
    assert ret_a[1, 2].item() == pytest.approx(3.0 + 0.9 * 10.0)
    assert ret_b[1, 2].item() == pytest.approx(3.0 - 0.9 * 7.0)
    assert ret_a[0, 2].item() == pytest.approx(3.0)


def test_lambda_one_is_monte_carlo_and_zero_is_one_step_td() -> None:
    rewards = torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64)
    values = torch.tensor([[0.3, 0.6, 0.9]], dtype=torch.float64)
    args = (
        rewards,
        values,
        torch.tensor([4.0], dtype=torch.float64),
        torch.tensor([False]),
        torch.tensor([3]),
    )
    gamma = 0.5
    _, mc = td_lambda_advantages(*args, gamma=gamma, lambda_=1.0)
    expected_mc = [1 + 0.5 * 0 + 0.25 * 2 + 0.125 * 4, 0 + 0.5 * 2 + 0.25 * 4, 2 + 0.5 * 4]
    torch.testing.assert_close(mc[0], torch.tensor(expected_mc, dtype=torch.float64))
    _, td0 = td_lambda_advantages(*args, gamma=gamma, lambda_=0.0)
    expected_td0 = [1 + 0.5 * 0.6, 0 + 0.5 * 0.9, 2 + 0.5 * 4]
    torch.testing.assert_close(td0[0], torch.tensor(expected_td0, dtype=torch.float64))


def test_select_lambda_step_rule() -> None:
    lengths = torch.tensor([1, 7, 8, 9, 200])
    lam = select_lambda(lengths, threshold=8, lambda_short=0.95, lambda_long=0.55)
    torch.testing.assert_close(lam, torch.tensor([0.95, 0.95, 0.95, 0.55, 0.55]))


def test_select_lambda_smooth_interpolation() -> None:
    lengths = torch.tensor([0.0, 8.0, 10.0, 1000.0])
    lam = select_lambda(lengths, threshold=8, lambda_short=0.95, lambda_long=0.55, smooth_width=2.0)
    expected = [0.55 + 0.4 / (1 + math.exp(-(8 - length) / 2.0)) for length in lengths.tolist()]
    torch.testing.assert_close(lam, torch.tensor(expected))
    assert lam[1].item() == pytest.approx(0.75)  # midpoint at the threshold
    assert lam[0].item() == pytest.approx(0.95, abs=0.01)
    assert lam[3].item() == pytest.approx(0.55, abs=1e-6)
    assert torch.all(lam[:-1] >= lam[1:])  # monotone: longer → lower λ


def test_beta_schedule() -> None:
    assert beta_schedule(0.2, 0) == pytest.approx(0.2)
    assert beta_schedule(0.2, 1) == pytest.approx(0.2 * 0.999)
    assert beta_schedule(0.2, 1000) == pytest.approx(0.2 * 0.999**1000)
    assert beta_schedule(0.2, 1000) == pytest.approx(0.07354, rel=1e-3)
    assert beta_schedule(0.5, 3, decay=0.5) == pytest.approx(0.0625)
    assert beta_schedule(0.0, 10) == 0.0


def test_masked_standardize() -> None:
    x = torch.tensor([1.0, 2.0, 100.0, 3.0])
    mask = torch.tensor([True, True, False, True])
    out = masked_standardize(x, mask)
    sd = float(np.std([1.0, 2.0, 3.0]))
    torch.testing.assert_close(out, torch.tensor([-1.0 / sd, 0.0, 0.0, 1.0 / sd]))
    # A constant input does not blow up: std is floored.
    const = masked_standardize(torch.full((3,), 5.0), torch.ones(3, dtype=torch.bool))
    torch.testing.assert_close(const, torch.zeros(3))


def _standardize_loop(xs: list[float], keep: list[bool], floor: float) -> list[float]:
    vals = [x for x, k in zip(xs, keep, strict=True) if k]
    mean = sum(vals) / len(vals)
    sd = max(math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)), floor)
    return [(x - mean) / sd if k else 0.0 for x, k in zip(xs, keep, strict=True)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("standardize_streams", [True, False])
def test_mix_advantages_matches_loop_reference(seed: int, standardize_streams: bool) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    adv_reward = rng.normal(scale=2.5, size=n)
    # A sparse risk stream: mostly critic noise, a few risky steps far below.
    adv_risk = rng.normal(scale=0.01, size=n) - 0.6 * (rng.random(n) < 0.1)
    keep = list(rng.random(n) < 0.85)
    w, floor = float(rng.uniform(0.3, 0.9)), 0.05

    out = mix_advantages(
        torch.tensor(adv_reward),
        torch.tensor(adv_risk),
        torch.tensor(keep),
        w_reward=w,
        standardize_streams=standardize_streams,
        stream_std_floor=floor,
    )

    r, k = list(adv_reward), list(adv_risk)
    if standardize_streams:
        r, k = _standardize_loop(r, keep, floor), _standardize_loop(k, keep, floor)
    expected = _standardize_loop([w * a + (1 - w) * b for a, b in zip(r, k, strict=True)], keep, 1e-4)
    torch.testing.assert_close(out, torch.tensor(expected, dtype=out.dtype))


def test_mix_advantages_gives_a_sparse_risk_stream_its_weight() -> None:
    """Raw mixing drowns a risk stream 20x smaller than the reward stream; standardised streams do not."""
    rng = np.random.default_rng(0)
    n = 400
    risky = torch.tensor(rng.random(n) < 0.05)
    adv_reward = torch.tensor(rng.normal(scale=2.5, size=n))  # unrelated to risk
    adv_risk = -0.6 * risky.double()  # std ~0.13
    mask = torch.ones(n, dtype=torch.bool)
    raw = mix_advantages(adv_reward, adv_risk, mask, w_reward=0.7, standardize_streams=False)
    mixed = mix_advantages(adv_reward, adv_risk, mask, w_reward=0.7)
    assert float(raw[risky].mean()) > -0.3  # the risky rows barely move
    assert float(mixed[risky].mean()) < -1.0  # they get the risk stream's 0.3 share
    # A silent stream (critic noise far below the floor) stays small instead of reaching unit variance.
    noise = torch.tensor(rng.normal(scale=1e-3, size=n))
    quiet = mix_advantages(adv_reward, noise, mask, w_reward=0.7)
    only_reward = mix_advantages(adv_reward, torch.zeros(n, dtype=torch.float64), mask, w_reward=0.7)
    assert float((quiet - only_reward).abs().max()) < 0.05


def test_pad_unpad_round_trip() -> None:
    flat = torch.arange(9.0)
    lengths = [2, 4, 3]
    padded = pad_episodes(flat, lengths)
    assert padded.shape == (3, 4)
    torch.testing.assert_close(padded[0], torch.tensor([0.0, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(padded[2], torch.tensor([6.0, 7.0, 8.0, 0.0]))
    torch.testing.assert_close(unpad_episodes(padded, lengths), flat)
