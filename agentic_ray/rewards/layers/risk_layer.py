"""L3 risk: ``−Σ wᵢ·1[actionᵢ high-risk]``, one term on the step where the risky action happened.

It feeds the **risk** critic, not the reward critic. A step flagged ``high_risk`` with ``risk_weight == 0`` uses
``default_weight_per_action`` (the env did not say how risky it was, but it did say it was risky).
"""

from __future__ import annotations

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream


class RiskLayer(RewardLayer):
    """L3 risk stream.

    Args:
        default_weight_per_action: wᵢ for a high-risk step that carries no weight of its own.
    """

    name = "risk"
    version = "1"
    cost = CostClass.SYNC
    stream = Stream.RISK
    granularity = Granularity.STEP
    default_weight = 1.0

    def __init__(self, default_weight_per_action: float = 1.0) -> None:
        self.default_weight_per_action = float(default_weight_per_action)

    def score(self, record: EpisodeRecord) -> np.ndarray:
        return np.array(
            [
                -(s.risk_weight if s.risk_weight > 0 else self.default_weight_per_action)
                if s.high_risk
                else 0.0
                for s in record.steps
            ],
            dtype=np.float32,
        )
