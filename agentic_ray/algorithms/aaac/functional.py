"""Pure tensor maths of AAAC: TD(λ) advantages, λ selection by episode length, the β schedule.

Every function here is side-effect free, works on CPU or GPU tensors and is tested against a Python-loop
reference in ``tests/unit/algorithms/aaac/``. Shapes use ``B`` for episodes (or episode chunks), ``T`` for the
longest chunk in the batch, and ``N`` for the flat, episode-contiguous row count of an RLlib train batch.

Conventions (Gymnasium): ``terminated`` means the MDP ended, so there is no next state and nothing to
bootstrap from; a chunk that is *not* terminated (env truncation, or RLlib cutting an episode into fragments)
bootstraps from the value of the observation that follows its last step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "beta_schedule",
    "masked_standardize",
    "mix_advantages",
    "pad_episodes",
    "select_lambda",
    "td_lambda_advantages",
    "unpad_episodes",
]


def td_lambda_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_values: torch.Tensor,
    terminated: torch.Tensor,
    lengths: torch.Tensor,
    *,
    gamma: float,
    lambda_: torch.Tensor | float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """TD(λ) advantages and λ-returns of a batch of right-padded episode chunks (backward view).

    With ``δ_t = r_t + γ·V(s_{t+1}) − V(s_t)`` the advantage is ``A_t = δ_t + γλ·A_{t+1}`` inside a chunk;
    the λ-return (the critic's regression target) is ``G_t = A_t + V(s_t)``. At the chunk's last step
    ``t = L−1`` the next value is ``bootstrap_values`` if the chunk is not terminated and ``0`` if it is.
    λ may differ per chunk (AAAC picks it from the episode length, see :func:`select_lambda`).

    Args:
        rewards: ``(B, T)`` float, reward of step ``t``; entries at ``t >= lengths[b]`` are ignored.
        values: ``(B, T)`` float, critic value ``V(s_t)``; entries at ``t >= lengths[b]`` are ignored.
        bootstrap_values: ``(B,)`` float, ``V(s_L)`` of the observation after each chunk's last step.
        terminated: ``(B,)`` bool, True if the chunk ends in a terminal state (no bootstrap).
        lengths: ``(B,)`` int, number of real steps ``L_b`` in each chunk, ``1 <= L_b <= T``.
        gamma: Discount factor in ``[0, 1]``.
        lambda_: Scalar or ``(B,)`` float in ``[0, 1]``, one λ per chunk.

    Returns:
        ``(advantages, returns)``, each ``(B, T)`` with the dtype of ``values`` and exact zeros on padding.
    """
    B, T = rewards.shape
    dtype, device = values.dtype, values.device
    steps = torch.arange(T, device=device)
    valid = steps.unsqueeze(0) < lengths.to(device).unsqueeze(1)  # (B, T)
    lam = torch.as_tensor(lambda_, dtype=dtype, device=device).expand(B)

    rewards = torch.where(valid, rewards.to(dtype), torch.zeros((), dtype=dtype, device=device))
    values = torch.where(valid, values, torch.zeros((), dtype=dtype, device=device))
    bootstrap = bootstrap_values.to(dtype) * (~terminated.to(device=device, dtype=torch.bool)).to(dtype)

    # V(s_{t+1}): the next entry inside the chunk, the (possibly zeroed) bootstrap at the last step.
    next_values = torch.cat([values[:, 1:], torch.zeros(B, 1, dtype=dtype, device=device)], dim=1)
    last = (lengths.to(device) - 1).clamp(min=0)
    next_values[torch.arange(B, device=device), last] = bootstrap
    deltas = torch.where(valid, rewards + gamma * next_values - values, torch.zeros_like(values))

    # Padding has δ = 0 and A = 0, so the recursion needs no explicit mask: A_{L} = 0 for every chunk.
    advantages = torch.zeros_like(values)
    running = torch.zeros(B, dtype=dtype, device=device)
    for t in range(T - 1, -1, -1):
        running = deltas[:, t] + gamma * lam * running
        advantages[:, t] = running
    returns = torch.where(valid, advantages + values, torch.zeros_like(values))
    return advantages, returns


def select_lambda(
    episode_lengths: torch.Tensor,
    *,
    threshold: float,
    lambda_short: float,
    lambda_long: float,
    smooth_width: float | None = None,
) -> torch.Tensor:
    """Chooses TD(λ)'s λ per episode from its length (AAAC's adaptive λ).

    Short episodes get a high λ (close to Monte Carlo: few steps, little variance to fear); long episodes get
    a low λ (lean on the critic to cut variance). Step rule: ``L <= threshold`` is short. With
    ``smooth_width`` set, λ moves smoothly instead:
    ``λ = λ_long + (λ_short − λ_long) · sigmoid((threshold − L) / smooth_width)``, which equals the midpoint at
    ``L = threshold``.

    Args:
        episode_lengths: ``(B,)`` int or float episode lengths (for fragments, a lower bound; see the
            AAAC docs).
        threshold: Length at which an episode stops being short.
        lambda_short: λ for short episodes, in ``[0, 1]``.
        lambda_long: λ for long episodes, in ``[0, 1]``.
        smooth_width: ``None`` for the step rule, else the sigmoid's width in steps (> 0).

    Returns:
        ``(B,)`` float32 tensor of λ values on the device of ``episode_lengths``.
    """
    lengths = episode_lengths.to(torch.float32)
    if smooth_width is None:
        return torch.full_like(lengths, lambda_long).masked_fill(lengths <= threshold, lambda_short)
    weight_short = torch.sigmoid((threshold - lengths) / smooth_width)
    return lambda_long + (lambda_short - lambda_long) * weight_short


def beta_schedule(beta_0: float, num_updates: int, decay: float = 0.999) -> float:
    """KL coefficient ``β_t = β_0 · decay^t`` after ``t = num_updates`` learner updates.

    Args:
        beta_0: Initial KL coefficient, ``>= 0``.
        num_updates: Number of completed ``Learner.update()`` calls, ``>= 0``.
        decay: Per-update decay factor in ``(0, 1]`` (0.999 in the AAAC paper notes).

    Returns:
        The coefficient as a Python float.
    """
    return float(beta_0 * decay**num_updates)


def masked_standardize(x: torch.Tensor, mask: torch.Tensor, min_std: float = 1e-4) -> torch.Tensor:
    """Standardises ``x`` over the entries where ``mask`` is True; masked-out entries become 0.

    Args:
        x: ``(N,)`` float values.
        mask: ``(N,)`` bool, True for entries that count (real timesteps).
        min_std: Lower bound on the standard deviation (as RLlib's GAE does), avoids blowing up noise.

    Returns:
        ``(N,)`` tensor with mean 0 and std 1 over the masked entries (population std).
    """
    selected = x[mask]
    if selected.numel() == 0:
        return torch.zeros_like(x)
    mean = selected.mean()
    std = selected.std(unbiased=False).clamp(min=min_std)
    return torch.where(mask, (x - mean) / std, torch.zeros_like(x))


def mix_advantages(
    adv_reward: torch.Tensor,
    adv_risk: torch.Tensor,
    mask: torch.Tensor,
    *,
    w_reward: float,
    standardize_streams: bool = True,
    stream_std_floor: float = 0.05,
    min_std: float = 1e-4,
) -> torch.Tensor:
    """AAAC's advantage ``standardise(w·s(A_reward) + (1 − w)·s(A_risk))`` over the rows where ``mask`` is True.

    With ``standardize_streams`` each stream's advantage is first standardised over the batch,
    ``s(A) = (A − mean) / max(std, stream_std_floor)``, so ``w`` is each stream's share of the advantage's
    spread, as seed 002's ``0.7·reward_adv + 0.3·risk_adv`` assumes. The floor (in the stream's own units) keeps a
    silent stream's critic noise small instead of blowing it up to unit variance (a risk stream that is all zeros,
    or a batch without a risky step). Without ``standardize_streams`` (``s`` = identity) the raw advantages are
    mixed: a risk stream whose advantages spread 20× less than the reward stream's then moves the mix by ~2%,
    whatever ``w`` says.

    Args:
        adv_reward: ``(N,)`` reward-stream TD(λ) advantages.
        adv_risk: ``(N,)`` risk-stream TD(λ) advantages.
        mask: ``(N,)`` bool, True for real timesteps (the statistics use these only).
        w_reward: Weight of the reward stream in ``[0, 1]``; the risk stream gets ``1 − w_reward``.
        standardize_streams: Standardise each stream before mixing (default) or mix the raw advantages.
        stream_std_floor: Lower bound on each stream's standard deviation when standardising it, ``> 0``.
        min_std: Lower bound on the mix's standard deviation (see :func:`masked_standardize`).

    Returns:
        ``(N,)`` advantages, mean 0 and std 1 over the masked rows, 0 elsewhere.
    """
    if standardize_streams:
        adv_reward = masked_standardize(adv_reward, mask, stream_std_floor)
        adv_risk = masked_standardize(adv_risk, mask, stream_std_floor)
    return masked_standardize(w_reward * adv_reward + (1.0 - w_reward) * adv_risk, mask, min_std)


def pad_episodes(flat: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    """Splits an episode-contiguous flat column into a right-padded ``(B, T)`` block.

    Args:
        flat: ``(N,)`` values with ``N = sum(lengths)``, episode ``b`` in rows
            ``[sum(lengths[:b]), sum(lengths[:b+1]))``.
        lengths: ``B`` episode lengths.

    Returns:
        ``(B, max(lengths))`` tensor, zero-padded on the right.
    """
    chunks = list(torch.split(flat, list(lengths)))
    return torch.nn.utils.rnn.pad_sequence(chunks, batch_first=True)


def unpad_episodes(padded: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    """Inverse of :func:`pad_episodes`: concatenates the first ``lengths[b]`` entries of every row.

    Args:
        padded: ``(B, T)`` right-padded values, ``T >= max(lengths)``.
        lengths: ``B`` episode lengths.

    Returns:
        ``(N,)`` flat tensor with ``N = sum(lengths)``.
    """
    lengths_t = torch.as_tensor(list(lengths), device=padded.device)
    valid = torch.arange(padded.shape[1], device=padded.device).unsqueeze(0) < lengths_t.unsqueeze(1)
    return padded[valid]
