"""Re-scoring served episodes with the training run's reward layers, through the reward pool's own code.

The same pieces a training run's EnvRunner uses, without Ray: :class:`~agentic_ray.rewards.reward_client_state.
RewardClientState` scores the cheap layers inline, settles every layer exactly once and keeps the normaliser;
the slow layers are scored by :class:`~agentic_ray.rewards.layer_group_scorer.LayerGroupScorer` (the plain
scorer the pool's actors wrap) and handed in as prescored results; :func:`~agentic_ray.rewards.reward_vector.
combine_layers` normalises and weights them into the reward and risk streams, which are sealed; every event
goes to a :class:`~agentic_ray.rewards.reward_ledger.RewardLedger` (``RUN_DIR/refine/ledger.sqlite``), so
``ledger_audit`` can check what the refiner scored as it checks a run.

Without a judge URL the judge layer is the in-process rubric (the pool's ``zero_latency`` mode).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layer_group_scorer import LayerGroupScorer, make_layers
from agentic_ray.rewards.layers import CostClass
from agentic_ray.rewards.reward_client_state import RewardClientState
from agentic_ray.rewards.reward_ledger import RewardLedger
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig, layers_for_context
from agentic_ray.rewards.reward_vector import combine_layers
from agentic_ray.rewards.score_messages import ScoreRequest, ScoreResult

__all__ = ["EpisodeRescorer", "Rescored", "pool_config_for"]


@dataclass(frozen=True)
class Rescored:
    """One re-scored episode.

    Attributes:
        episode_id: the key it was scored under.
        reward: ``(T,)`` float32, the normalised, weighted reward stream.
        risk: ``(T,)`` float32, the risk stream.
        layers: layer -> raw sum.
        checksum: the sealed checksum (as in the ledger).
    """

    episode_id: str
    reward: np.ndarray
    risk: np.ndarray
    layers: dict[str, float]
    checksum: str

    @property
    def value(self) -> float:
        """The episode's re-scored return: reward stream plus risk stream (the risk layers are penalties)."""
        return float(np.sum(self.reward, dtype=np.float64) + np.sum(self.risk, dtype=np.float64))


def pool_config_for(cfg: RewardPoolConfig | None, domain: str, judge_url: str | None) -> RewardPoolConfig:
    """The pool settings to re-score with: ``cfg`` (default: the pool's defaults) restricted to the layers the
    domain feeds, in ``zero_latency`` mode when no judge URL is known."""
    from agentic_ray.domains import get_domain

    base = cfg if cfg is not None else RewardPoolConfig()
    if judge_url is None:
        base = base.model_copy(update={"mode": "zero_latency"})
    d = get_domain(domain)
    return layers_for_context(base, d.reward_context_keys, d.name)


class EpisodeRescorer:
    """Scores finished episodes with the pool's layers and writes the ledger (see the module docstring).

    Args:
        cfg: the pool settings (:func:`pool_config_for`).
        ledger_path: the ledger file.
        judge_url: the judge service (None: in-process rubric; ``cfg.mode`` must then be ``zero_latency``).
    """

    def __init__(self, cfg: RewardPoolConfig, ledger_path: str | Path, judge_url: str | None = None) -> None:
        self.cfg = cfg
        self.state = RewardClientState(cfg, make_layers(cfg, judge_url, [CostClass.SYNC]), runner_id="refine")
        slow = make_layers(cfg, judge_url, [CostClass.ASYNC_CPU, CostClass.ASYNC_IO])
        self.scorer = LayerGroupScorer(
            slow, {n: cfg.layers[n].timeout_s for n in slow}, {n: cfg.layers[n].retries for n in slow}
        )
        self.ledger = RewardLedger(ledger_path)
        self.weights = {n: cfg.weight(n) for n in cfg.enabled_layers()}

    def score(self, episodes: Sequence[tuple[str, EpisodeRecord]]) -> dict[str, Rescored]:
        """Score ``(key, record)`` pairs; returns the settled ones by key (an episode a layer failed on is
        dropped by the pool's missing policy and absent here)."""
        reqs = [ScoreRequest(k, n, rec) for k, rec in episodes for n in self.scorer.layers]
        prescored: dict[str, list[ScoreResult]] = {k: [] for k, _ in episodes}
        for r in self.scorer.score(reqs):
            prescored[r.episode_id].append(r)
        for k, rec in episodes:
            self.state.submit(k, rec, prescored=prescored[k])
        self.state.resolve_missing()
        out = {}
        for p in self.state.collect_settled():
            raw = {n: p.results[n].values for n in p.layers}
            reward, risk, _norm = combine_layers(raw, self.state.normalizer, self.weights, p.record.num_steps)  # type: ignore[arg-type]
            checksum = self.state.seal(p, reward, risk)
            sums = {n: float(np.sum(np.asarray(v, dtype=np.float64))) for n, v in raw.items()}
            out[p.episode_id] = Rescored(p.episode_id, reward, risk, sums, checksum)
        self.state.abandon_all("refine: not settled in one pass")
        events, _deltas = self.state.take_flush(uuid.uuid4().hex)
        self.ledger.apply(uuid.uuid4().hex, events)
        return out

    def close(self) -> None:
        self.ledger.close()
