"""The learner side of the reward audit: a learner connector that records what reached the train batch.

:class:`TrainedRewardRecorder` runs inside every ``Learner.update()`` call, after ``AddOneTsToEpisodesAndTruncate``
and the user's own learner pieces and before RLlib's default pieces copy the episodes' rewards into the batch
(custom pieces come first in ``build_learner_connector``). For every episode in the update it writes one
``trained`` row to the reward ledger: the episode's ledger id and the checksum of the reward and risk streams it
received (the first ``num_steps`` rewards: the artificial bootstrap step is not part of the seal). The audit then
joins these rows against the runner's seals and the scorers' results, so an episode the learner never got, got
twice, or got with different rewards is named (see :mod:`agentic_ray.rewards.ledger_audit`).

It writes from the learner process, synchronously (one ledger call per update), before the gradient steps of that
update: an update that then crashes takes the algorithm down, and the run resumes from a checkpoint whose ledger
was saved before these rows existed.

:class:`RecordingLearnerConnector` is the picklable ``config.learners(learner_connector=...)`` builder that puts
the recorder after a user's own pieces; :func:`install_recorder` sets it on a config.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.utils.annotations import override

from agentic_ray.keys import REWARD_LEDGER_ID, REWARD_SEAL, RISK_REWARDS
from agentic_ray.rewards.score_messages import values_checksum

logger = logging.getLogger(__name__)


class TrainedRewardRecorder(ConnectorV2):
    """Records ``(ledger id, checksum of the rewards received)`` per episode of each learner update.

    Args:
        input_observation_space: ConnectorV2 signature.
        input_action_space: ConnectorV2 signature.
        spec: :attr:`RewardActorPool.spec` (the ledger actor's name).
        timeout_s: longest wait for the ledger to acknowledge one update's rows.
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        spec: dict[str, Any],
        timeout_s: float = 30.0,
    ) -> None:
        super().__init__(input_observation_space, input_action_space)
        self._spec = spec
        self._timeout_s = timeout_s
        self._ledger: Any = None
        self._learner_id = f"learner-{uuid.uuid4().hex[:8]}"
        self._seq = itertools.count()

    @staticmethod
    def trained_event(episode: Any) -> dict[str, Any]:
        """The ``trained`` ledger event of one episode as the learner received it."""
        seal = episode.custom_data.get(REWARD_SEAL) or {}
        n = int(seal.get("num_steps", len(episode)))
        rewards = np.asarray(episode.get_rewards(), dtype=np.float32)[:n]
        risk = np.asarray(episode.custom_data.get(RISK_REWARDS, np.zeros(n)), dtype=np.float32).reshape(-1)[
            :n
        ]
        return {
            "kind": "trained",
            "episode_id": str(episode.custom_data.get(REWARD_LEDGER_ID, episode.id_)),
            "checksum": values_checksum(rewards, risk),
            "reward_sum": float(rewards.sum(dtype=np.float64)),
            "risk_sum": float(risk.sum(dtype=np.float64)),
            "num_steps": n,
            "t": time.time(),
        }

    @override(ConnectorV2)
    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict | None = None,
        metrics: Any = None,
        **kwargs: Any,
    ) -> Any:
        import ray

        events = [
            {**self.trained_event(e), "learner": self._learner_id}
            for e in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False)
        ]
        if not events:
            return batch
        if self._ledger is None:
            self._ledger = ray.get_actor(self._spec["ledger"])
        ref = self._ledger.apply.remote(f"{self._learner_id}-{next(self._seq)}", events, {})
        ready, _ = ray.wait([ref], timeout=self._timeout_s)
        if ready:
            ray.get(ref)
        else:  # the write stays queued (the ledger actor retries its calls); the audit shows it if it never lands
            logger.warning(
                "reward ledger did not acknowledge %d trained rows within %.0fs", len(events), self._timeout_s
            )
        return batch


class RecordingLearnerConnector:
    """``learner_connector`` builder: the wrapped builder's pieces (if any), then a :class:`TrainedRewardRecorder`.

    Args:
        spec: :attr:`RewardActorPool.spec`.
        inner: the config's previous ``learner_connector`` builder, or None.
    """

    def __init__(self, spec: dict[str, Any], inner: Any = None) -> None:
        self.spec = spec
        self.inner = inner

    def __call__(self, input_observation_space: Any, input_action_space: Any) -> list[ConnectorV2]:
        pieces: list[ConnectorV2] = []
        if self.inner is not None:
            val = self.inner(input_observation_space, input_action_space)
            pieces = [val] if isinstance(val, ConnectorV2) else list(val)
        return [*pieces, TrainedRewardRecorder(input_observation_space, input_action_space, spec=self.spec)]


def install_recorder(config: Any, spec: dict[str, Any]) -> None:
    """Put a recorder for the pool ``spec`` into an unfrozen AlgorithmConfig's learner pipeline (replacing an old
    one, e.g. from a restored checkpoint's config that names a previous run's ledger)."""
    inner = getattr(config, "_learner_connector", None)
    if isinstance(inner, RecordingLearnerConnector):
        inner = inner.inner
    config.learners(learner_connector=RecordingLearnerConnector(spec, inner))
