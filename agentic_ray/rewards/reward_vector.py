"""From settled raw layer values to the two streams the learner trains on: normalise, weight, sum (pure).

Each layer is normalised by its own running statistics (step-level layers at every step, episode-level layers at
their last step only; the other positions stay 0), multiplied by its weight, and added to its stream: the reward
stream (``episode.rewards``, the reward critic) or the risk stream (``custom_data[RISK_REWARDS]``, the risk
critic). The runner seals exactly these two float32 arrays in the ledger, and the learner checks them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from agentic_ray.rewards.layers import LAYER_CLASSES, Granularity, Stream
from agentic_ray.rewards.normalization import RewardNormalizer


def combine_layers(
    raw: Mapping[str, np.ndarray], normalizer: RewardNormalizer, weights: Mapping[str, float], num_steps: int
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Normalise and weight the layers of one episode.

    Args:
        raw: layer → ``(T,)`` raw values (every layer settled).
        normalizer: per-layer running statistics.
        weights: layer → weight in its stream.
        num_steps: ``T``.

    Returns:
        ``(reward (T,) float32, risk (T,) float32, {layer: normalised (T,) float32})``.
    """
    norm: dict[str, np.ndarray] = {}
    for name, v in raw.items():
        if LAYER_CLASSES[name].granularity is Granularity.STEP:
            norm[name] = normalizer.normalize(name, v)
        else:
            z = np.zeros(num_steps, dtype=np.float32)
            z[-1] = normalizer.normalize(name, np.asarray(v)[-1:])[0]
            norm[name] = z
    reward = np.zeros(num_steps, dtype=np.float64)
    risk = np.zeros(num_steps, dtype=np.float64)
    for name, v in norm.items():
        target = risk if LAYER_CLASSES[name].stream is Stream.RISK else reward
        target += float(weights[name]) * v
    return reward.astype(np.float32), risk.astype(np.float32), norm
