"""L4 memory (seed 000): entity recall and freshness, dense on the turns where remembered facts were used.

Reads the episode's key facts (:data:`~agentic_ray.keys.CONTEXT_MEMORY_FACTS`, a
:class:`~agentic_ray.memory.memory_episode.MemoryEpisode`): each fact the customer gave earns, on the turn of the
agent's first use of its slot, ``recall_weight`` for the correct value plus ``(1 - recall_weight)`` times its
freshness (full within 24 h of simulated time since it was last confirmed, none after 72 h, linear between); a
wrong value or asking again earns 0 (:func:`~agentic_ray.memory.functional.memory_step_credit`). The episode's
values sum to the mean credit over its facts, in [0, 1].

Off by default: only episodes that carry memory facts (multi-turn tasks) have anything for it to judge; an episode
without them scores 0 on every step.
"""

from __future__ import annotations

import numpy as np

from agentic_ray.keys import CONTEXT_MEMORY_FACTS
from agentic_ray.memory.functional import memory_step_credit
from agentic_ray.memory.memory_episode import MemoryEpisode
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream


class MemoryLayer(RewardLayer):
    """L4 memory, reward stream, step-level, cheap.

    Args:
        recall_weight: share of a fact's credit for reusing it correctly; the rest scales with its freshness.
    """

    name = "memory"
    version = "1"
    cost = CostClass.SYNC
    stream = Stream.REWARD
    granularity = Granularity.STEP
    default_weight = 0.1
    enabled_by_default = False
    context_inputs = (CONTEXT_MEMORY_FACTS,)

    def __init__(self, recall_weight: float = 0.5) -> None:
        if not 0.0 <= recall_weight <= 1.0:
            raise ValueError(f"recall_weight {recall_weight} outside [0, 1]")
        self.recall_weight = recall_weight

    def score(self, record: EpisodeRecord) -> np.ndarray:
        raw = record.context.get(CONTEXT_MEMORY_FACTS)
        if raw is None:
            return np.zeros(record.num_steps, dtype=np.float32)
        return memory_step_credit(MemoryEpisode.from_context(raw), record.num_steps, self.recall_weight)
