"""The Ray actors of the reward pool, thin wrappers around plain classes.

* :class:`CpuScorerActor` / :class:`AsyncScorerActor` wrap a :class:`LayerGroupScorer` for the CPU-bound and the
  I/O-bound layers. Besides answering the client, each reports what it produced (a checksum per (episode, layer))
  to the ledger, so the audit can check every trained value against a scorer's own record.
* :class:`LedgerActor` wraps the :class:`RewardLedger` and the central normaliser statistics.

Fault tolerance is Ray's: the pool creates every actor with ``max_restarts=-1`` and ``max_task_retries=-1``, so a
call that was in flight when its actor died is re-run on the restarted actor. That is safe because scoring is keyed
by (episode, layer) (a re-run scores the same record again: the same value) and ledger writes carry a batch id
(a re-run of an applied batch changes nothing).

A scorer returns its results only after the ledger acknowledged its ``scored`` record. The record used to be sent
fire-and-forget, and Ray retries a call only while its caller lives: a scorer killed after it had answered but
before its ledger write left the process lost the record, and the audit rightly counted the episodes of that call
as imputed (``no_scorer_result``; 12 in one ``benchmarks/chaos.py`` run, reproduced by stopping the ledger, taking
the answer and killing the scorer). Now a scorer that dies before the acknowledgement has not answered either, so
Ray re-runs the whole call on the restarted actor, which scores and records again. The wait costs one ledger round
trip per call, inside the actor; the runner never waits on it (it polls its calls).
"""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

from agentic_ray.rewards.layer_group_scorer import LayerGroupScorer, make_layers
from agentic_ray.rewards.layers import CostClass
from agentic_ray.rewards.normalization import RewardNormalizer
from agentic_ray.rewards.reward_ledger import RewardLedger
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig
from agentic_ray.rewards.score_messages import STATUS_OK, ScoreRequest, ScoreResult, values_checksum

NORMALIZER_KEY = "normalizer_state"


class _ScorerActorBase:
    """Builds the group's scorer and reports its ``ok`` results to the ledger (batch-keyed; answered after the ack)."""

    cost: CostClass

    def __init__(self, cfg: dict[str, Any], judge_url: str | None, ledger_name: str | None = None) -> None:
        c = RewardPoolConfig.model_validate(cfg)
        layers = make_layers(c, judge_url, [self.cost])
        self.scorer = LayerGroupScorer(
            layers,
            {n: c.layers[n].timeout_s for n in layers},
            {n: c.layers[n].retries for n in layers},
        )
        self._ledger_name = ledger_name
        self._ledger: Any = None
        self._prefix = f"scorer-{uuid.uuid4().hex[:8]}"
        self._seq = itertools.count()

    def _report(self, results: list[ScoreResult]) -> Any:
        """Send the ``ok`` results' checksums to the ledger; returns the write's ref (None if nothing to write)."""
        if self._ledger_name is None:
            return None
        events = [
            {
                "kind": "scored",
                "episode_id": r.episode_id,
                "layer": r.layer,
                "value_checksum": values_checksum(r.values),
                "scorer": r.scorer,
                "version": r.version,
            }
            for r in results
            if r.status == STATUS_OK and r.values is not None
        ]
        if not events:
            return None
        import ray

        if self._ledger is None:
            self._ledger = ray.get_actor(self._ledger_name)
        # Ray re-runs this write if the ledger restarts (max_task_retries); the batch id makes a re-run a no-op.
        return self._ledger.apply.remote(f"{self._prefix}-{next(self._seq)}", events, {})

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


class CpuScorerActor(_ScorerActorBase):
    """Ray actor around :class:`LayerGroupScorer` for CPU-bound layers; each call scores a whole batch."""

    cost = CostClass.ASYNC_CPU

    def score(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        import ray

        out = self.scorer.score(requests)
        ack = self._report(out)
        if ack is not None:
            ray.get(ack)  # answer only once the ledger holds the scorer's record (module docstring)
        return out


class AsyncScorerActor(_ScorerActorBase):
    """Async Ray actor (``num_cpus=0``, high ``max_concurrency``) for I/O-bound layers such as the judge."""

    cost = CostClass.ASYNC_IO

    async def score(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        out = await self.scorer.ascore(requests)
        ack = self._report(out)
        if ack is not None:
            await ack  # answer only once the ledger holds the scorer's record (module docstring)
        return out


class LedgerActor:
    """Ray actor around :class:`RewardLedger` that also merges the normaliser statistics of all EnvRunners.

    It reopens the same SQLite file after a restart, so nothing committed is lost; batch ids make re-sent writes
    idempotent, and a batch's events and the normaliser state merged from its deltas commit in one transaction.
    """

    def __init__(self, path: str, modes: dict[str, str], clip: float) -> None:
        self.ledger = RewardLedger(path)
        self._modes, self._clip = modes, clip
        self.normalizer = self._load_normalizer()

    def _load_normalizer(self) -> RewardNormalizer:
        n = RewardNormalizer(self._modes, clip=self._clip)
        state = self.ledger.get_json(NORMALIZER_KEY)
        if state:
            n.set_state(state)
        return n

    def apply(
        self, batch_id: str, events: list[dict[str, Any]], norm_deltas: dict[str, tuple[int, float, float]]
    ) -> dict[str, Any]:
        """Apply ledger events and normaliser deltas atomically, once per batch; return the merged normaliser state.

        The merged statistics are computed on a copy and written in the same transaction as the events; the
        in-memory normaliser is replaced only after the commit, so a crash between the two cannot leave one
        applied without the other.
        """
        merged = RewardNormalizer(self._modes, clip=self._clip)
        merged.set_state(self.normalizer.get_state())
        for layer, (n, mean, m2) in (norm_deltas or {}).items():
            if layer in merged.stats:
                merged.stats[layer].merge(n, mean, m2)
        kv = {NORMALIZER_KEY: merged.get_state()} if norm_deltas else None
        if self.ledger.apply(batch_id, events, kv):
            self.normalizer = merged
        return self.normalizer.get_state()

    def normalizer_state(self) -> dict[str, Any]:
        return self.normalizer.get_state()

    def set_normalizer_state(self, state: dict[str, Any]) -> None:
        self.ledger.put_json(NORMALIZER_KEY, state)
        self.normalizer = self._load_normalizer()

    def audit(self) -> Any:
        from agentic_ray.rewards.ledger_audit import audit_ledger

        return audit_ledger(self.ledger)

    def scores(self, episode_id: str) -> dict[str, dict[str, Any]]:
        return self.ledger.scores(episode_id)

    def episode(self, episode_id: str) -> dict[str, Any] | None:
        return self.ledger.episode(episode_id)

    def backup(self, dest: str) -> str:
        return str(self.ledger.backup(dest))

    def restore(self, src: str) -> None:
        """Replace the current database by the backup at ``src`` (used when restoring a checkpoint)."""
        path = self.ledger.path
        self.ledger.close()
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)
        self.ledger = RewardLedger.restore(src, path)
        self.normalizer = self._load_normalizer()

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())
