"""L5 long-term value: a frozen model-based scorer (7-day repurchase uplift), see :mod:`ltv_model`.

CPU-bound, so it runs in a sized actor pool that scores whole batches with one matrix product. Its scorer version
is the model version plus the digest of the shipped weights file, so the ledger shows exactly which model scored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream, episode_level
from agentic_ray.rewards.ltv_model import CONTEXT_FEATURES, LTVModel


class LongTermValueLayer(RewardLayer):
    """L5, reward stream, episode-level.

    Args:
        model_path: a model JSON; ``None`` loads the one shipped in ``agentic_ray/data``.
        scale: multiplies the uplift (α of seed 002's ``α·ΔCLV``).
    """

    name = "long_term_value"
    version = "1"
    cost = CostClass.ASYNC_CPU
    stream = Stream.REWARD
    granularity = Granularity.EPISODE
    default_weight = 0.1
    context_inputs = CONTEXT_FEATURES

    def __init__(self, model_path: str | None = None, scale: float = 1.0) -> None:
        self.model = LTVModel.load(model_path)
        self.scale = float(scale)

    @property
    def scorer_version(self) -> str:
        return f"{self.version}/{self.model.version}@{self.model.digest}"

    def score(self, record: EpisodeRecord) -> np.ndarray:
        return self.score_batch([record])[0]

    def score_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        values = self.scale * self.model.uplift(records)
        return [episode_level(r, float(v)) for r, v in zip(records, values, strict=True)]
