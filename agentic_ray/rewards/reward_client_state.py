"""The reward client's state machine: which (episode, layer) is waiting, settled, missing, held or dropped. No Ray.

:class:`RewardClientState` is everything the runner-side client decides, as plain data and a clock: submitting an
episode scores its cheap layers inline and queues requests for the slow ones; results settle layers exactly once
(later copies are counted duplicates); a layer that comes back failed (after the scorer spent its retries), or
whose call was lost or cancelled at its deadline, goes to the missing policy (``drop`` the episode with a reason,
or ``hold`` it and ask again after ``hold_retry_s``, at most ``max_hold_rounds`` times); nothing is ever turned
into a 0. Settled episodes update the normaliser statistics; pending and dropped ones never do.

It also buffers the ledger events the client sends, and keeps the local normaliser equal to the last central state
the ledger returned plus the statistics it has not acknowledged yet. :class:`RewardPoolClient` is the Ray transport
around it; the unit tests drive this class with an injected clock.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layer_group_scorer import score_inline
from agentic_ray.rewards.layers import LAYER_CLASSES, CostClass, Granularity, RewardLayer
from agentic_ray.rewards.normalization import RewardNormalizer, RunningMeanStd
from agentic_ray.rewards.reward_ledger import MISSING, OK, SOURCE_ACTOR, SOURCE_INLINE
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig
from agentic_ray.rewards.score_messages import (
    STATUS_ERROR,
    STATUS_OK,
    ScoreRequest,
    ScoreResult,
    values_checksum,
)

NormDeltas = dict[str, tuple[int, float, float]]


@dataclass
class PendingEpisode:
    """An episode waiting for its layers. ``payload`` is whatever the caller wants back (the RLlib episode)."""

    episode_id: str
    record: EpisodeRecord
    layers: list[str]
    payload: Any
    policy_version: int
    submitted_at: float
    results: dict[str, ScoreResult] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    inflight: set[str] = field(default_factory=set)
    missing: dict[str, str] = field(default_factory=dict)
    hold_rounds: int = 0
    held_until: float | None = None
    drop_reason: str = ""

    @property
    def settled(self) -> bool:
        return all(layer in self.results for layer in self.layers)


def group_of_layer(name: str) -> str | None:
    """``"cpu"`` / ``"io"`` for layers scored by an actor group, None for layers scored inline."""
    cost = LAYER_CLASSES[name].cost
    if cost is CostClass.SYNC:
        return None
    return "cpu" if cost is CostClass.ASYNC_CPU else "io"


class RewardClientState:
    """Ray-free bookkeeping of one runner's (episode, layer) work. Not thread-safe.

    Args:
        cfg: pool settings (layers, missing policy, hold timing, normalisation).
        sync_layers: the cheap layers, scored inline at submission.
        runner_id: written to the ledger with each episode.
        clock: time source (seconds); tests inject a fake one.
    """

    def __init__(
        self,
        cfg: RewardPoolConfig,
        sync_layers: dict[str, RewardLayer],
        runner_id: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.sync_layers = sync_layers
        self.runner_id = runner_id
        self.clock = clock
        self.layers = cfg.enabled_layers()
        self.group_of = {n: g for n in self.layers if (g := group_of_layer(n)) is not None}
        self._ship_args = any(LAYER_CLASSES[n].needs_step_args for n in self.group_of)
        self.normalizer = RewardNormalizer(
            {n: cfg.normalize_mode(n) for n in self.layers}, clip=cfg.normalize_clip
        )
        self._unsent = {n: RunningMeanStd() for n in self.layers}
        self._unacked: list[tuple[str, NormDeltas]] = []
        self._episodes: dict[str, PendingEpisode] = {}
        self._outbox: dict[str, list[ScoreRequest]] = defaultdict(list)
        self._wire_cache: dict[str, EpisodeRecord] = {}
        self._events: list[dict[str, Any]] = []
        self.counters: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()

    # --- submission ---------------------------------------------------------------------------------------
    @property
    def num_pending(self) -> int:
        """Episodes submitted but neither settled nor dropped."""
        return len(self._episodes)

    def pending(self) -> list[PendingEpisode]:
        return list(self._episodes.values())

    def submit(
        self,
        episode_id: str,
        record: EpisodeRecord,
        payload: Any = None,
        policy_version: int = 0,
        prescored: Sequence[ScoreResult] | None = None,
    ) -> PendingEpisode:
        """Register a finished episode: prescored layers settle, cheap layers are scored now, slow ones queued.

        Args:
            episode_id: unique key (the RLlib episode id).
            record: the episode summary.
            payload: returned with the settled episode.
            policy_version: policy version that sampled the episode (for staleness).
            prescored: results computed elsewhere (``zero_latency`` mode: inside env.step).

        Raises:
            ValueError: duplicate episode id or an empty episode.
        """
        if episode_id in self._episodes:
            raise ValueError(f"episode {episode_id} submitted twice")
        if record.num_steps == 0:
            raise ValueError(f"episode {episode_id} has no steps")
        p = PendingEpisode(episode_id, record, list(self.layers), payload, policy_version, self.clock())
        self._episodes[episode_id] = p
        self.counters["submitted"] += 1
        self._events.append(
            {
                "kind": "submitted",
                "episode_id": episode_id,
                "env_episode_id": record.episode_id,
                "layers": p.layers,
                "runner": self.runner_id,
                "policy_version": policy_version,
                "t": p.submitted_at,
            }
        )
        for r in prescored or ():  # keyed by the env's episode id where they were scored
            self.on_result(dataclasses.replace(r, episode_id=episode_id), source=SOURCE_INLINE)
        for name in self.sync_layers:
            if name not in p.results and name not in p.missing:
                self.on_result(self._score_inline(p, name), source=SOURCE_INLINE)
        for name in p.layers:
            if name in p.results or name in p.missing or name in p.inflight:
                continue
            if name in self.group_of and self.cfg.mode != "zero_latency":
                self._queue(p, name)
            else:
                self.on_result(
                    ScoreResult(
                        episode_id,
                        name,
                        STATUS_ERROR,
                        None,
                        "",
                        "",
                        0.0,
                        1,
                        f"mode {self.cfg.mode}: not prescored",
                    ),
                    source=SOURCE_INLINE,
                )
        return p

    def _score_inline(self, p: PendingEpisode, name: str) -> ScoreResult:
        # A cheap layer that raises is a scorer bug: the failure is recorded, never imputed.
        return score_inline(self.sync_layers[name], name, p.episode_id, p.record, p.attempts.get(name, 0) + 1)

    def wire_record(self, p: PendingEpisode) -> EpisodeRecord:
        """The record as shipped to actors: without step arguments unless an async layer reads them."""
        if self._ship_args:
            return p.record
        if p.episode_id not in self._wire_cache:
            r = p.record
            self._wire_cache[p.episode_id] = dataclasses.replace(
                r, steps=[dataclasses.replace(st, args={}) for st in r.steps]
            )
        return self._wire_cache[p.episode_id]

    def _queue(self, p: PendingEpisode, layer: str) -> None:
        p.inflight.add(layer)
        attempt = p.attempts.get(layer, 0) + 1
        self._outbox[self.group_of[layer]].append(
            ScoreRequest(p.episode_id, layer, self.wire_record(p), attempt)
        )

    def take_requests(self) -> dict[str, list[ScoreRequest]]:
        """The queued requests by actor group (cleared)."""
        out = {g: reqs for g, reqs in self._outbox.items() if reqs}
        self._outbox = defaultdict(list)
        return out

    @property
    def num_queued(self) -> int:
        return sum(len(v) for v in self._outbox.values())

    # --- results ------------------------------------------------------------------------------------------
    def on_result(self, r: ScoreResult, source: str = SOURCE_ACTOR) -> None:
        """Handle one result: settle an ``ok`` layer exactly once; send a failed one to the missing policy."""
        p = self._episodes.get(r.episode_id)
        if p is None:  # settled or dropped already
            if r.status == STATUS_OK:
                self.counters["late_results"] += 1
            return
        if r.layer in p.results:
            if r.status == STATUS_OK:
                self.counters["duplicates"] += 1
                self._events.append({"kind": "duplicate", "episode_id": p.episode_id, "layer": r.layer})
            return
        p.inflight.discard(r.layer)
        p.attempts[r.layer] = max(p.attempts.get(r.layer, 0), r.attempt)
        if r.status == STATUS_OK:
            self._accept(p, r, source)
            return
        p.missing[r.layer] = r.status
        self.counters["missing"] += 1
        self.counters[f"failed_{r.status}"] += 1
        self.reasons[f"missing:{r.layer}:{r.status}"] += 1

    def _accept(self, p: PendingEpisode, r: ScoreResult, source: str) -> None:
        assert r.values is not None
        if r.values.shape != (p.record.num_steps,):
            raise ValueError(
                f"{r.layer}: values of shape {r.values.shape} for a {p.record.num_steps}-step episode"
            )
        p.results[r.layer] = r
        p.sources[r.layer] = source
        p.missing.pop(r.layer, None)
        self._events.append(
            {
                "kind": "settled",
                "episode_id": p.episode_id,
                "layer": r.layer,
                "status": OK,
                "value_sum": float(r.values.sum()),
                "value_last": float(r.values[-1]),
                "value_checksum": values_checksum(r.values),
                "source": source,
                "scorer": r.scorer,
                "version": r.version,
                "latency_s": r.latency_s,
                "attempts": p.attempts.get(r.layer, 1),
                "reason": "",
            }
        )

    def on_call_lost(self, requests: Sequence[ScoreRequest], status: str, error: str) -> None:
        """A whole call came back without results (its actor died for good) or was cancelled at its deadline."""
        for q in requests:
            self.on_result(ScoreResult(q.episode_id, q.layer, status, None, "", "", 0.0, q.attempt, error))

    # --- missing policy, settlement -----------------------------------------------------------------------
    def resolve_missing(self, force_hold_retry: bool = False) -> list[PendingEpisode]:
        """Apply the missing policy to episodes whose missing layers have nothing in flight; return dropped ones."""
        now = self.clock()
        dropped = []
        hold = self.cfg.missing_policy == "hold" and self.cfg.mode != "zero_latency"
        for p in list(self._episodes.values()):
            if not p.missing or p.inflight:
                continue
            reason = ",".join(f"{layer}:{st}" for layer, st in sorted(p.missing.items()))
            if hold and p.hold_rounds < self.cfg.max_hold_rounds:
                if p.held_until is None:
                    p.held_until = now + self.cfg.hold_retry_s
                    self.counters["held"] += 1
                    self.reasons[f"held:{reason}"] += 1
                if force_hold_retry or now >= p.held_until:
                    p.hold_rounds += 1
                    p.held_until = None
                    for layer in list(p.missing):
                        p.missing.pop(layer)
                        if layer in self.group_of:
                            self._queue(p, layer)
                        else:  # a cheap layer failed: score it inline again
                            self.on_result(self._score_inline(p, layer), source=SOURCE_INLINE)
                continue
            p.drop_reason = f"{reason}:hold_exhausted" if hold else reason
            dropped.append(p)
        for p in dropped:
            self._drop(p, p.drop_reason)
        return dropped

    def _drop(self, p: PendingEpisode, reason: str) -> None:
        del self._episodes[p.episode_id]
        self._wire_cache.pop(p.episode_id, None)
        for layer, st in p.missing.items():
            self._events.append(
                {
                    "kind": "settled",
                    "episode_id": p.episode_id,
                    "layer": layer,
                    "status": MISSING,
                    "attempts": p.attempts.get(layer, 0),
                    "reason": st,
                }
            )
        self._events.append(
            {"kind": "dropped", "episode_id": p.episode_id, "reason": reason, "t": self.clock()}
        )
        self.counters["dropped"] += 1
        self.reasons[f"dropped:{reason}"] += 1

    def collect_settled(self) -> list[PendingEpisode]:
        """Remove and return episodes with every layer ``ok``; their values enter the normaliser statistics."""
        done = [p for p in self._episodes.values() if p.settled]
        for p in done:
            del self._episodes[p.episode_id]
            self._wire_cache.pop(p.episode_id, None)
            for layer in p.layers:
                values = p.results[layer].values
                assert values is not None
                scored = values if LAYER_CLASSES[layer].granularity is Granularity.STEP else values[-1:]
                self.normalizer.update(layer, scored)
                self._unsent[layer].update(scored)
        self.counters["settled"] += len(done)
        return done

    def seal(self, p: PendingEpisode, reward: np.ndarray, risk: np.ndarray) -> str:
        """Record the reward vector the learner will train on (after normalisation and weighting).

        Returns:
            Its checksum (:func:`values_checksum` of the float32 reward and risk streams).
        """
        checksum = values_checksum(reward, risk)
        self._events.append(
            {
                "kind": "sealed",
                "episode_id": p.episode_id,
                "checksum": checksum,
                "reward_sum": float(np.sum(np.asarray(reward, dtype=np.float32), dtype=np.float64)),
                "risk_sum": float(np.sum(np.asarray(risk, dtype=np.float32), dtype=np.float64)),
                "num_steps": len(reward),
                "policy_version": p.policy_version,
                "t": self.clock(),
            }
        )
        self.counters["sealed"] += 1
        return checksum

    def release(self, p: PendingEpisode, reason: str) -> None:
        """Record that a settled episode will not go to a learner (e.g. an evaluation episode), with a reason."""
        self._events.append(
            {"kind": "dropped", "episode_id": p.episode_id, "reason": reason, "t": self.clock()}
        )
        self.counters["released"] += 1
        self.reasons[f"released:{reason}"] += 1

    def abandon_all(self, reason: str) -> int:
        """Drop every pending episode with ``reason`` (their results, if any still arrive, count as late duplicates);
        returns how many."""
        pending = list(self._episodes.values())
        for p in pending:
            self._drop(p, reason)
        return len(pending)

    def mark_pending_at_shutdown(self) -> int:
        """Record every episode still waiting for a scorer as pending at shutdown; returns how many."""
        for p in self._episodes.values():
            self._events.append({"kind": "pending_at_shutdown", "episode_id": p.episode_id})
        self.counters["pending_at_shutdown"] += len(self._episodes)
        return len(self._episodes)

    # --- ledger and normaliser sync -----------------------------------------------------------------------
    @property
    def has_events(self) -> bool:
        return bool(self._events)

    def take_flush(self, flush_id: str) -> tuple[list[dict[str, Any]], NormDeltas]:
        """The buffered events and the normaliser statistics not sent yet, for one ledger write (cleared)."""
        events, self._events = self._events, []
        deltas = {n: (d.count, d.mean, d.m2) for n, d in self._unsent.items() if d.count}
        self._unsent = {n: RunningMeanStd() for n in self.layers}
        self._unacked.append((flush_id, deltas))
        return events, deltas

    def on_flush_acked(self, flush_id: str, central: dict[str, Any]) -> None:
        """The ledger applied ``flush_id`` and answered with the central state: adopt it plus what it lacks."""
        ids = [f for f, _ in self._unacked]
        if flush_id not in ids:
            return
        later = self._unacked[ids.index(flush_id) + 1 :]
        self._unacked = later
        self.normalizer.set_state(central)
        for _, deltas in later:
            for layer, (n, mean, m2) in deltas.items():
                self.normalizer.stats[layer].merge(n, mean, m2)
        for layer, d in self._unsent.items():
            self.normalizer.stats[layer].merge(d.count, d.mean, d.m2)

    def adopt_central(self, central: dict[str, Any]) -> None:
        """Start from the central normaliser state (a new client, or after a checkpoint was restored)."""
        self.normalizer.set_state(central)
        for _, deltas in self._unacked:
            for layer, (n, mean, m2) in deltas.items():
                self.normalizer.stats[layer].merge(n, mean, m2)
        for layer, d in self._unsent.items():
            self.normalizer.stats[layer].merge(d.count, d.mean, d.m2)
