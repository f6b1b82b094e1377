"""The value the learner trains on: each layer normalised by its own statistics, weighted into its stream."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.rewards.normalization import RewardNormalizer
from agentic_ray.rewards.reward_vector import combine_layers


def test_layers_are_normalised_weighted_and_summed_into_their_streams():
    norm = RewardNormalizer({"execution": "scale", "judge": "standard", "risk": "none"})
    norm.update("execution", np.array([1.0, -1.0, 1.0, -1.0]))  # std 1
    norm.update("judge", np.array([0.0, 2.0]))  # mean 1, std 1
    raw = {
        "execution": np.array([2.0, -2.0, 1.0], np.float32),  # step-level
        "judge": np.array([0.0, 0.0, 3.0], np.float32),  # episode-level: only the last step is a value
        "risk": np.array([0.0, -1.0, 0.0], np.float32),  # risk stream
    }
    reward, risk, normed = combine_layers(raw, norm, {"execution": 0.5, "judge": 0.2, "risk": 1.0}, 3)
    assert reward.dtype == np.float32 and risk.dtype == np.float32
    np.testing.assert_allclose(normed["execution"], [2.0, -2.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(
        normed["judge"], [0.0, 0.0, 2.0], rtol=1e-6
    )  # (3 - 1) / 1 on the last step only
    np.testing.assert_allclose(reward, [1.0, -1.0, 0.5 + 0.4], rtol=1e-6)
    np.testing.assert_allclose(risk, [0.0, -1.0, 0.0])
    with pytest.raises(KeyError):
        combine_layers(raw, norm, {"execution": 0.5}, 3)  # every layer needs its weight
