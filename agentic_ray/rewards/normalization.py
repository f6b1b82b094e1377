"""Online per-layer normalisation: a running mean and standard deviation per layer, checkpointable.

Seed 000 traced reward oscillation to mismatched layer scales ([−5, 1] vs [0, 1] vs [−1, 1]). Each layer's values
are normalised by its own running statistics before the layers are weighted and summed.

Modes:

* ``"scale"``: ``x / σ`` (no shift). The default for step-level layers: subtracting a mean at every step would
  add a per-step constant to the return and so change which episode lengths are preferred.
* ``"standard"``: ``(x − μ) / σ``. The default for episode-level layers (one value per episode, so the shift is
  one constant per episode).
* ``"none"``: unchanged.

Only the positions a layer actually scores are updated and normalised: every step for step-level layers, the
last step for episode-level ones (the other positions carry no signal and stay 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

NORMALIZE_MODES = ("none", "scale", "standard")


class RunningMeanStd:
    """Mean and variance over a stream of scalars (Chan et al. parallel update), mergeable and serialisable."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self.m2 = 0.0

    @property
    def var(self) -> float:
        """Population variance (0 before two samples)."""
        return self.m2 / self.count if self.count > 1 else 0.0

    @property
    def std(self) -> float:
        return float(np.sqrt(self.var))

    def update(self, x: np.ndarray) -> None:
        """Add the values in ``x`` (any shape)."""
        x = np.asarray(x, dtype=np.float64).ravel()
        if x.size == 0:
            return
        self.merge(x.size, float(x.mean()), float(((x - x.mean()) ** 2).sum()))

    def merge(self, count: int, mean: float, m2: float) -> None:
        """Merge summary statistics of another stream."""
        if count == 0:
            return
        total = self.count + count
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.count * count / total
        self.mean += delta * count / total
        self.count = total

    def get_state(self) -> dict[str, float]:
        return {"count": self.count, "mean": self.mean, "m2": self.m2}

    def set_state(self, state: dict[str, float]) -> None:
        self.count = int(state["count"])
        self.mean = float(state["mean"])
        self.m2 = float(state["m2"])


class RewardNormalizer:
    """One :class:`RunningMeanStd` per layer.

    Args:
        modes: layer name → ``"none" | "scale" | "standard"``.
        clip: normalised values are clipped to ``[−clip, clip]``.
        eps: added to σ; while σ is still below ``min_std`` (too few samples), values are only shifted, not scaled.
        min_std: see ``eps``.
    """

    def __init__(
        self, modes: dict[str, str], clip: float = 5.0, eps: float = 1e-8, min_std: float = 1e-3
    ) -> None:
        for layer, mode in modes.items():
            if mode not in NORMALIZE_MODES:
                raise ValueError(f"layer {layer}: normalize mode {mode!r} not in {NORMALIZE_MODES}")
        self.modes = dict(modes)
        self.clip = float(clip)
        self.eps = float(eps)
        self.min_std = float(min_std)
        self.stats = {layer: RunningMeanStd() for layer in modes}

    def update(self, layer: str, scored_values: np.ndarray) -> None:
        """Add the values a layer actually produced (not the unscored positions)."""
        self.stats[layer].update(scored_values)

    def normalize(self, layer: str, x: np.ndarray) -> np.ndarray:
        """Normalise values of ``layer`` with the current statistics; same shape as ``x``."""
        mode = self.modes[layer]
        x = np.asarray(x, dtype=np.float64)
        if mode == "none":
            return x.astype(np.float32)
        st = self.stats[layer]
        if mode == "standard":
            x = x - st.mean
        if st.std >= self.min_std:
            x = x / (st.std + self.eps)
        return np.clip(x, -self.clip, self.clip).astype(np.float32)

    def get_state(self) -> dict[str, Any]:
        return {layer: st.get_state() for layer, st in self.stats.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        for layer, st in state.items():
            if layer in self.stats:
                self.stats[layer].set_state(st)
