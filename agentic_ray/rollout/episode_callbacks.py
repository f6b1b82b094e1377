"""RLlib callbacks that read the env's episode record: task metrics, the risk stream and root-cause labels.

Without a reward pool, the risk stream is the L3 risk layer's score of the episode record at episode end
(:class:`~agentic_ray.rewards.layers.risk_layer.RiskLayer` with its default settings: ``-w_i`` on each high-risk
step, and the delayed consequences of soft-mode shortcuts on the last step), so AAAC's risk critic learns from
the same signal as with the pool; with the pool, the pool's settled risk-stream layers overwrite it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback

from agentic_ray.eval.metrics import root_cause_index
from agentic_ray.keys import EPISODE_RECORD, METRIC_ENTITIES_PAST_CAP, RISK_REWARDS, ROOT_CAUSE
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.risk_layer import RiskLayer

_RISK_LAYER = RiskLayer()


def risk_stream(rec: EpisodeRecord) -> np.ndarray:
    """(T,) float32: the L3 risk layer's score (high-risk steps and delayed consequences; see ``RiskLayer``)."""
    return _RISK_LAYER.score(rec)


class AgenticEpisodeCallbacks(RLlibCallback):
    """Per-episode task metrics (``agentic/*``), the default risk stream and the root-cause label."""

    def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
        info = episode.get_infos(-1) if len(episode) else {}
        raw = info.get(EPISODE_RECORD) if isinstance(info, dict) else None
        if raw is None:
            return
        rec = EpisodeRecord.from_dict(raw)
        risk = risk_stream(rec)
        # The record covers the whole episode; `episode` may be its last chunk (WholeEpisodeEnvRunner joins them).
        if RISK_REWARDS not in episode.custom_data and len(risk) == episode.t_started + len(episode):
            episode.custom_data[RISK_REWARDS] = risk
        episode.custom_data[ROOT_CAUSE] = root_cause_index(rec)
        if metrics_logger is not None:
            n = max(1, len(rec.steps))
            metrics_logger.log_value("agentic/completion", float(rec.completed), window=100)
            metrics_logger.log_value("agentic/dag_valid", float(rec.dag_valid), window=100)
            metrics_logger.log_value("agentic/tcsr", sum(s.ok for s in rec.steps) / n, window=100)
            metrics_logger.log_value(
                "agentic/high_risk_share", sum(s.high_risk for s in rec.steps) / n, window=100
            )
            metrics_logger.log_value("agentic/steps", float(len(rec.steps)), window=100)
            metrics_logger.log_value(
                METRIC_ENTITIES_PAST_CAP, float(sum(rec.entities_past_cap.values())), window=100
            )


def _foreach_env(algo: Any, method: str, *args: Any) -> None:
    """Call ``AgentTaskEnv.<method>(*args)`` on every env of every EnvRunner (vectorised envs included)."""

    def _set(er: Any) -> None:
        env = getattr(er, "env", None)
        if env is None:
            return
        for e in getattr(env.unwrapped if hasattr(env, "unwrapped") else env, "envs", [env]):
            target = getattr(e, "unwrapped", e)
            if hasattr(target, method):
                getattr(target, method)(*args)

    algo.env_runner_group.foreach_env_runner(_set, local_env_runner=True)


def set_training_progress(algo: Any, progress: float) -> None:
    """Drive every env's error-injection schedule (``AgentTaskEnv.set_training_progress``) on all EnvRunners."""
    _foreach_env(algo, "set_training_progress", progress)


def set_caller_error_share(algo: Any, share: float) -> None:
    """Share of training episodes with an injected caller error (``AgentTaskEnv.set_caller_error_share``)."""
    _foreach_env(algo, "set_caller_error_share", share)
