"""Wiring the reward pool into any RLlib algorithm (PPO, AAAC): config helper and an Algorithm mixin.

Two ways, both ending with EnvRunners that look the pool's actors up by name and a learner that records what it
trained on (:class:`~agentic_ray.rollout.trained_reward_recorder.TrainedRewardRecorder`):

1. Driver-owned pool::

       pool = RewardActorPool.create(pool_cfg)
       config = wire_reward_pool(PPOConfig().environment(...), pool_cfg, pool)
       algo = config.build_algo()
       ...
       drain_env_runners(algo)           # before save_to_path; train on what it returns
       pool.save(ckpt_dir); pool.shutdown()

2. Algorithm-owned pool (Tune-friendly): mix :class:`RewardPoolAlgorithmMixin` in front of the algorithm class
   (:class:`RewardPoolPPO` is PPO with it; AAAC does ``class AAAC(RewardPoolAlgorithmMixin, Algorithm)``) and call
   ``wire_reward_pool(config, pool_cfg)`` without a pool. ``setup()`` creates the pool with uuid-suffixed names
   before the EnvRunners exist; ``save_to_path`` drains the runners into one learner update and saves the ledger
   next to the checkpoint; ``restore_from_path`` loads it back (normaliser state included); every iteration, the
   ledger learns which EnvRunner incarnations died (RLlib restarted them), so their pending episodes are dropped
   with a reason instead of staying pending forever; ``stop()`` shuts the pool down without throwing episodes
   away uncounted (the runners record what is still pending).
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.env.env_runner_group import EnvRunnerGroup
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

from agentic_ray.rewards.ledger_audit import LedgerAudit
from agentic_ray.rewards.reward_actor_pool import RewardActorPool
from agentic_ray.rewards.reward_ledger import REASON_PENDING_AT_RESTORED_CHECKPOINT
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig
from agentic_ray.rollout.reward_aware_env_runner import (
    CONFIG_ATTR_POOL,
    CONFIG_ATTR_SPEC,
    RewardAwareEnvRunner,
    reward_pool_config_from,
)
from agentic_ray.rollout.trained_reward_recorder import install_recorder

logger = logging.getLogger(__name__)
REWARD_POOL_DIR = "reward_pool"
#: AlgorithmConfig attribute: "algorithm" (the mixin creates the pool in setup) or "driver".
CONFIG_ATTR_OWNER = "reward_pool_owner"


def wire_reward_pool(
    config: AlgorithmConfig, pool_cfg: RewardPoolConfig, pool: RewardActorPool | None = None
) -> AlgorithmConfig:
    """Make ``config`` sample through :class:`RewardAwareEnvRunner` with the given pool settings.

    Sets ``env_runner_cls``, ``batch_mode="complete_episodes"`` and the custom attributes ``reward_pool`` (the
    settings as a dict, so Tune can sweep them) and, when ``pool`` is given, ``reward_pool_spec`` (actor names)
    and the learner-side recorder.

    Args:
        config: an unfrozen AlgorithmConfig (PPOConfig, AAACConfig, ...).
        pool_cfg: reward settings.
        pool: a driver-created pool; leave None when the algorithm mixes in :class:`RewardPoolAlgorithmMixin`.

    Returns:
        ``config`` (modified in place).
    """
    config.env_runners(env_runner_cls=RewardAwareEnvRunner, batch_mode="complete_episodes")
    setattr(config, CONFIG_ATTR_POOL, pool_cfg.model_dump(mode="json"))
    setattr(config, CONFIG_ATTR_SPEC, pool.spec if pool is not None else None)
    setattr(config, CONFIG_ATTR_OWNER, "driver" if pool is not None else "algorithm")
    if pool is not None:
        install_recorder(config, pool.spec)
    return config


def drain_env_runners(algo: Algorithm, timeout_s: float | None = None) -> list[SingleAgentEpisode]:
    """Drain every EnvRunner of ``algo`` (remote ones and the local one) and return the settled episodes."""
    group = algo.env_runner_group
    episodes: list[SingleAgentEpisode] = []
    if group is None:
        return episodes
    results = group.foreach_env_runner(
        lambda er: er.drain(timeout_s) if isinstance(er, RewardAwareEnvRunner) else [],
        local_env_runner=True,
    )
    for eps in results:
        episodes.extend(eps or [])
    return episodes


def report_runner_liveness(group: EnvRunnerGroup, ledger: Any) -> None:
    """Tell the ledger which incarnation of each remote EnvRunner is alive; every other one died.

    The ledger then drops the dead incarnations' pending episodes (``env_runner_died``: their RLlib episodes died
    with the process, so they cannot be scored again and trained on) and marks their sealed, untrained ones
    ``env_runner_died_in_transit`` (lost: the sample call that carried them failed).
    """
    import ray

    if group is None or group.num_remote_env_runners() == 0:
        return
    alive: dict[int, str | None] = dict(
        group.foreach_env_runner(
            lambda er: (er.worker_index, getattr(er, "reward_runner_id", None)),
            local_env_runner=False,
            timeout_seconds=30,
        )
    )
    healthy = set(group.healthy_env_runner_ids())
    # A healthy runner that did not answer in time is left alone: only a known incarnation or a known failure
    # may retire the others.
    events = [
        {"kind": "runner_alive", "prefix": f"w{i}-", "alive": alive.get(i)}
        for i in range(1, group.num_remote_env_runners() + 1)
        if i in alive or i not in healthy
    ]
    ray.get(ledger.apply.remote(f"liveness-{uuid.uuid4().hex}", events, {}))


class RewardPoolAlgorithmMixin:
    """Algorithm mixin that owns a :class:`RewardActorPool`. Put it first in the bases."""

    _reward_pool: RewardActorPool | None = None

    def setup(self, config: AlgorithmConfig) -> None:  # type: ignore[override]
        # An algorithm-owned pool is always created afresh: a spec found in a restored checkpoint's config
        # names the actors of a previous run.
        owner = getattr(config, CONFIG_ATTR_OWNER, None)
        if owner == "algorithm" or (owner is None and getattr(config, CONFIG_ATTR_SPEC, None) is None):
            pool_cfg = reward_pool_config_from(config)
            self._reward_pool = RewardActorPool.create(pool_cfg, name_prefix="agray-reward")
            # The EnvRunnerGroup and the learners are built from the frozen self.config: inject the pool there.
            algo: Any = self
            cfg = algo.config.copy(copy_frozen=False)
            setattr(cfg, CONFIG_ATTR_SPEC, self._reward_pool.spec)
            install_recorder(cfg, self._reward_pool.spec)
            cfg.freeze()
            algo.config = cfg
            config = cfg
        super().setup(config)  # type: ignore[misc]

    @property
    def reward_pool(self) -> RewardActorPool | None:
        """The pool this algorithm created (None when the driver owns it)."""
        return self._reward_pool

    def reward_audit(self) -> LedgerAudit:
        """The ledger audit of this algorithm's pool."""
        if self._reward_pool is None:
            raise RuntimeError("this algorithm does not own a reward pool")
        return self._reward_pool.audit()

    def restore_env_runners(self, env_runner_group: EnvRunnerGroup) -> list[int]:
        restored = super().restore_env_runners(env_runner_group)  # type: ignore[misc]
        algo: Any = self
        if self._reward_pool is not None and env_runner_group is algo.env_runner_group:
            report_runner_liveness(env_runner_group, self._reward_pool.ledger)
        return restored

    def drain_reward_pool(self, update_learner: bool = True) -> list[SingleAgentEpisode]:
        """Drain all EnvRunners; optionally train on the drained episodes once, so nothing scored is wasted."""
        algo: Any = self
        episodes = drain_env_runners(algo)
        if update_learner and episodes:
            algo.learner_group.update(
                episodes=episodes,
                timesteps={
                    NUM_ENV_STEPS_SAMPLED_LIFETIME: algo.metrics.peek(
                        (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0
                    )
                },
                num_epochs=algo.config.num_epochs,
                minibatch_size=algo.config.minibatch_size,
                shuffle_batch_per_epoch=algo.config.shuffle_batch_per_epoch,
            )
            # The drained episodes were sampled with the previous weights; the runners get the new ones.
            algo.env_runner_group.sync_weights(
                from_worker_or_learner_group=algo.learner_group, inference_only=True
            )
        return episodes

    def save_to_path(self, path: Any = None, *args: Any, settle: bool = True, **kwargs: Any) -> str:
        """RLlib's checkpoint plus the reward ledger (with the normaliser state).

        Args:
            settle: First drain the EnvRunners and train once on what they held, so the checkpoint has nothing
                pending (stage ends, shutdown, an audit). False saves without waiting for a scorer: the rolling
                checkpoint after every training iteration, which would otherwise wait at least one judge latency
                per iteration (sampling must never wait on slow scorers). The episodes still pending then go on
                settling in this run as usual; a run *resumed* from such a checkpoint drops them in the ledger with
                ``pending_at_restored_checkpoint`` (see :meth:`restore_from_path`).
        """
        if settle:
            self.drain_reward_pool(update_learner=True)
        out = super().save_to_path(path, *args, **kwargs)  # type: ignore[misc]
        if self._reward_pool is not None:
            self._reward_pool.save(Path(out) / REWARD_POOL_DIR)
        return out

    def restore_from_path(self, path: Any, *args: Any, **kwargs: Any) -> None:
        """RLlib's restore plus the reward ledger and normaliser. Episodes pending in the restored ledger (a
        checkpoint saved with ``settle=False``), and any the EnvRunners hold now, are dropped with the reason
        ``pending_at_restored_checkpoint``: the sampling that would have settled them is not part of the restored
        run, and nothing is imputed for them."""
        import ray

        super().restore_from_path(path, *args, **kwargs)  # type: ignore[misc]
        saved = Path(path) / REWARD_POOL_DIR
        if self._reward_pool is not None and saved.exists():
            self._reward_pool.restore(saved)
            algo: Any = self
            reason = REASON_PENDING_AT_RESTORED_CHECKPOINT
            algo.env_runner_group.foreach_env_runner(
                lambda er: er.abandon_pending(reason) if isinstance(er, RewardAwareEnvRunner) else None,
                local_env_runner=True,
            )
            ray.get(
                self._reward_pool.ledger.apply.remote(
                    f"restore-{uuid.uuid4().hex}", [{"kind": "abandon_pending", "reason": reason}], {}
                )
            )
            algo.env_runner_group.foreach_env_runner(
                lambda er: er.reload_normalizer() if isinstance(er, RewardAwareEnvRunner) else None,
                local_env_runner=True,
            )

    def stop(self) -> None:
        # No drain: episodes still waiting for scorers are recorded as pending at shutdown by the runners' stop().
        super().stop()  # type: ignore[misc]
        if self._reward_pool is not None:
            self._reward_pool.shutdown()
            self._reward_pool = None


class RewardPoolPPO(RewardPoolAlgorithmMixin, PPO):  # type: ignore[misc]
    """PPO whose EnvRunners settle layered rewards through an algorithm-owned reward pool."""
