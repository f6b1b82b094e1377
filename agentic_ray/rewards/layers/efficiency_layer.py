"""L2 efficiency: how close the episode came to the task's optimal step count.

Seed 002 writes ``max(0, 1 − steps/steps_opt)``. Read literally it is 0 for the optimal plan and for every longer
one (``steps ≥ steps_opt`` always holds), so it carries no signal. We keep its shape, a linear decline clipped at
0, but measure the *excess* steps, so that the optimal plan scores 1::

    efficiency = max(0, 1 − (steps − steps_opt) / steps_opt)      (= 1 at steps_opt, 0 at 2·steps_opt)

An episode that did not complete scores ``incomplete_value`` (0 by default): a short episode that gave up must
not look efficient. The value is episode-level (placed on the last step).
"""

from __future__ import annotations

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream, episode_level


def efficiency(steps: int, steps_opt: int) -> float:
    """``max(0, 1 − (steps − steps_opt)/steps_opt)``, capped at 1 (a plan shorter than "optimal" scores 1)."""
    if steps_opt <= 0:
        raise ValueError(f"optimal step count must be positive, got {steps_opt}")
    return float(min(1.0, max(0.0, 1.0 - (steps - steps_opt) / steps_opt)))


class EfficiencyLayer(RewardLayer):
    """L2: efficiency relative to ``record.optimal_steps``, for completed episodes.

    Args:
        incomplete_value: value of an episode that did not complete its goals.
    """

    name = "efficiency"
    version = "1"
    cost = CostClass.SYNC
    stream = Stream.REWARD
    granularity = Granularity.EPISODE
    default_weight = 0.15

    def __init__(self, incomplete_value: float = 0.0) -> None:
        self.incomplete_value = float(incomplete_value)

    def score(self, record: EpisodeRecord) -> np.ndarray:
        value = (
            efficiency(record.num_steps, record.optimal_steps) if record.completed else self.incomplete_value
        )
        return episode_level(record, value)
