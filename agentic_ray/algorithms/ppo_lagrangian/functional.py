"""PPO-Lagrangian's maths as pure functions: the dual-ascent step on the multiplier and the mixed advantage."""

from __future__ import annotations

import torch

__all__ = ["lagrangian_advantages", "multiplier_update"]


def multiplier_update(multiplier: float, episode_cost: float, cost_limit: float, lr: float) -> float:
    """One projected dual-ascent step, ``λ ← max(0, λ + lr·(J_c − d))``.

    The Lagrangian of ``max_π J_r(π)`` s.t. ``J_c(π) <= d`` is ``J_r − λ(J_c − d)``; its gradient in ``λ`` is
    ``−(J_c − d)``, so descending it raises λ while the expected episode cost exceeds the budget and lowers it
    (down to 0) once the policy is inside it (Ray, Achiam & Amodei 2019, "Benchmarking Safe Exploration").

    Args:
        multiplier: Current λ, ``>= 0``.
        episode_cost: ``J_c``, the mean cost per episode of the latest batch.
        cost_limit: The budget ``d``.
        lr: Step size of the multiplier, ``> 0``.

    Returns:
        The new λ, ``>= 0``.
    """
    return max(0.0, float(multiplier) + float(lr) * (float(episode_cost) - float(cost_limit)))


def lagrangian_advantages(
    reward_advantages: torch.Tensor, cost_advantages: torch.Tensor, multiplier: float
) -> torch.Tensor:
    """``(A_r − λ·A_c) / (1 + λ)``: the policy's advantage under the Lagrangian, kept at the reward's scale.

    Dividing by ``1 + λ`` (as safety-starter-agents' PPO-Lagrangian does) keeps the surrogate's magnitude, and so
    PPO's clip range and the learning rate, meaningful when λ grows large.

    Args:
        reward_advantages: ``(N,)`` standardised reward advantages.
        cost_advantages: ``(N,)`` cost advantages (centred).
        multiplier: λ, ``>= 0``.

    Returns:
        ``(N,)`` advantages for PPO's clipped surrogate.
    """
    return (reward_advantages - multiplier * cost_advantages) / (1.0 + multiplier)
