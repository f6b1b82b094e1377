"""Running normalisation of a critic's regression targets, so the critic learns returns of any scale.

The critic's raw output ``v`` is read as a normalised value: ``V = μ + σ·v``. The advantage connector
denormalises before TD(λ) (advantages and λ-returns stay in the stream's own units, so AAAC's ``0.7/0.3`` mix keeps
its meaning) and the loss regresses ``v`` on ``(G − μ)/σ``. ``μ`` and ``σ`` are exponential moving averages of the
λ-returns' mean and second moment, one update per ``Learner.update()``, debiased as in Adam (MAPPO's "value
normalisation", Yu et al. 2022, without PopArt's output correction, which would need the module's last layer).

Measured reason (diagnosis runs of ``benchmarks/aaac_cartpole.py``, not yet written up in a results note; the
unit test ``test_critic_follows_large_returns_only_with_normalisation`` shows the effect in small): on CartPole
the discounted return reaches ~80 while a tanh critic at Adam's 3e-4 steps grows its output slowly; seed 6 sat at a return of ~130 for 120k env steps
with a value loss of 50-140, and reached 450 at 73k env steps once the targets were scaled down. RLlib's
``RunningStat`` averages over all history, which lags returns that grow tenfold while the policy improves, hence
the moving average here.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["ValueNormalizer"]


class ValueNormalizer:
    """Moving mean and standard deviation of one critic's targets, and the affine maps they define.

    Before the first :meth:`update` it is the identity (``μ = 0``, ``σ = 1``).

    Args:
        decay: Weight of the past in each update's moving average, in ``[0, 1)``.
        min_std: Lower bound on ``σ`` (an all-zero risk stream has no spread).
    """

    def __init__(self, decay: float = 0.9, min_std: float = 1e-3) -> None:
        self.decay, self.min_std = decay, min_std
        self._mean, self._mean_sq, self._weight = 0.0, 0.0, 0.0

    def update(self, targets: torch.Tensor) -> None:
        """One moving-average step with the batch's targets ``(N,)`` (no-op for an empty batch)."""
        x = targets.detach().to(torch.float64)
        if x.numel() == 0:
            return
        d = self.decay
        self._mean = d * self._mean + (1.0 - d) * float(x.mean())
        self._mean_sq = d * self._mean_sq + (1.0 - d) * float((x * x).mean())
        self._weight = d * self._weight + (1.0 - d)

    @property
    def mean_std(self) -> tuple[float, float]:
        """``(μ, σ)``, debiased by the weight the moving averages have accumulated."""
        if self._weight == 0.0:
            return 0.0, 1.0
        mean = self._mean / self._weight
        var = max(self._mean_sq / self._weight - mean * mean, 0.0)
        return mean, max(math.sqrt(var), self.min_std)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``(x − μ)/σ``: a target in the critic's output units."""
        mean, std = self.mean_std
        return (x - mean) / std

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        """``μ + σ·x``: a critic output in the stream's units."""
        mean, std = self.mean_std
        return x * std + mean

    def get_state(self) -> dict[str, Any]:
        return {"mean": self._mean, "mean_sq": self._mean_sq, "weight": self._weight}

    def set_state(self, state: dict[str, Any]) -> None:
        self._mean, self._mean_sq, self._weight = (
            float(state["mean"]),
            float(state["mean_sq"]),
            float(state["weight"]),
        )
