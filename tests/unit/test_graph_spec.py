"""The raw encoding of free numeric values (:func:`agentic_ray.graph_spec.numeric_action`)."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.graph_spec import NUMERIC_BOUND, NUMERIC_RESOLUTION, NUMERIC_TARGET_BOUND, numeric_action


def decoded_share(x: float) -> float:
    """The env's decode of a raw value, as a share of the bound range."""
    return (np.tanh(x) + 1.0) / 2.0


@pytest.mark.parametrize("share", [0.0, 1.0, -0.5, 1.5, 1e-9, 1.0 - 1e-9])
def test_a_value_at_a_bound_is_encoded_at_the_resolution_not_at_the_clip(share: float) -> None:
    """A value at (or past) a bound decodes to it within the resolution, from a raw value well inside the Box's
    clip: ±5 was an outlier imitation target beside the others near 0 (disputed_batch's thresholds at 0.3)."""
    x = numeric_action(share)
    bound = min(max(share, 0.0), 1.0)
    assert abs(decoded_share(x) - bound) <= NUMERIC_RESOLUTION + 1e-12
    assert abs(x) <= NUMERIC_TARGET_BOUND + 1e-12
    assert NUMERIC_TARGET_BOUND < 3.5 < NUMERIC_BOUND


@pytest.mark.parametrize("share", [0.01, 0.25, 0.5, 0.8, 0.99])
def test_a_value_inside_the_range_round_trips(share: float) -> None:
    assert decoded_share(numeric_action(share)) == pytest.approx(share, abs=1e-9)
