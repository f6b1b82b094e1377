"""An EnvRunner that settles every reward layer before an episode reaches the learner, without blocking on scorers.

``sample()`` runs the env as usual, submits every finished episode to the :class:`RewardPoolClient` (cheap layers
inline, slow layers to the Ray actor pool, no waiting), and returns only episodes whose layers are all settled,
carrying the others over to later calls. Returned episodes carry:

* rewards (``episode.get_rewards()``): the weighted sum of the normalised reward-stream layers, per step;
* ``custom_data[RISK_REWARDS]``: the weighted sum of the normalised risk-stream layers, ``np.ndarray (T,)``;
* ``custom_data[REWARD_SEAL]``: ``{"checksum", "num_steps"}`` of exactly those two streams, also written to the
  ledger, so the learner side can prove what it trained on;
* ``custom_data[REWARD_VECTOR]`` / ``[REWARD_VECTOR_RAW]``: ``{layer: (T,)}`` normalised / raw values;
* ``custom_data[REWARD_PROVENANCE]``: ``{layer: {scorer, version, latency_s, attempts}}``;
* ``custom_data[POLICY_VERSION]``: the weights version that sampled the episode;
* ``custom_data[REWARD_LEDGER_ID]``: the episode's key in the ledger (learner connectors may rename ``id_``).

Each ``sample()`` ends with one ledger write (submissions, settlements, seals) that it waits for, bounded by
``ledger_flush_timeout_s``. Held episodes are kept out of the return metrics until they settle. :meth:`drain` waits
for everything pending (the algorithm calls it before a checkpoint). :meth:`stop` does not drain: it records what
is still waiting for a scorer as pending at shutdown. Modes: ``async`` (the default), ``blocking`` (the same
actors and batching, but every ``sample()`` waits for its episodes: the benchmark's baseline) and
``zero_latency`` (every layer scored inside ``env.step`` by :class:`BlockingRewardWrapper`, the judge rubric
in-process: what rewards cost when scorers are free).

Requires ``batch_mode="complete_episodes"``. Sampling is :class:`WholeEpisodeEnvRunner`'s: every episode that ends in a
``sample()`` call is submitted whole, also one begun in an earlier call (RLlib's own complete-episodes sampling
resets every sub-env per call and throws the running episodes away, which biased the batch toward short episodes).
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
    METRIC_REWARD_CANCELLED,
    METRIC_REWARD_DROPPED,
    METRIC_REWARD_DUPLICATES,
    METRIC_REWARD_HELD,
    METRIC_REWARD_LAYER_NORM_PREFIX,
    METRIC_REWARD_LAYER_PREFIX,
    METRIC_REWARD_MISSING,
    METRIC_REWARD_PENDING,
    METRIC_REWARD_SETTLED,
    METRIC_REWARD_STALENESS,
    METRIC_REWARD_STALENESS_MAX,
    METRIC_REWARD_WAIT_S,
    POLICY_VERSION,
    REWARD_LEDGER_ID,
    REWARD_PROVENANCE,
    REWARD_RESULTS,
    REWARD_SEAL,
    REWARD_VECTOR,
    REWARD_VECTOR_RAW,
    RISK_REWARDS,
)
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layer_group_scorer import make_layers, score_inline
from agentic_ray.rewards.layers import LAYER_CLASSES
from agentic_ray.rewards.reward_client_state import PendingEpisode
from agentic_ray.rewards.reward_pool_client import RewardPoolClient
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig
from agentic_ray.rewards.reward_vector import combine_layers
from agentic_ray.rewards.score_messages import STATUS_OK, ScoreResult
from agentic_ray.rollout.whole_episode_env_runner import WholeEpisodeEnvRunner

logger = logging.getLogger(__name__)

#: AlgorithmConfig attribute holding ``RewardPoolConfig.model_dump()``.
CONFIG_ATTR_POOL = "reward_pool"
#: AlgorithmConfig attribute holding ``RewardActorPool.spec`` (actor names, judge URL).
CONFIG_ATTR_SPEC = "reward_pool_spec"
#: EnvRunner state key of the run-time layer weights (set_layer_weight).
STATE_LAYER_WEIGHTS = "reward_layer_weights"
#: Ledger reason of settled evaluation episodes (they are scored like training ones but never trained on).
REASON_EVALUATION = "evaluation_only"


class BlockingRewardWrapper(gym.Wrapper):
    """``zero_latency`` mode: scores every layer inside ``step()`` of the episode's last step.

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
            for attempt in range(1, self.cfg.layers[name].retries + 2):
                r = score_inline(layer, name, record.episode_id, record, attempt)
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


