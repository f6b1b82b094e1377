"""Online per-layer normalisation, including the state round trip."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.rewards.normalization import RewardNormalizer, RunningMeanStd


def test_running_mean_std_matches_numpy_over_chunks():
    rng = np.random.default_rng(3)
    data = rng.normal(2.0, 3.0, 1000)
    rms = RunningMeanStd()
    for chunk in np.array_split(data, 17):
        rms.update(chunk)
    assert rms.count == 1000
    assert rms.mean == pytest.approx(data.mean(), rel=1e-9)
    assert rms.var == pytest.approx(data.var(), rel=1e-9)


def test_merge_equals_single_stream():
    a, b = RunningMeanStd(), RunningMeanStd()
    a.update(np.arange(10.0))
    b.update(np.arange(10.0, 30.0))
    a.merge(b.count, b.mean, b.m2)
    assert a.mean == pytest.approx(np.arange(30.0).mean())
    assert a.var == pytest.approx(np.arange(30.0).var())


def test_modes_and_clip():
    n = RewardNormalizer({"s": "scale", "z": "standard", "n": "none"}, clip=5.0)
    for k in ("s", "z", "n"):
        n.update(k, np.array([1.0, 3.0]))  # mean 2, std 1
    np.testing.assert_allclose(n.normalize("s", np.array([4.0])), [4.0], rtol=1e-6)
    np.testing.assert_allclose(n.normalize("z", np.array([4.0, 2.0])), [2.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(n.normalize("n", np.array([40.0])), [40.0])
    np.testing.assert_allclose(n.normalize("z", np.array([100.0])), [5.0])  # clipped
    with pytest.raises(ValueError):
        RewardNormalizer({"x": "minmax"})


def test_too_few_samples_are_not_scaled():
    n = RewardNormalizer({"z": "standard"})
    n.update("z", np.array([3.0]))  # std 0: shift only
    np.testing.assert_allclose(n.normalize("z", np.array([4.0])), [1.0])


def test_state_round_trip():
    rng = np.random.default_rng(0)
    a = RewardNormalizer({"execution": "scale", "judge": "standard"})
    a.update("execution", rng.normal(0, 4, 200))
    a.update("judge", rng.normal(0.5, 0.2, 50))
    b = RewardNormalizer({"execution": "scale", "judge": "standard"})
    x = np.array([-3.0, 0.1, 2.0])
    assert not np.allclose(a.normalize("judge", x), b.normalize("judge", x))
    b.set_state(a.get_state())
    for layer in ("execution", "judge"):
        np.testing.assert_array_equal(a.normalize(layer, x), b.normalize(layer, x))
    assert b.get_state() == a.get_state()
