"""An EnvRunner that settles every reward layer before an episode reaches the learner, without blocking on scorers.

``sample()`` runs the env as usual, submits every finished episode to the :class:`RewardPoolClient` (cheap layers
inline, slow layers to the Ray actor pool, no waiting), and returns only episodes whose layers are all settled,
carrying the others over to later calls. Returned episodes carry:

* rewards (``episode.get_rewards()``): the weighted sum of the normalised reward-stream layers, per step;
* ``custom_data[RISK_REWARDS]``: the weighted sum of the normalised risk-stream layers, ``np.ndarray (T,)``;
* ``custom_data[REWARD_VECTOR]`` / ``[REWARD_VECTOR_RAW]``: ``{layer: (T,)}`` normalised / raw values;
* ``custom_data[REWARD_PROVENANCE]``: ``{layer: {scorer, version, latency_s, attempts}}``;
* ``custom_data[POLICY_VERSION]``: the weights version that sampled the episode;
* ``custom_data[REWARD_LEDGER_ID]``: the episode's key in the ledger (learner connectors may rename ``id_``).

Held episodes are kept out of the return metrics until they settle. :meth:`drain` waits for everything pending
(call it through ``foreach_env_runner`` before a checkpoint or shutdown). In ``blocking`` and ``zero_latency``
modes every layer is computed inside ``env.step`` by :class:`BlockingRewardWrapper` (the baseline), and the
runner only reads the results back, so both modes produce the same rewards.

Requires ``batch_mode="complete_episodes"``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.annotations import override

from agentic_ray.keys import (
    EPISODE_RECORD,
    METRIC_REWARD_DROPPED,
    METRIC_REWARD_DUPLICATES,
    METRIC_REWARD_HELD,
    METRIC_REWARD_LAYER_NORM_PREFIX,
    METRIC_REWARD_LAYER_PREFIX,
    METRIC_REWARD_MISSING,
    METRIC_REWARD_PENDING,
    METRIC_REWARD_RESUBMITS,
    METRIC_REWARD_SETTLED,
    METRIC_REWARD_STALENESS,
    METRIC_REWARD_STALENESS_MAX,
    METRIC_REWARD_WAIT_S,
    POLICY_VERSION,
    REWARD_LEDGER_ID,
    REWARD_PROVENANCE,
    REWARD_RESULTS,
    REWARD_VECTOR,
    REWARD_VECTOR_RAW,
    RISK_REWARDS,
)
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers import LAYER_CLASSES, Granularity, Stream
from agentic_ray.rewards.reward_actor_pool import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_TIMEOUT,
    PendingEpisode,
    RewardPoolClient,
    ScoreResult,
    make_layers,
)
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig

logger = logging.getLogger(__name__)

#: AlgorithmConfig attribute holding ``RewardPoolConfig.model_dump()``.
CONFIG_ATTR_POOL = "reward_pool"
#: AlgorithmConfig attribute holding ``RewardActorPool.spec`` (actor names, judge URL).
CONFIG_ATTR_SPEC = "reward_pool_spec"


class BlockingRewardWrapper(gym.Wrapper):
    """Baseline: scores every layer synchronously inside ``step()`` of the episode's last step.

    The results (one :class:`ScoreResult` per layer, after up to ``retries`` extra attempts) go into the last
    step's ``info[REWARD_RESULTS]``; the env's own reward is passed through unchanged.

    Args:
        env: an env whose last step's info holds ``EPISODE_RECORD``.
        cfg: pool settings (layers, timeouts, retries).
        judge_url: the judge server (unused in ``zero_latency`` mode).
    """

    def __init__(self, env: gym.Env, cfg: RewardPoolConfig, judge_url: str | None) -> None:
        super().__init__(env)
        self.cfg = cfg
        self.layers = make_layers(cfg, judge_url)

    def score_record(self, record: EpisodeRecord) -> list[ScoreResult]:
        """All layers of one record, blocking, with retries."""
        out = []
        for name, layer in self.layers.items():
            retries = self.cfg.layers[name].retries
            for attempt in range(1, retries + 2):
                t0 = time.perf_counter()
                try:
                    v = np.asarray(layer.score(record), dtype=np.float32)
                    r = ScoreResult(
                        record.episode_id,
                        name,
                        STATUS_OK,
                        v,
                        layer.scorer_name,
                        layer.scorer_version,
                        time.perf_counter() - t0,
                        attempt,
                    )
                except Exception as e:
                    status = STATUS_TIMEOUT if "Timeout" in type(e).__name__ else STATUS_ERROR
                    r = ScoreResult(
                        record.episode_id,
                        name,
                        status,
                        None,
                        layer.scorer_name,
                        layer.scorer_version,
                        time.perf_counter() - t0,
                        attempt,
                        repr(e),
                    )
                if r.status == STATUS_OK:
                    break
            out.append(r)
        return out

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if (terminated or truncated) and EPISODE_RECORD in info:
            rec = info[EPISODE_RECORD]
            rec = rec if isinstance(rec, EpisodeRecord) else EpisodeRecord.from_dict(rec)
            info = {**info, REWARD_RESULTS: self.score_record(rec)}
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        for layer in self.layers.values():
            layer.close()
        super().close()


def reward_pool_config_from(config: Any) -> RewardPoolConfig:
    """The validated :class:`RewardPoolConfig` stored on an AlgorithmConfig (defaults if none)."""
    raw = getattr(config, CONFIG_ATTR_POOL, None)
    if isinstance(raw, RewardPoolConfig):
        return raw
    return RewardPoolConfig.model_validate(raw or {})


class RewardAwareEnvRunner(SingleAgentEnvRunner):
    """A ``SingleAgentEnvRunner`` that settles layered rewards through the :class:`RewardActorPool`."""

    @override(SingleAgentEnvRunner)
    def __init__(self, *, config: Any, **kwargs: Any) -> None:
        if config.batch_mode != "complete_episodes":
            raise ValueError(
                "RewardAwareEnvRunner needs config.env_runners(batch_mode='complete_episodes'): reward layers "
                "score whole episodes"
            )
        self._reward_cfg = reward_pool_config_from(config)
        self._reward_spec: dict[str, Any] | None = getattr(config, CONFIG_ATTR_SPEC, None)
        if self._reward_spec is None:
            raise ValueError(
                f"config.{CONFIG_ATTR_SPEC} is not set: create a RewardActorPool and call wire_reward_pool(), or use "
                "RewardPoolAlgorithmMixin which creates it in setup()"
            )
        self._reward_client: RewardPoolClient | None = None
        self._reward_passthrough = bool(config.in_evaluation and self._reward_cfg.evaluation == "skip")
        self._reward_counters_logged: Counter[str] = Counter()
        self._reward_wait_s_total = 0.0
        self._layer_weights: dict[str, float] = {}  # run-time overrides (set_layer_weight)
        self.reward_staleness: list[int] = []
        super().__init__(config=config, **kwargs)

    # --- env ----------------------------------------------------------------------------------------------
    @override(SingleAgentEnvRunner)
    def make_env(self) -> None:
        super().make_env()
        if self._reward_cfg.mode == "async" or self._reward_passthrough or self.env is None:
            return
        assert self._reward_spec is not None
        vec = self.env.env  # type: ignore[attr-defined]  # DictInfoToList(SyncVectorEnv)
        if not isinstance(vec, gym.vector.SyncVectorEnv):
            raise ValueError(
                f"mode {self._reward_cfg.mode!r} wraps sub-envs and needs gym_env_vectorize_mode='SYNC'"
            )
        vec.envs = [
            BlockingRewardWrapper(e, self._reward_cfg, self._reward_spec["judge_url"]) for e in vec.envs
        ]

    # --- pool ---------------------------------------------------------------------------------------------
    @property
    def reward_client(self) -> RewardPoolClient:
        """The runner-side pool client (created on first use; looks the actors up by name)."""
        if self._reward_client is None:
            assert self._reward_spec is not None
            self._reward_client = RewardPoolClient(
                self._reward_cfg, self._reward_spec, runner_id=f"w{self.worker_index}-{uuid.uuid4().hex[:6]}"
            )
        return self._reward_client

    @override(SingleAgentEnvRunner)
    def sample(self, **kwargs: Any) -> list[SingleAgentEpisode]:
        episodes = super().sample(**kwargs)
        if self._reward_passthrough:
            return episodes
        client = self.reward_client
        version = int(self._weights_seq_no)
        submitted = set()
        for ep in episodes:
            if not ep.is_done:
                raise RuntimeError(
                    "RewardAwareEnvRunner got an unfinished episode chunk; use complete_episodes"
                )
            info = ep.get_infos(-1)
            if EPISODE_RECORD not in info:
                raise KeyError(f"the last info of episode {ep.id_} has no {EPISODE_RECORD!r}")
            rec = info[EPISODE_RECORD]
            rec = rec if isinstance(rec, EpisodeRecord) else EpisodeRecord.from_dict(rec)
            if rec.num_steps != len(ep):
                raise ValueError(f"episode record has {rec.num_steps} steps but the episode has {len(ep)}")
            client.submit(ep.id_, rec, payload=ep, policy_version=version, prescored=info.get(REWARD_RESULTS))
            submitted.add(id(ep))
        # Unscored episodes must not enter episode_return_* metrics; they are added back once settled.
        self._done_episodes_for_metrics = [
            e for e in self._done_episodes_for_metrics if id(e) not in submitted
        ]
        if self.config.in_evaluation:
            settled, _ = client.drain()
            waited = 0.0
        else:
            settled, _ = client.poll(0.0)
            waited, more, _ = client.wait_below(self._reward_cfg.max_pending_episodes)
            settled += more
        self._reward_wait_s_total += waited
        out = self._finalize(settled)
        client.flush_ledger()
        self._log_reward_metrics(waited)
        return out

    def set_layer_weight(self, layer: str, weight: float) -> None:
        """Change one layer's weight from now on (the reflection stage ramps L5 from 0.1 to 0.2)."""
        if layer not in LAYER_CLASSES:
            raise KeyError(f"unknown reward layer {layer!r}")
        self._layer_weights[layer] = float(weight)

    def _finalize(self, settled: list[PendingEpisode]) -> list[SingleAgentEpisode]:
        """Write normalised, weighted rewards and side channels into the settled episodes."""
        client = self.reward_client
        cfg = self._reward_cfg
        version = int(self._weights_seq_no)
        out = []
        for p in settled:
            ep: SingleAgentEpisode = p.payload
            t = len(ep)
            raw = {n: p.results[n].values for n in p.layers}
            norm: dict[str, np.ndarray] = {}
            for n, v in raw.items():
                assert v is not None
                if LAYER_CLASSES[n].granularity is Granularity.STEP:
                    norm[n] = client.normalizer.normalize(n, v)
                else:
                    z = np.zeros(t, dtype=np.float32)
                    z[-1] = client.normalizer.normalize(n, v[-1:])[0]
                    norm[n] = z
            reward = np.zeros(t, dtype=np.float64)
            risk = np.zeros(t, dtype=np.float64)
            for n, v in norm.items():
                target = risk if LAYER_CLASSES[n].stream is Stream.RISK else reward
                target += self._layer_weights.get(n, cfg.weight(n)) * v
                self.metrics.log_value(
                    METRIC_REWARD_LAYER_PREFIX + n,
                    float(np.sum(np.asarray(raw[n], dtype=np.float64))),
                    window=100,
                )
                self.metrics.log_value(
                    METRIC_REWARD_LAYER_NORM_PREFIX + n, float(np.sum(v, dtype=np.float64)), window=100
                )
            old = np.asarray(ep.get_rewards())
            dtype = old.dtype if old.dtype.kind == "f" else np.dtype(np.float32)
            space = ep.rewards.space
            if ep.is_numpy and space is not None:
                # One 0-d array of the reward space's dtype per index: a finalized episode checks each written
                # value with that space's Box.contains, which expects an ndarray; a whole-array write hands it
                # numpy scalars (a gymnasium "Casting input x to numpy array" warning per episode).
                ep.set_rewards(
                    new_data=[np.asarray(x, dtype=space.dtype) for x in reward], at_indices=list(range(t))
                )
            else:
                ep.set_rewards(new_data=reward.astype(dtype))
            ep.custom_data[RISK_REWARDS] = risk.astype(np.float32)
            ep.custom_data[REWARD_VECTOR] = norm
            ep.custom_data[REWARD_VECTOR_RAW] = raw
            ep.custom_data[REWARD_PROVENANCE] = {
                n: {
                    "scorer": r.scorer,
                    "version": r.version,
                    "latency_s": r.latency_s,
                    "attempts": p.failures.get(n, 0) + 1,
                }
                for n, r in p.results.items()
            }
            ep.custom_data[POLICY_VERSION] = p.policy_version
            ep.custom_data[REWARD_LEDGER_ID] = p.episode_id
            self.reward_staleness.append(version - p.policy_version)
            client.mark_consumed(ep.id_, version)
            self._done_episodes_for_metrics.append(ep)
            out.append(ep)
        return out

    def _log_reward_metrics(self, waited_s: float) -> None:
        client = self.reward_client
        c = client.counters
        self.metrics.log_value(METRIC_REWARD_PENDING, client.num_pending, window=1)
        self.metrics.log_value(METRIC_REWARD_WAIT_S, waited_s, reduce="sum")
        for key, counter in (
            (METRIC_REWARD_SETTLED, "settled"),
            (METRIC_REWARD_MISSING, "missing"),
            (METRIC_REWARD_DROPPED, "dropped"),
            (METRIC_REWARD_HELD, "held"),
            (METRIC_REWARD_DUPLICATES, "duplicates"),
            (METRIC_REWARD_RESUBMITS, "resubmits"),
        ):
            delta = c[counter] - self._reward_counters_logged[counter]
            self._reward_counters_logged[counter] = c[counter]
            self.metrics.log_value(key, delta, reduce="sum")
        if self.reward_staleness:
            recent = self.reward_staleness[-1000:]
            self.metrics.log_value(METRIC_REWARD_STALENESS, float(np.mean(recent)), window=1)
            self.metrics.log_value(METRIC_REWARD_STALENESS_MAX, float(np.max(recent)), window=1)
            self.reward_staleness = recent

    # --- drain / shutdown ---------------------------------------------------------------------------------
    def drain(self, timeout_s: float | None = None) -> list[SingleAgentEpisode]:
        """Wait for every pending episode to settle (or be dropped) and return the settled ones.

        Call before a checkpoint or shutdown, e.g. ``algo.env_runner_group.foreach_env_runner(lambda er:
        er.drain())``, and hand the result to the learner. Pending episodes die with their EnvRunner otherwise.
        """
        if self._reward_client is None or self._reward_passthrough:
            return []
        client = self._reward_client
        settled, _ = client.drain(timeout_s)
        out = self._finalize(settled)
        if client.num_pending:
            logger.warning("drain timed out with %d episodes still pending", client.num_pending)
        client.flush_ledger(force=True, wait=True)
        self._log_reward_metrics(0.0)
        return out

    def reward_pool_stats(self) -> dict[str, Any]:
        """Counters of the client (submitted, settled, missing, dropped, retries, ...) and reasons."""
        if self._reward_client is None:
            return {}
        return {
            "counters": dict(self._reward_client.counters),
            "reasons": dict(self._reward_client.reasons),
            "pending": self._reward_client.num_pending,
            "wait_s": self._reward_wait_s_total,
        }

    @override(SingleAgentEnvRunner)
    def stop(self) -> None:
        if self._reward_client is not None:
            try:
                client = self._reward_client
                settled, _ = client.drain()
                for p in settled:
                    # Settled, but no learner will ever see it: recorded as dropped, not silently lost.
                    client.mark_dropped(p.episode_id, "shutdown_unconsumed")
                client.flush_ledger(force=True, wait=True)
            except Exception as e:  # the pool may already be gone at interpreter shutdown
                logger.warning("could not drain the reward pool on stop: %r", e)
        super().stop()
