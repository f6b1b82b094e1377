"""The shared shape of the dense layers that score individual tool calls from the domain's call outcomes.

A subclass names the outcomes it reads (:meth:`CallOutcomeLayer.outcomes`) and the metric of one call
(:meth:`CallOutcomeLayer.metric`); the layer puts the metric's potential differences per item on the calls' steps
(:func:`~agentic_ray.rewards.call_outcomes.potential_values`). An episode without such calls scores 0 on every
step (there was nothing to judge).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from agentic_ray.rewards.call_outcomes import potential_values
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream


class CallOutcomeLayer(RewardLayer):
    """Step-level, reward stream, cheap; off unless a config enables it (only some domains report outcomes)."""

    cost: ClassVar[CostClass] = CostClass.SYNC
    stream: ClassVar[Stream] = Stream.REWARD
    granularity: ClassVar[Granularity] = Granularity.STEP
    default_weight: ClassVar[float] = 0.1
    enabled_by_default: ClassVar[bool] = False

    @abstractmethod
    def outcomes(self, record: EpisodeRecord) -> Sequence[Any] | None:
        """The record's outcomes this layer scores (None: the domain reports none)."""

    @abstractmethod
    def metric(self, outcome: Any) -> float:
        """One call's value (NaN: nothing to judge in this call)."""

    def score(self, record: EpisodeRecord) -> np.ndarray:
        outcomes = self.outcomes(record)
        if not outcomes:
            return np.zeros(record.num_steps, dtype=np.float32)
        return potential_values(record, outcomes, self.metric)
