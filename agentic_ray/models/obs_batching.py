"""Stacking per-step numpy observations into batched tensors (tests, benchmarks, serving)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["stack_observations"]


def stack_observations(
    observations: Sequence[dict[str, np.ndarray]], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Stacks ``B`` observation dicts into ``{key: (B, ...)}`` tensors, keeping dtypes.

    Args:
        observations: Observations as produced by the env / ``random_observation``.
        device: Target device.

    Returns:
        Batched observation tensors.
    """
    return {k: torch.as_tensor(np.stack([o[k] for o in observations])).to(device) for k in observations[0]}
