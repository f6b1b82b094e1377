"""The runner-side transport of the reward pool: sends the state machine's requests to the actors, collects results.

:class:`RewardPoolClient` owns a :class:`RewardClientState` (all decisions) and adds the Ray parts: one call per
actor group and actor (requests split round-robin across the group), ``ray.wait`` without blocking, bounded waits
for backpressure and drains, ``ray.cancel`` for calls past their deadline, and ledger writes.

Failures are Ray's to handle first: scorer actors run with ``max_restarts=-1, max_task_retries=-1``, so a call in
flight when its actor (or node) dies is re-run on the restarted actor and simply arrives late. The client only sees
a call fail when Ray gave up (restarts exhausted: the layers go to the missing policy) and only abandons a call that
is still unanswered after its layers' timeouts and retries plus ``call_deadline_slack_s`` (a hang): it cancels it
with ``ray.cancel`` and sends its layers to the missing policy.

Hand-written parts, and why: requests are dispatched round-robin by hand instead of through
``ray.util.ActorPool`` because ``ActorPool`` keeps one call in flight per actor, whereas the judge actors are async
(``max_concurrency`` 1000) and each call is split into concurrent 16-episode HTTP requests; with one call per actor
the judge latency is paid serially (an 800 ms judge would admit one batch per 0.8 s per actor). ``ActorPool`` also
blocks in ``get_next``, while the client must poll both groups without waiting.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layer_group_scorer import make_layers
from agentic_ray.rewards.layers import CostClass
from agentic_ray.rewards.reward_client_state import PendingEpisode, RewardClientState
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig
from agentic_ray.rewards.score_messages import STATUS_ACTOR_FAILED, STATUS_DEADLINE, ScoreRequest, ScoreResult

logger = logging.getLogger(__name__)


@dataclass
class _Call:
    group: str
    requests: list[ScoreRequest]
    deadline: float


class RewardPoolClient:
    """Runner-side client of the reward pool. Not thread-safe; one per EnvRunner.

    Args:
        cfg: pool settings.
        spec: :attr:`RewardActorPool.spec`.
        runner_id: written to the ledger with each episode.
        clock: time source of the state machine and the call deadlines.
    """

    def __init__(
        self,
        cfg: RewardPoolConfig,
        spec: dict[str, Any],
        runner_id: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        import ray

        self.cfg = cfg
        self.spec = spec
        self.runner_id = runner_id
        self.clock = clock
        self.state = RewardClientState(
            cfg, make_layers(cfg, spec.get("judge_url"), [CostClass.SYNC]), runner_id, clock
        )
        self._actors: dict[str, list[Any]] = {g: [ray.get_actor(n) for n in spec[g]] for g in ("cpu", "io")}
        if cfg.mode != "zero_latency":
            for layer, g in self.state.group_of.items():
                if not self._actors[g]:
                    raise ValueError(f"layer {layer} needs the {g} actor group, but the pool has none")
        self._ledger = ray.get_actor(spec["ledger"])
        self._rr = {g: itertools.count() for g in ("cpu", "io")}
        self._inflight: dict[Any, _Call] = {}
        self._last_submit = 0.0
        self._flushes: dict[Any, str] = {}  # ledger write ref -> flush id, until acknowledged
        self._flush_seq = itertools.count()
        # Start from the central normaliser (a resumed run's statistics, or other runners' so far).
        central: Any = ray.get(self._ledger.normalizer_state.remote())
        self.state.adopt_central(central)

    # --- state passthrough --------------------------------------------------------------------------------
    @property
    def counters(self) -> Any:
        return self.state.counters

    @property
    def reasons(self) -> Any:
        return self.state.reasons

    @property
    def normalizer(self) -> Any:
        return self.state.normalizer

    @property
    def num_pending(self) -> int:
        return self.state.num_pending

    def submit(
        self,
        episode_id: str,
        record: EpisodeRecord,
        payload: Any = None,
        policy_version: int = 0,
        prescored: Sequence[ScoreResult] | None = None,
    ) -> None:
        """Register a finished episode (never blocks); see :meth:`RewardClientState.submit`."""
        self.state.submit(episode_id, record, payload, policy_version, prescored)

    def seal(self, p: PendingEpisode, reward: Any, risk: Any) -> str:
        return self.state.seal(p, reward, risk)

    # --- calls --------------------------------------------------------------------------------------------
    def _send(self, force: bool = False) -> None:
        """Send queued requests: per group, one call per actor (the requests split round-robin)."""
        now = self.clock()
        if not force and now - self._last_submit < self.cfg.submit_interval_s:
            return
        self._last_submit = now
        for group, reqs in self.state.take_requests().items():
            actors = self._actors[group]
            per = -(-len(reqs) // len(actors))
            for j in range(0, len(reqs), per):
                chunk = reqs[j : j + per]
                actor = actors[next(self._rr[group]) % len(actors)]
                budget = max(
                    self.cfg.layers[r.layer].timeout_s * (1 + self.cfg.layers[r.layer].retries) for r in chunk
                )
                self._inflight[actor.score.remote(chunk)] = _Call(
                    group, chunk, now + budget + self.cfg.call_deadline_slack_s
                )

    def _handle_ready(self, refs: list[Any]) -> None:
        import ray
        from ray.exceptions import RayError

        for ref in refs:
            call = self._inflight.pop(ref)
            try:
                results = ray.get(ref)
            except RayError as e:  # Ray gave up on the call (restarts exhausted, or the call itself raised)
                self.counters["lost_calls"] += 1
                self.state.on_call_lost(call.requests, STATUS_ACTOR_FAILED, type(e).__name__)
                continue
            for r in results:
                self.state.on_result(r)

    def _cancel_overdue(self, now: float) -> None:
        import ray

        for ref, call in list(self._inflight.items()):
            if now > call.deadline:
                del self._inflight[ref]
                ray.cancel(ref)
                self.counters["cancelled_calls"] += 1
                self.state.on_call_lost(call.requests, STATUS_DEADLINE, "call deadline passed; cancelled")

    def poll(
        self, timeout_s: float = 0.0, force_hold_retry: bool = False
    ) -> tuple[list[PendingEpisode], list[PendingEpisode]]:
        """Send queued work and collect finished calls, waiting at most ``timeout_s`` for the first one.

        Returns:
            ``(settled, dropped)``: settled episodes have every layer ``ok`` (normaliser statistics updated);
            dropped ones had a layer missing under the missing policy.
        """
        import ray

        self._send(force=timeout_s > 0)
        if self._inflight:
            refs = list(self._inflight)
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if not ready and timeout_s > 0:
                ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
                if ready:
                    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            self._handle_ready(ready)
        elif timeout_s > 0:
            time.sleep(min(timeout_s, 0.05))  # only held work is waiting
        self._cancel_overdue(self.clock())
        queued = self.state.num_queued
        dropped = self.state.resolve_missing(force_hold_retry)
        if self.state.num_queued > queued:  # held layers asked again: send them now
            self._send(force=True)
        return self.state.collect_settled(), dropped

    def wait_below(self, cap: int) -> tuple[float, list[PendingEpisode], list[PendingEpisode]]:
        """Backpressure: wait until at most ``cap`` episodes are pending (or ``max_backpressure_wait_s`` passed).

        Returns:
            ``(waited_s, settled, dropped)``.
        """
        settled: list[PendingEpisode] = []
        dropped: list[PendingEpisode] = []
        if self.num_pending <= cap:
            return 0.0, settled, dropped
        t0 = time.perf_counter()
        while self.num_pending > cap and time.perf_counter() - t0 < self.cfg.max_backpressure_wait_s:
            s, d = self.poll(timeout_s=0.05)
            settled += s
            dropped += d
        return time.perf_counter() - t0, settled, dropped

    def drain(self, timeout_s: float | None = None) -> tuple[list[PendingEpisode], list[PendingEpisode]]:
        """Wait until nothing is pending (held episodes are asked again at once), or until ``timeout_s``."""
        deadline = time.perf_counter() + (timeout_s if timeout_s is not None else self.cfg.drain_timeout_s)
        settled: list[PendingEpisode] = []
        dropped: list[PendingEpisode] = []
        s, d = self.poll(timeout_s=0.0, force_hold_retry=True)
        settled += s
        dropped += d
        while self.num_pending and time.perf_counter() < deadline:
            s, d = self.poll(timeout_s=0.1, force_hold_retry=True)
            settled += s
            dropped += d
        return settled, dropped

    # --- ledger -------------------------------------------------------------------------------------------
    def flush_ledger(self, timeout_s: float | None = None) -> bool:
        """Write the buffered events (one ledger call) and wait up to ``timeout_s`` (default
        ``cfg.ledger_flush_timeout_s``) for it and for earlier unacknowledged writes.

        The wait keeps the seals of the episodes a ``sample()`` returns committed before they leave the runner
        (measured: about 2 ms per call on 2 CPUs). A write that is not acknowledged in time stays queued in Ray
        (the ledger actor retries its calls) and is acknowledged by a later flush.

        Returns:
            True when every write so far is acknowledged.
        """
        import ray

        if self.state.has_events:
            flush_id = f"{self.runner_id}-{uuid.uuid4().hex[:12]}-{next(self._flush_seq)}"
            events, deltas = self.state.take_flush(flush_id)
            self._flushes[self._ledger.apply.remote(flush_id, events, deltas)] = flush_id
        if not self._flushes:
            return True
        refs = list(self._flushes)
        wait = self.cfg.ledger_flush_timeout_s if timeout_s is None else timeout_s
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=wait)
        for ref in refs:  # acknowledge in send order
            if ref not in ready:
                break
            flush_id = self._flushes.pop(ref)
            try:
                self.state.on_flush_acked(flush_id, ray.get(ref))
            except ray.exceptions.RayError as e:  # the write itself failed: Ray does not retry app errors
                logger.error("reward ledger write %s failed: %r", flush_id, e)
                raise
        return not self._flushes

    def reload_normalizer(self) -> None:
        """Adopt the ledger's central normaliser state (after a checkpoint was restored into the ledger)."""
        import ray

        self.flush_ledger()
        central: Any = ray.get(self._ledger.normalizer_state.remote())
        self.state.adopt_central(central)
