"""L4 user experience / memory: a simulated user's mean reply sentiment, plus entity recall when memory exists.

Seed 002 scores "mean sentiment of the user's replies". There is no real user in simulation, so each step gets a
deterministic simulated reply sentiment in [−1, 1]:

* a successful step that satisfied a subgoal: ``+progress`` (0.5)
* a redundant step (asked again for what was given): ``−redundant`` (0.3)
* a failed or masked step: ``−failure`` (0.5)
* slowness: ``−min(latency_cap, latency_ms / patience_ms)``
* negative sentiment is amplified by the user's ``complaint_rate`` c ∈ [0, 1]: ``s ← s·(1 + c)`` when s < 0

and one closing reply: +1 completed, −1 explicit failure, −0.5 ran out of steps. Satisfaction is the mean over
all replies, clipped to [−1, 1]. When the episode mentioned entities (memory exists), entity recall
``|recalled ∩ mentioned| / |mentioned|`` mapped to [−1, 1] is mixed in with ``memory_weight``. Episode-level.
"""

from __future__ import annotations

import numpy as np

from agentic_ray.keys import CONTEXT_COMPLAINT_RATE
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream, episode_level


def entity_recall(record: EpisodeRecord) -> float | None:
    """Fraction of mentioned entities that were recalled; ``None`` when nothing was mentioned."""
    mentioned = set(record.entities_mentioned)
    if not mentioned:
        return None
    return len(mentioned & set(record.entities_recalled)) / len(mentioned)


class UserExperienceLayer(RewardLayer):
    """L4, reward stream, episode-level. All arguments are the sentiment constants described in the module doc."""

    name = "user_experience"
    version = "1"
    cost = CostClass.SYNC
    stream = Stream.REWARD
    granularity = Granularity.EPISODE
    default_weight = 0.1

    def __init__(
        self,
        progress: float = 0.5,
        redundant: float = 0.3,
        failure: float = 0.5,
        patience_ms: float = 4000.0,
        latency_cap: float = 0.5,
        memory_weight: float = 0.3,
    ) -> None:
        self.progress = progress
        self.redundant = redundant
        self.failure = failure
        self.patience_ms = patience_ms
        self.latency_cap = latency_cap
        self.memory_weight = memory_weight

    def reply_sentiments(self, record: EpisodeRecord) -> np.ndarray:
        """Simulated sentiment of each reply: one per step plus the closing reply, shape ``(T + 1,)``."""
        c = float(np.clip(record.context.get(CONTEXT_COMPLAINT_RATE, 0.0), 0.0, 1.0))
        out = []
        for s in record.steps:
            v = 0.0
            if not s.ok or s.masked:
                v -= self.failure
            elif s.redundant:
                v -= self.redundant
            elif s.goals_satisfied:
                v += self.progress
            v -= min(self.latency_cap, max(0.0, s.latency_ms) / self.patience_ms)
            out.append(v)
        out.append(1.0 if record.completed else (-1.0 if record.failed else -0.5))
        arr = np.asarray(out, dtype=np.float64)
        arr = np.where(arr < 0, arr * (1.0 + c), arr)
        return np.clip(arr, -1.0, 1.0)

    def satisfaction(self, record: EpisodeRecord) -> float:
        """Mean simulated reply sentiment in [−1, 1]."""
        return float(np.clip(self.reply_sentiments(record).mean(), -1.0, 1.0))

    def score(self, record: EpisodeRecord) -> np.ndarray:
        value = self.satisfaction(record)
        recall = entity_recall(record)
        if recall is not None:
            value = (1.0 - self.memory_weight) * value + self.memory_weight * (2.0 * recall - 1.0)
        return episode_level(record, value)