class RewardAwareEnvRunner(WholeEpisodeEnvRunner):
    """A ``WholeEpisodeEnvRunner`` that settles layered rewards through the :class:`RewardActorPool`."""

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
        # One id per incarnation: a restarted actor gets a new one, so the driver can tell the ledger which died.
        self.reward_runner_id = f"w{self.worker_index}-{uuid.uuid4().hex[:8]}"

    # --- env ----------------------------------------------------------------------------------------------
    @override(SingleAgentEnvRunner)
    def make_env(self) -> None:
        super().make_env()
        if self._reward_cfg.mode != "zero_latency" or self._reward_passthrough or self.env is None:
            return
        assert self._reward_spec is not None
        vec = self.env.env  # type: ignore[attr-defined]  # DictInfoToList(SyncVectorEnv)
        if not isinstance(vec, gym.vector.SyncVectorEnv):
            raise ValueError("mode 'zero_latency' wraps sub-envs and needs gym_env_vectorize_mode='SYNC'")
        vec.envs = [
            BlockingRewardWrapper(e, self._reward_cfg, self._reward_spec["judge_url"]) for e in vec.envs
        ]

    @override(SingleAgentEnvRunner)
    def get_state(
        self, components: Any = None, *, not_components: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        state = super().get_state(components, not_components=not_components, **kwargs)
        # Carried to EnvRunners that RLlib restarts (it syncs them from the local runner's state).
        state[STATE_LAYER_WEIGHTS] = dict(self._layer_weights)
        return state

    @override(SingleAgentEnvRunner)
    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        if STATE_LAYER_WEIGHTS in state:
            self._layer_weights = dict(state[STATE_LAYER_WEIGHTS])

    # --- pool ---------------------------------------------------------------------------------------------
    @property
    def reward_client(self) -> RewardPoolClient:
        """The runner-side pool client (created on first use; looks the actors up by name)."""
        if self._reward_client is None:
            assert self._reward_spec is not None
            self._reward_client = RewardPoolClient(self._reward_cfg, self._reward_spec, self.reward_runner_id)
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
            submitted.add(ep.id_)
        # Unscored episodes must not enter episode_return_* metrics; they are added back, whole, once settled. An
        # episode that spans sample() calls left its earlier chunks in RLlib's per-id metrics cache, which would add
        # their (unscored) returns to the whole episode's: they go too.
        self._done_episodes_for_metrics = [
            e for e in self._done_episodes_for_metrics if e.id_ not in submitted
        ]
        for eid in submitted:
            self._ongoing_episodes_for_metrics.pop(eid, None)
        waited = 0.0
        if self.config.in_evaluation or self._reward_cfg.mode == "blocking":
            t0 = time.perf_counter()
            settled, _ = client.drain()
            if self._reward_cfg.mode == "blocking":
                waited = time.perf_counter() - t0
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
        """Write normalised, weighted rewards and side channels into the settled episodes, and seal them."""
        client = self.reward_client
        cfg = self._reward_cfg
        version = int(self._weights_seq_no)
        out = []
        for p in settled:
            ep: SingleAgentEpisode = p.payload
            t = len(ep)
            raw = {n: p.results[n].values for n in p.layers}
            weights = {n: self._layer_weights.get(n, cfg.weight(n)) for n in p.layers}
            reward, risk, norm = combine_layers(raw, client.normalizer, weights, t)  # type: ignore[arg-type]
            for n, v in raw.items():
                self.metrics.log_value(
                    METRIC_REWARD_LAYER_PREFIX + n, float(np.sum(np.asarray(v, dtype=np.float64))), window=100
                )
                self.metrics.log_value(
                    METRIC_REWARD_LAYER_NORM_PREFIX + n, float(np.sum(norm[n], dtype=np.float64)), window=100
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
                    "attempts": p.attempts.get(n, 1),
                }
                for n, r in p.results.items()
            }
            ep.custom_data[POLICY_VERSION] = p.policy_version
            ep.custom_data[REWARD_LEDGER_ID] = p.episode_id
            if self.config.in_evaluation:  # scored like training episodes, never trained on
                client.state.release(p, REASON_EVALUATION)
            else:
                ep.custom_data[REWARD_SEAL] = {"checksum": client.seal(p, reward, risk), "num_steps": t}
            self.reward_staleness.append(version - p.policy_version)
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
            (METRIC_REWARD_CANCELLED, "cancelled_calls"),
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
        """Wait for every pending episode to settle (or be dropped) and return the settled, sealed ones.

        The algorithm calls it before a checkpoint and trains on the result, e.g.
        ``algo.env_runner_group.foreach_env_runner(lambda er: er.drain())``.
        """
        if self._reward_client is None or self._reward_passthrough:
            return []
        client = self._reward_client
        settled, _ = client.drain(timeout_s)
        out = self._finalize(settled)
        if client.num_pending:
            logger.warning("drain timed out with %d episodes still pending", client.num_pending)
        client.flush_ledger()
        self._log_reward_metrics(0.0)
        return out

    def abandon_pending(self, reason: str) -> int:
        """Drop every episode still waiting for a scorer, with ``reason`` (the algorithm calls it when it restores a
        checkpoint: those episodes belong to the timeline the restored run leaves); returns how many."""
        if self._reward_client is None or self._reward_passthrough:
            return 0
        n = self._reward_client.state.abandon_all(reason)
        self._reward_client.flush_ledger()
        return n

    def reload_normalizer(self) -> None:
        """Adopt the ledger's normaliser state (the algorithm calls it after restoring a checkpoint)."""
        if self._reward_client is not None:
            self._reward_client.reload_normalizer()

    def reward_pool_stats(self) -> dict[str, Any]:
        """Counters of the client (submitted, settled, missing, dropped, cancelled calls, ...) and reasons."""
        if self._reward_client is None:
            return {}
        return {
            "counters": dict(self._reward_client.counters),
            "reasons": dict(self._reward_client.reasons),
            "pending": self._reward_client.num_pending,
            "wait_s": self._reward_wait_s_total,
            "runner_id": self.reward_runner_id,
        }

    @override(SingleAgentEnvRunner)
    def stop(self) -> None:
        if self._reward_client is not None:
            try:
                # No drain: waiting for scorers at shutdown would only turn pending episodes into ones that
                # no learner trains on. What is still waiting is recorded as pending at shutdown.
                self._reward_client.state.mark_pending_at_shutdown()
                self._reward_client.flush_ledger()
            except Exception as e:  # the pool may already be gone at interpreter shutdown
                logger.warning("could not record pending rewards on stop: %r", e)
        super().stop()
