"""A sparse end-of-task reward: the task's outcome, once, on the last step, and nothing on any other step.

Seed 000's baseline for its layered rewards: "a sparse end-of-task reward could not say which sub-step failed".
The value is ``done_value`` when the task completed, ``failure_value`` on an explicit failure and
``ongoing_value`` when the episode ended neither way (truncated); every earlier step scores 0. Enabled alone
(``rewards.layers: {task_outcome: {}}``), it is the whole reward stream: the env's own per-step rewards are
replaced by the layers' sum whenever a reward pool is configured, so no call's result and no shaping reaches the
learner before the end. ``benchmarks/inspection.py --compare reward`` trains with it against the layered rewards.

Off by default. Being episode-level, it is normalised with a shift by default (``standard``); the benchmark sets
``normalize: scale`` so that an episode that did not finish still scores 0.
"""

from __future__ import annotations

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream, episode_level


def outcome_value(
    record: EpisodeRecord, done_value: float, failure_value: float, ongoing_value: float
) -> float:
    """``done_value`` if the episode completed its task, ``failure_value`` if it failed explicitly, else
    ``ongoing_value`` (truncated)."""
    if record.completed:
        return done_value
    if record.failed:
        return failure_value
    return ongoing_value


class TaskOutcomeLayer(RewardLayer):
    """Sparse end-of-task reward, reward stream, episode-level.

    Args:
        done_value: value of an episode that completed its task.
        failure_value: value of an explicit, unrecoverable failure.
        ongoing_value: value of an episode that ended neither way (ran out of steps).
    """

    name = "task_outcome"
    version = "1"
    cost = CostClass.SYNC
    stream = Stream.REWARD
    granularity = Granularity.EPISODE
    default_weight = 1.0
    enabled_by_default = False  # the layered rewards are the default; this is their sparse baseline

    def __init__(
        self, done_value: float = 1.0, failure_value: float = 0.0, ongoing_value: float = 0.0
    ) -> None:
        self.done_value = float(done_value)
        self.failure_value = float(failure_value)
        self.ongoing_value = float(ongoing_value)

    def score(self, record: EpisodeRecord) -> np.ndarray:
        return episode_level(
            record, outcome_value(record, self.done_value, self.failure_value, self.ongoing_value)
        )
