"""L3 plan validity (seed 000 "Planning"): DAG valid ±1 and a redundancy penalty, at episode end only.

    value = (+1 if dag_valid else −1) − redundancy_penalty · #redundant steps
            − violation_penalty · dependency_violations

The satisfied order is also checked against ``goal_deps``: a prerequisite satisfied after its dependent counts
as a violation even if the env did not flag it (so a record cannot claim validity it does not have).
"""

from __future__ import annotations

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream, episode_level


def order_violations(record: EpisodeRecord) -> int:
    """Number of ``(prerequisite, dependent)`` edges whose dependent was satisfied before (or without) its prerequisite."""
    pos = {g: i for i, g in enumerate(record.goals_done_order)}
    n = 0
    for pre, dep in record.goal_deps:
        if dep in pos and (pre not in pos or pos[pre] > pos[dep]):
            n += 1
    return n


class PlanValidityLayer(RewardLayer):
    """L3 plan validity, reward stream, episode-level.

    Args:
        redundancy_penalty: subtracted per redundant step.
        violation_penalty: subtracted per dependency violation (beyond the ±1 validity term).
    """

    name = "plan"
    version = "1"
    cost = CostClass.SYNC
    stream = Stream.REWARD
    granularity = Granularity.EPISODE
    default_weight = 0.15

    def __init__(self, redundancy_penalty: float = 0.1, violation_penalty: float = 0.0) -> None:
        self.redundancy_penalty = float(redundancy_penalty)
        self.violation_penalty = float(violation_penalty)

    def score(self, record: EpisodeRecord) -> np.ndarray:
        violations = max(record.dependency_violations, order_violations(record))
        valid = record.dag_valid and violations == 0
        redundant = sum(1 for s in record.steps if s.redundant)
        value = (
            (1.0 if valid else -1.0)
            - self.redundancy_penalty * redundant
            - self.violation_penalty * violations
        )
        return episode_level(record, value)
