"""The shared shape of the dense layers that score individual tool calls from the domain's call outcomes.

A subclass names the outcomes it reads (:meth:`CallOutcomeLayer.outcomes`) and the metric of one call
(:meth:`CallOutcomeLayer.metric`); the layer puts the metric's potential differences per item on the calls' steps
(:func:`~agentic_ray.rewards.call_outcomes.potential_values`). An episode without such calls scores 0 on every
step (there was nothing to judge).

``baseline``: where an item's potential starts. ``"none"`` (the default): at 0, so the first call on an item earns
the item's whole score. ``"default"``: at the metric of the call the skill's default arguments would have made on
the same item (:meth:`CallOutcomeLayer.reference`; the domain must log those reports), so the layer pays only for
what the policy's arguments improved over the defaults: a difference reward. Why it exists (issue 30,
``benchmarks/inspection_reward_signal.py``: 200 sampled episodes of the 40-demonstration imitation policy on
``configs/inspection.yaml``): from 0, a part's first ``detect`` earns its whole F1, IoU and quality whatever its
thresholds, so the three detection layers paid for inspecting parts and for their difficulty (an easy part scores 1
at any setting), not for the choice the policy makes: failed episodes, most of them in the families with five
parts, earned more from them than completed ones (F1 raw sums 2.02 vs 1.61, r = −0.11); from the defaults, 0.16 vs −0.02 (r = 0.14).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from agentic_ray.rewards.call_outcomes import potential_values
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream

Baseline = Literal["none", "default"]
BASELINES: tuple[str, ...] = ("none", "default")


def check_baseline(layer: str, baseline: str) -> None:
    """Raise ValueError unless ``baseline`` is one of :data:`BASELINES`."""
    if baseline not in BASELINES:
        raise ValueError(f"{layer}: baseline must be one of {BASELINES}, got {baseline!r}")


class CallOutcomeLayer(RewardLayer):
    """Step-level, reward stream, cheap; off unless a config enables it (only some domains report outcomes).

    Args:
        baseline: where an item's potential starts (see the module docstring).
    """

    cost: ClassVar[CostClass] = CostClass.SYNC
    stream: ClassVar[Stream] = Stream.REWARD
    granularity: ClassVar[Granularity] = Granularity.STEP
    default_weight: ClassVar[float] = 0.1
    enabled_by_default: ClassVar[bool] = False
    has_reference: ClassVar[bool] = False
    """Whether :meth:`reference` is defined (``baseline: default`` is allowed)."""

    def __init__(self, baseline: Baseline = "none") -> None:
        check_baseline(self.name, baseline)
        if baseline == "default" and not self.has_reference:
            raise ValueError(f"{self.name}: no default-argument counterfactual: baseline must be 'none'")
        self.baseline = baseline

    @property
    def scorer_version(self) -> str:
        return self.version if self.baseline == "none" else f"{self.version}/baseline={self.baseline}"

    @abstractmethod
    def outcomes(self, record: EpisodeRecord) -> Sequence[Any] | None:
        """The record's outcomes this layer scores (None: the domain reports none)."""

    @abstractmethod
    def metric(self, outcome: Any) -> float:
        """One call's value (NaN: nothing to judge in this call)."""

    def reference(self, outcome: Any) -> float:
        """The value the skill's default arguments would have earned on the outcome's item (``baseline:
        default``'s starting potential; only layers with ``has_reference``)."""
        raise NotImplementedError(self.name)

    def score(self, record: EpisodeRecord) -> np.ndarray:
        outcomes = self.outcomes(record)
        if not outcomes:
            return np.zeros(record.num_steps, dtype=np.float32)
        ref = self.reference if self.baseline == "default" else None
        return potential_values(record, outcomes, self.metric, ref)
