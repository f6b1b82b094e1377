"""L3 risk: ``−Σ wᵢ·1[actionᵢ high-risk]`` on the risky steps, plus the delayed consequences on the last step.

It feeds the **risk** critic, not the reward critic. Two terms:

* **immediate**: ``−wᵢ`` on the step where a high-risk action happened. A step flagged ``high_risk`` with
  ``risk_weight == 0`` uses ``default_weight_per_action`` (the env did not say how risky it was, but it did say
  it was risky);
* **delayed** (``risk_mode: soft``): each consequence in ``EpisodeRecord.consequences`` (a complaint or
  chargeback that a high-risk shortcut caused with the domain's probability) costs
  ``consequence_scale · weight`` (the contract's risk weight; ``default_weight_per_action`` when it has none).
  The consequence arrives after the episode ends, so its cost sits on the **last** step: the env's reward
  never sees it, and only a critic of this stream can carry it back (by discounting) to the shortcut that
  caused it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream

__all__ = ["RiskLayer"]


class RiskLayer(RewardLayer):
    """L3 risk stream.

    Args:
        default_weight_per_action: wᵢ for a high-risk step (or a consequence) that carries no weight of its own.
        consequence_scale: Cost of one delayed consequence, in units of its contract weight (``>= 0``; 0 leaves
            consequences out). The default 2 prices a complaint or chargeback at twice the shortcut's immediate
            weight, so with the contracts' probabilities (0.2-0.4) a shortcut's expected delayed cost is 0.4-0.8
            of its immediate one; set it per run with the reward pool's ``layers.risk.params``.
    """

    name = "risk"
    version = "2"  # 2: delayed consequences on the last step
    cost = CostClass.SYNC
    stream = Stream.RISK
    granularity = Granularity.STEP
    default_weight = 1.0

    def __init__(self, default_weight_per_action: float = 1.0, consequence_scale: float = 2.0) -> None:
        if consequence_scale < 0:
            raise ValueError(f"consequence_scale ({consequence_scale}) must be >= 0")
        self.default_weight_per_action = float(default_weight_per_action)
        self.consequence_scale = float(consequence_scale)

    def _weight(self, w: float) -> float:
        return w if w > 0 else self.default_weight_per_action

    def consequence_cost(self, consequences: list[dict[str, Any]]) -> float:
        """Total cost (``>= 0``) of an episode's delayed consequences."""
        return self.consequence_scale * sum(self._weight(float(c.get("weight", 0.0))) for c in consequences)

    def score(self, record: EpisodeRecord) -> np.ndarray:
        out = np.array(
            [-self._weight(s.risk_weight) if s.high_risk else 0.0 for s in record.steps], dtype=np.float32
        )
        if record.consequences and out.size:
            out[-1] -= self.consequence_cost(record.consequences)
        return out
