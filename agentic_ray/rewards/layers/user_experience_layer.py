"""L4 user experience: a simulated user's mean reply sentiment.

Seed 002 scores "mean sentiment of the user's replies". There is no real user in simulation, so each step gets a
deterministic simulated reply sentiment in [−1, 1]:

* a successful step that satisfied a subgoal: ``+progress`` (0.5)
* a redundant step (asked again for what was given): ``−redundant`` (0.3)
* a failed or masked step: ``−failure`` (0.5)
* slowness: ``−min(latency_cap, latency_ms / patience_ms)``
* negative sentiment is amplified by the customer's complaint rate c ∈ [0, 1] (the case fact
  :data:`COMPLAINT_RATE` of ``EpisodeRecord.context``, which the domain's ``reward_context`` must give; the layer
  is off for a domain that does not): ``s ← s·(1 + c)`` when s < 0

and one closing reply: +1 completed, −1 explicit failure, −0.5 ran out of steps. Satisfaction is the mean over
all replies, clipped to [−1, 1]. Episode-level.

No memory term: seed 002's L4 also scores how well the agent remembered the customer's entities. An earlier
version mixed in an "entity recall" computed from the task's ground-truth relevant entities, which measured whether
calls used the right entities, not recall from memory (Entity Recall@5 itself is reported as n/a). That term is
removed; the long-term-memory issue adds a real one.
"""

from __future__ import annotations

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream, episode_level

COMPLAINT_RATE = "customer_complaint_rate"
"""The case fact the layer reads: the customer's historical complaints per order, in [0, 1]."""


class UserExperienceLayer(RewardLayer):
    """L4, reward stream, episode-level. All arguments are the sentiment constants described in the module doc."""

    name = "user_experience"
    version = "2"
    cost = CostClass.SYNC
    stream = Stream.REWARD
    granularity = Granularity.EPISODE
    default_weight = 0.1
    context_inputs = (COMPLAINT_RATE,)

    def __init__(
        self,
        progress: float = 0.5,
        redundant: float = 0.3,
        failure: float = 0.5,
        patience_ms: float = 4000.0,
        latency_cap: float = 0.5,
    ) -> None:
        self.progress = progress
        self.redundant = redundant
        self.failure = failure
        self.patience_ms = patience_ms
        self.latency_cap = latency_cap

    def reply_sentiments(self, record: EpisodeRecord) -> np.ndarray:
        """Simulated sentiment of each reply: one per step plus the closing reply, shape ``(T + 1,)``."""
        c = float(np.clip(record.context[COMPLAINT_RATE], 0.0, 1.0))
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
        return episode_level(record, self.satisfaction(record))
