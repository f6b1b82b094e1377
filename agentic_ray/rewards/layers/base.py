"""The contract every reward layer follows.

A layer is a pure scorer: it maps one finished :class:`EpisodeRecord` to one value per env step, shape ``(T,)``.
Episode-level layers put their value on the last step and 0 elsewhere (those zeros are *positions without a
signal*, not imputed scores: the layer itself always produced exactly one value for the episode).

Each layer declares, as class attributes:

* ``cost``: where it runs. ``SYNC`` layers are cheap and are computed inline in the EnvRunner (microseconds).
  ``ASYNC_CPU`` layers are CPU-bound (model-based) and run in a sized Ray actor pool that receives whole batches.
  ``ASYNC_IO`` layers wait on I/O (an LLM judge over HTTP) and run in async Ray actors with ``num_cpus=0``.
* ``stream``: which critic the layer feeds, ``REWARD`` or ``RISK``.
* ``granularity``: ``STEP`` (a value on every step) or ``EPISODE`` (a value on the last step only).
* ``default_weight``: its weight in the combined stream unless the config overrides it.
* ``enabled_by_default``: whether :func:`~agentic_ray.rewards.reward_pool_config.default_layers` turns it on.
  Layers that score what only some domains report (detections, rankings) are off unless a config enables them.
* ``context_inputs``: the case facts it reads from ``EpisodeRecord.context`` (by the names of its own inputs).
  A domain declares which facts its ``reward_context`` gives; a layer whose inputs a domain does not give is off
  for that domain (:func:`~agentic_ray.rewards.reward_pool_config.layers_for_context`), never fed zeros.
"""

from __future__ import annotations

import asyncio
import enum
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord


class CostClass(str, enum.Enum):
    """Where a layer is computed."""

    SYNC = "sync"
    ASYNC_CPU = "async_cpu"
    ASYNC_IO = "async_io"


class Stream(str, enum.Enum):
    """Which critic a layer feeds."""

    REWARD = "reward"
    RISK = "risk"


class Granularity(str, enum.Enum):
    """Whether a layer scores every step or the episode as a whole (value on the last step)."""

    STEP = "step"
    EPISODE = "episode"


class RewardLayer(ABC):
    """A pure reward scorer. Subclasses implement :meth:`score` (and, for I/O layers, :meth:`ascore_batch`)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    cost: ClassVar[CostClass] = CostClass.SYNC
    stream: ClassVar[Stream] = Stream.REWARD
    granularity: ClassVar[Granularity] = Granularity.STEP
    default_weight: ClassVar[float] = 0.0
    enabled_by_default: ClassVar[bool] = True
    #: the ``EpisodeRecord.context`` entries the layer reads (empty: it reads none).
    context_inputs: ClassVar[tuple[str, ...]] = ()
    #: episodes per request/call inside an actor; each chunk succeeds or fails on its own.
    request_batch_size: int = 256
    #: whether the layer reads ``StepRecord.args``; if no async layer does, args are not shipped to actors.
    needs_step_args: ClassVar[bool] = False

    @property
    def scorer_name(self) -> str:
        """The name written to the ledger: the class that produced the value."""
        return type(self).__name__

    @property
    def scorer_version(self) -> str:
        """The version written to the ledger (model layers include their model version)."""
        return self.version

    @abstractmethod
    def score(self, record: EpisodeRecord) -> np.ndarray:
        """Score one finished episode.

        Args:
            record: the finished episode.

        Returns:
            float32 array of shape ``(record.num_steps,)``.
        """

    def score_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        """Score many episodes; model layers override this to run one vectorised forward pass.

        Args:
            records: finished episodes.

        Returns:
            one ``(T_i,)`` float32 array per record, in order.
        """
        return [self.score(r) for r in records]

    async def ascore_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        """Async variant used by async actors; the default runs :meth:`score_batch` in a thread."""
        return await asyncio.to_thread(self.score_batch, records)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (HTTP clients); the default has none."""


def episode_level(record: EpisodeRecord, value: float) -> np.ndarray:
    """Place an episode-level ``value`` on the last step of a ``(T,)`` array.

    Raises:
        ValueError: if the episode has no steps (nothing to attach a value to).
    """
    if record.num_steps == 0:
        raise ValueError(f"episode {record.episode_id} has no steps; it cannot carry a reward")
    out = np.zeros(record.num_steps, dtype=np.float32)
    out[-1] = value
    return out
