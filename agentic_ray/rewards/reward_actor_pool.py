"""The asynchronous reward actor pool: plain scorers first, Ray actors as thin wrappers, and the runner-side client.

Pieces, from the inside out:

* :class:`LayerGroupScorer` (plain): scores a batch of :class:`ScoreRequest` with the layers of one cost class,
  one :class:`ScoreResult` per request. Each request is keyed by (episode id, layer); a successful result is cached
  under that key, so a retried request is answered without scoring twice.
* :class:`CpuScorerActor` / :class:`AsyncScorerActor` / :class:`LedgerActor`: Ray actors that wrap the plain
  scorer, or the :class:`RewardLedger` plus the central normaliser statistics.
* :class:`RewardActorPool`: created by the driver or the algorithm; starts the judge (if no URL is configured),
  creates the actor groups with uuid-suffixed names and hands out a picklable :attr:`RewardActorPool.spec`.
* :class:`RewardPoolClient`: lives in the EnvRunner. Submission never blocks; it tracks every (episode, layer),
  retries timeouts and errors up to each layer's budget, re-submits work of actors that died, applies the missing
  policy (hold or drop, with a counted reason, never a 0), enforces the pending cap (the only wait, measured),
  and writes ledger events in batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import tempfile
import time
import uuid
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers import LAYER_CLASSES, CostClass, Granularity, RewardLayer, build_layer
from agentic_ray.rewards.layers.llm_judge_layer import InProcessRubricJudge
from agentic_ray.rewards.normalization import RewardNormalizer, RunningMeanStd
from agentic_ray.rewards.reward_ledger import MISSING, OK, LedgerAudit, RewardLedger
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig

logger = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_TIMEOUT = "timeout"
STATUS_ERROR = "error"
STATUS_ACTOR_FAILED = "actor_failed"
NORMALIZER_KEY = "normalizer_state"


@dataclass
class ScoreRequest:
    """Score ``layer`` for one episode. ``attempt`` counts from 1."""

    episode_id: str
    layer: str
    record: EpisodeRecord
    attempt: int = 1


@dataclass
class ScoreResult:
    """The outcome of one scoring attempt; ``values`` is ``(T,)`` float32 when ``status == "ok"``, else None."""

    episode_id: str
    layer: str
    status: str
    values: np.ndarray | None
    scorer: str
    version: str
    latency_s: float
    attempt: int
    error: str = ""


def make_layers(
    cfg: RewardPoolConfig, judge_url: str | None, costs: Sequence[CostClass] | None = None
) -> dict[str, RewardLayer]:
    """Build the enabled layers (optionally only those of the given cost classes).

    The judge layer gets its URL, model, batch size and timeout from ``cfg``; in ``zero_latency`` mode it is the
    in-process rubric.
    """
    out: dict[str, RewardLayer] = {}
    for name in cfg.enabled_layers():
        cls = LAYER_CLASSES[name]
        if costs is not None and cls.cost not in costs:
            continue
        params = dict(cfg.layers[name].params)
        if name == "judge":
            params.setdefault("model", cfg.judge.model)
            params.setdefault("batch_size", cfg.judge.batch_size)
            if cfg.mode == "zero_latency":
                out[name] = InProcessRubricJudge(**params)
                continue
            if judge_url is None:
                raise ValueError("the judge layer is enabled but no judge URL is known")
            params.setdefault("base_url", judge_url)
            params.setdefault("timeout_s", cfg.layers[name].timeout_s)
            params.setdefault("api_key", cfg.judge.api_key)
        out[name] = build_layer(name, params)
    return out


class LayerGroupScorer:
    """Plain scorer for one group of layers. Unit-testable without Ray.

    Args:
        layers: layer name → layer.
        timeouts: layer name → seconds per attempt (async path only; enforced with ``asyncio.wait_for``).
        cache_size: successful results remembered per (episode id, layer).
    """

    def __init__(
        self, layers: dict[str, RewardLayer], timeouts: dict[str, float], cache_size: int = 50_000
    ) -> None:
        self.layers = layers
        self.timeouts = timeouts
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], ScoreResult] = OrderedDict()
        self.scored = 0
        self.cache_hits = 0

    def _split(self, requests: Sequence[ScoreRequest]) -> tuple[list[ScoreResult | None], list[list[int]]]:
        """Answer cached requests; group the others into chunks of one layer each."""
        out: list[ScoreResult | None] = [None] * len(requests)
        by_layer: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            hit = self._cache.get((r.episode_id, r.layer))
            if hit is not None:
                self.cache_hits += 1
                out[i] = ScoreResult(**{**hit.__dict__, "attempt": r.attempt})
            elif r.layer not in self.layers:
                out[i] = ScoreResult(
                    r.episode_id, r.layer, STATUS_ERROR, None, "", "", 0.0, r.attempt, "no such layer"
                )
            else:
                by_layer[r.layer].append(i)
        chunks: list[list[int]] = []
        for layer, idx in by_layer.items():
            size = max(1, self.layers[layer].request_batch_size)
            chunks.extend(idx[j : j + size] for j in range(0, len(idx), size))
        return out, chunks

    def _results(
        self,
        requests: Sequence[ScoreRequest],
        idx: list[int],
        values: list[np.ndarray] | None,
        status: str,
        latency: float,
        error: str = "",
    ) -> list[tuple[int, ScoreResult]]:
        layer = self.layers[requests[idx[0]].layer]
        res = []
        for k, i in enumerate(idx):
            r = requests[i]
            v: np.ndarray | None = None
            st = status
            if values is not None:
                arr = np.asarray(values[k], dtype=np.float32)
                if arr.shape == (r.record.num_steps,):
                    v = arr
                else:
                    st, error = (
                        STATUS_ERROR,
                        f"layer returned shape {arr.shape}, expected ({r.record.num_steps},)",
                    )
            sr = ScoreResult(
                r.episode_id,
                r.layer,
                st,
                v,
                layer.scorer_name,
                layer.scorer_version,
                latency,
                r.attempt,
                error,
            )
            if st == STATUS_OK:
                self._cache[(r.episode_id, r.layer)] = sr
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
                self.scored += 1
            res.append((i, sr))
        return res

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Score synchronously (CPU-bound layers): one ``score_batch`` call per chunk."""
        out, chunks = self._split(requests)
        for idx in chunks:
            layer = self.layers[requests[idx[0]].layer]
            t0 = time.perf_counter()
            try:
                vals = layer.score_batch([requests[i].record for i in idx])
                pairs = self._results(requests, idx, vals, STATUS_OK, time.perf_counter() - t0)
            except httpx.TimeoutException as e:
                pairs = self._results(requests, idx, None, STATUS_TIMEOUT, time.perf_counter() - t0, repr(e))
            except Exception as e:
                pairs = self._results(requests, idx, None, STATUS_ERROR, time.perf_counter() - t0, repr(e))
            for i, sr in pairs:
                out[i] = sr
        return [r for r in out if r is not None]

    async def ascore(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Score concurrently (I/O-bound layers): all chunks in flight at once, each under its layer's timeout."""
        out, chunks = self._split(requests)

        async def run(idx: list[int]) -> list[tuple[int, ScoreResult]]:
            name = requests[idx[0]].layer
            t0 = time.perf_counter()
            try:
                vals = await asyncio.wait_for(
                    self.layers[name].ascore_batch([requests[i].record for i in idx]), self.timeouts[name]
                )
                return self._results(requests, idx, vals, STATUS_OK, time.perf_counter() - t0)
            except (asyncio.TimeoutError, httpx.TimeoutException) as e:
                return self._results(requests, idx, None, STATUS_TIMEOUT, time.perf_counter() - t0, repr(e))
            except Exception as e:
                return self._results(requests, idx, None, STATUS_ERROR, time.perf_counter() - t0, repr(e))

        for pairs in await asyncio.gather(*(run(idx) for idx in chunks)):
            for i, sr in pairs:
                out[i] = sr
        return [r for r in out if r is not None]


# --- Ray actors (thin wrappers) -------------------------------------------------------------------------------


class CpuScorerActor:
    """Ray actor around :class:`LayerGroupScorer` for CPU-bound layers; each call scores a whole batch."""

    def __init__(self, cfg: dict[str, Any], judge_url: str | None) -> None:
        c = RewardPoolConfig.model_validate(cfg)
        layers = make_layers(c, judge_url, [CostClass.ASYNC_CPU])
        self.scorer = LayerGroupScorer(layers, {n: c.layers[n].timeout_s for n in layers})

    def score(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        return self.scorer.score(requests)

    def pid(self) -> int:
        import os

        return os.getpid()


class AsyncScorerActor:
    """Async Ray actor (``num_cpus=0``, high ``max_concurrency``) for I/O-bound layers such as the judge."""

    def __init__(self, cfg: dict[str, Any], judge_url: str | None) -> None:
        c = RewardPoolConfig.model_validate(cfg)
        layers = make_layers(c, judge_url, [CostClass.ASYNC_IO])
        self.scorer = LayerGroupScorer(layers, {n: c.layers[n].timeout_s for n in layers})

    async def score(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        return await self.scorer.ascore(requests)

    async def pid(self) -> int:
        import os

        return os.getpid()


class LedgerActor:
    """Ray actor around :class:`RewardLedger` that also merges the normaliser statistics of all EnvRunners.

    It reopens the same SQLite file after a restart, so nothing applied is lost; batch ids make re-sent writes
    idempotent.
    """

    def __init__(self, path: str, modes: dict[str, str], clip: float) -> None:
        self.ledger = RewardLedger(path)
        self.normalizer = RewardNormalizer(modes, clip=clip)
        state = self.ledger.get_json(NORMALIZER_KEY)
        if state:
            self.normalizer.set_state(state)

    def apply(
        self, batch_id: str, events: list[dict[str, Any]], norm_deltas: dict[str, tuple[int, float, float]]
    ) -> dict[str, Any]:
        """Apply ledger events and normaliser deltas once per batch; return the merged normaliser state."""
        if self.ledger.apply(batch_id, events) and norm_deltas:
            for layer, (n, mean, m2) in norm_deltas.items():
                if layer in self.normalizer.stats:
                    self.normalizer.stats[layer].merge(n, mean, m2)
            self.ledger.put_json(NORMALIZER_KEY, self.normalizer.get_state())
        return self.normalizer.get_state()

    def normalizer_state(self) -> dict[str, Any]:
        return self.normalizer.get_state()

    def set_normalizer_state(self, state: dict[str, Any]) -> None:
        self.normalizer.set_state(state)
        self.ledger.put_json(NORMALIZER_KEY, state)

    def audit(self) -> LedgerAudit:
        return self.ledger.audit()

    def scores(self, episode_id: str) -> dict[str, dict[str, Any]]:
        return self.ledger.scores(episode_id)

    def backup(self, dest: str) -> str:
        return str(self.ledger.backup(dest))

    def restore(self, src: str) -> None:
        """Replace the current database by the backup at ``src`` (used when restoring a checkpoint)."""
        path = self.ledger.path
        self.ledger.close()
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)
        self.ledger = RewardLedger.restore(src, path)
        state = self.ledger.get_json(NORMALIZER_KEY)
        if state:
            self.normalizer.set_state(state)

    def pid(self) -> int:
        import os

        return os.getpid()


class RewardActorPool:
    """Driver-side owner of the reward actors and of the local judge server.

    Create with :meth:`create`; pass :attr:`spec` (a small picklable dict of actor names and the judge URL) to
    EnvRunners through the AlgorithmConfig. Runners look the actors up by name.
    """

    def __init__(self, cfg: RewardPoolConfig, spec: dict[str, Any], judge_server: Any | None) -> None:
        self.cfg = cfg
        self.spec = spec
        self._judge_server = judge_server
        self._handles: list[Any] = []

    @classmethod
    def create(cls, cfg: RewardPoolConfig, name_prefix: str | None = None) -> RewardActorPool:
        """Start the judge (if needed) and the actor groups, with uuid-suffixed actor names.

        Args:
            cfg: validated pool settings.
            name_prefix: actor name prefix; a uuid suffix is always appended (Tune trials must not collide).
        """
        import ray

        from agentic_ray.rewards.judge_service import JudgeServer

        enabled = cfg.enabled_layers()
        judge_url, server = cfg.judge.base_url, None
        if "judge" in enabled and judge_url is None and cfg.mode != "zero_latency":
            server = JudgeServer(latency_ms=cfg.judge.latency_ms, mode=cfg.judge.server_mode).start()
            judge_url = server.base_url
        prefix = f"{name_prefix or 'agray-reward'}-{uuid.uuid4().hex[:8]}"
        ledger_path = cfg.ledger_path or str(
            Path(tempfile.mkdtemp(prefix="agray_ledger_")) / "reward_ledger.sqlite"
        )
        modes = {n: cfg.normalize_mode(n) for n in enabled}
        dump = cfg.model_dump(mode="json")
        ledger_name = f"{prefix}-ledger"
        # Keep the handles: an actor whose last handle goes out of scope is destroyed, named or not.
        handles: list[Any] = [
            ray.remote(LedgerActor)
            .options(name=ledger_name, num_cpus=0, max_restarts=-1, max_task_retries=-1)
            .remote(ledger_path, modes, cfg.normalize_clip)
        ]
        groups: dict[str, list[str]] = {"cpu": [], "io": []}
        if cfg.mode == "async":
            for group, cost, gcfg, actor_cls in (
                ("cpu", CostClass.ASYNC_CPU, cfg.cpu_group, CpuScorerActor),
                ("io", CostClass.ASYNC_IO, cfg.io_group, AsyncScorerActor),
            ):
                if not any(LAYER_CLASSES[n].cost is cost for n in enabled):
                    continue
                for i in range(gcfg.num_actors):
                    name = f"{prefix}-{group}-{i}"
                    handle = (
                        ray.remote(actor_cls)
                        .options(
                            name=name,
                            num_cpus=gcfg.num_cpus,
                            max_concurrency=gcfg.max_concurrency,
                            max_restarts=gcfg.max_restarts,
                            max_task_retries=0,  # the client re-submits, so that retries are counted and bounded
                        )
                        .remote(dump, judge_url)
                    )
                    handles.append(handle)
                    groups[group].append(name)
        spec = {
            "prefix": prefix,
            "ledger": ledger_name,
            "ledger_path": ledger_path,
            "cpu": groups["cpu"],
            "io": groups["io"],
            "judge_url": judge_url,
        }
        pool = cls(cfg, spec, server)
        pool._handles = handles
        ray.get(pool.ledger.pid.remote())  # fail fast if the ledger cannot open its file
        return pool

    @property
    def ledger(self) -> Any:
        """Handle of the ledger actor."""
        import ray

        return ray.get_actor(self.spec["ledger"])

    def actors(self, group: str) -> list[Any]:
        """Handles of the ``"cpu"`` or ``"io"`` group."""
        import ray

        return [ray.get_actor(n) for n in self.spec[group]]

    def audit(self) -> LedgerAudit:
        """Run the ledger audit."""
        import ray

        return ray.get(self.ledger.audit.remote())

    def save(self, directory: str | Path) -> Path:
        """Back the ledger (with the normaliser state inside) up to ``directory/reward_ledger.sqlite``."""
        import ray

        dest = Path(directory) / "reward_ledger.sqlite"
        ray.get(self.ledger.backup.remote(str(dest)))
        return dest

    def restore(self, directory: str | Path) -> None:
        """Load a ledger saved by :meth:`save` (rows and normaliser state)."""
        import ray

        ray.get(self.ledger.restore.remote(str(Path(directory) / "reward_ledger.sqlite")))

    def shutdown(self) -> None:
        """Kill the actors and stop the local judge."""
        import ray

        for name in [self.spec["ledger"], *self.spec["cpu"], *self.spec["io"]]:
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(name), no_restart=True)
        if self._judge_server is not None:
            self._judge_server.stop()
            self._judge_server = None


# --- Runner-side client ---------------------------------------------------------------------------------------


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
    failures: dict[str, int] = field(default_factory=dict)
    resubmits: dict[str, int] = field(default_factory=dict)
    inflight: set[str] = field(default_factory=set)
    missing: dict[str, str] = field(default_factory=dict)
    hold_rounds: int = 0
    held_until: float | None = None
    drop_reason: str = ""

    @property
    def settled(self) -> bool:
        return all(layer in self.results for layer in self.layers)


@dataclass
class _Call:
    group: str
    actor_index: int
    requests: list[ScoreRequest]
    submitted_at: float
    deadline: float


class RewardPoolClient:
    """Runner-side bookkeeping of (episode, layer) work. Not thread-safe; one per EnvRunner.

    Args:
        cfg: pool settings.
        spec: :attr:`RewardActorPool.spec`.
        runner_id: written to the ledger with each episode.
    """

    def __init__(self, cfg: RewardPoolConfig, spec: dict[str, Any], runner_id: str = "") -> None:
        import ray

        self.cfg = cfg
        self.spec = spec
        self.runner_id = runner_id
        self.layers = cfg.enabled_layers()
        self.sync_layers = make_layers(cfg, spec.get("judge_url"), [CostClass.SYNC])
        self.group_of = {
            n: ("cpu" if LAYER_CLASSES[n].cost is CostClass.ASYNC_CPU else "io")
            for n in self.layers
            if LAYER_CLASSES[n].cost is not CostClass.SYNC
        }
        self._actors: dict[str, list[Any]] = {g: [ray.get_actor(n) for n in spec[g]] for g in ("cpu", "io")}
        if cfg.mode == "async":
            for layer, g in self.group_of.items():
                if not self._actors[g]:
                    raise ValueError(f"layer {layer} needs the {g} actor group, but the pool has none")
        self._ledger = ray.get_actor(spec["ledger"])
        self._rr = {g: itertools.count() for g in ("cpu", "io")}
        self.normalizer = RewardNormalizer(
            {n: cfg.normalize_mode(n) for n in self.layers}, clip=cfg.normalize_clip
        )
        self._norm_delta = {n: RunningMeanStd() for n in self.layers}
        self._episodes: dict[str, PendingEpisode] = {}
        self._inflight: dict[Any, _Call] = {}
        self._outbox: dict[str, list[ScoreRequest]] = defaultdict(list)
        self._delayed: list[tuple[float, str, ScoreRequest]] = []
        self._ship_args = any(LAYER_CLASSES[n].needs_step_args for n in self.group_of)
        self._wire_cache: dict[str, EpisodeRecord] = {}
        self._last_submit = 0.0
        self._events: list[dict[str, Any]] = []
        self._last_flush = 0.0
        self._flush_seq = itertools.count()
        self._latest_flush: Any = None
        self._ledger_refs: list[Any] = []
        self.counters: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()

    # --- submission ---------------------------------------------------------------------------------------
    @property
    def num_pending(self) -> int:
        """Episodes submitted but neither settled nor dropped."""
        return len(self._episodes)

    def submit(
        self,
        episode_id: str,
        record: EpisodeRecord,
        payload: Any = None,
        policy_version: int = 0,
        prescored: Sequence[ScoreResult] | None = None,
    ) -> None:
        """Register a finished episode. Never blocks: cheap layers are scored inline, slow ones are queued.

        Args:
            episode_id: unique key (the RLlib episode id).
            record: the episode summary.
            payload: returned with the settled episode.
            policy_version: policy version that sampled the episode (for staleness).
            prescored: results computed elsewhere (blocking mode: inside env.step); they settle those layers.

        Raises:
            ValueError: duplicate episode id or an empty episode.
        """
        if episode_id in self._episodes:
            raise ValueError(f"episode {episode_id} submitted twice")
        if record.num_steps == 0:
            raise ValueError(f"episode {episode_id} has no steps")
        now = time.time()
        p = PendingEpisode(episode_id, record, list(self.layers), payload, policy_version, now)
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
                "t": now,
            }
        )
        for r in prescored or ():
            if r.status == STATUS_OK:
                self._accept(p, r)
            else:  # the blocking scorer already spent this layer's retries
                p.failures[r.layer] = r.attempt
                p.missing[r.layer] = r.status
                self.counters["missing"] += 1
                self.reasons[f"missing:{r.layer}:{r.status}"] += 1
        for name, layer in self.sync_layers.items():
            if name in p.results or name in p.missing:
                continue
            t0 = time.perf_counter()
            try:
                v = np.asarray(layer.score(record), dtype=np.float32)
                r = ScoreResult(
                    episode_id,
                    name,
                    STATUS_OK,
                    v,
                    layer.scorer_name,
                    layer.scorer_version,
                    time.perf_counter() - t0,
                    1,
                )
            except Exception as e:  # a cheap layer that raises is a scorer bug: record, do not impute
                r = ScoreResult(
                    episode_id,
                    name,
                    STATUS_ERROR,
                    None,
                    layer.scorer_name,
                    layer.scorer_version,
                    time.perf_counter() - t0,
                    1,
                    repr(e),
                )
            self._on_result(p, r)
        for name in p.layers:
            if (
                name not in p.results
                and name not in p.missing
                and name in self.group_of
                and name not in p.inflight
            ):
                if self.cfg.mode != "async":
                    self._on_result(
                        p,
                        ScoreResult(
                            episode_id,
                            name,
                            STATUS_ERROR,
                            None,
                            "",
                            "",
                            0.0,
                            1,
                            f"mode {self.cfg.mode}: layer was not prescored",
                        ),
                    )
                    continue
                self._queue(p, name, 1)

    def _wire_record(self, p: PendingEpisode) -> EpisodeRecord:
        """The record as shipped to actors: without step arguments unless an async layer reads them."""
        if self._ship_args:
            return p.record
        if p.episode_id not in self._wire_cache:
            r = p.record
            self._wire_cache[p.episode_id] = dataclasses.replace(
                r, steps=[dataclasses.replace(st, args={}) for st in r.steps]
            )
        return self._wire_cache[p.episode_id]

    def _queue(self, p: PendingEpisode, layer: str, attempt: int) -> None:
        p.inflight.add(layer)
        self._outbox[self.group_of[layer]].append(
            ScoreRequest(p.episode_id, layer, self._wire_record(p), attempt)
        )

    def _send(self, force: bool = False) -> None:
        """Send queued requests: one Ray call per actor group (split across the group's actors)."""
        now = time.time()
        if not force and now - self._last_submit < self.cfg.submit_interval_s:
            return
        self._last_submit = now
        for group, reqs in list(self._outbox.items()):
            if not reqs:
                continue
            actors = self._actors[group]
            per = -(-len(reqs) // len(actors))
            for j in range(0, len(reqs), per):
                chunk = reqs[j : j + per]
                self._call(group, chunk)
            self._outbox[group] = []

    def _call(self, group: str, requests: list[ScoreRequest], avoid: int | None = None) -> None:
        actors = self._actors[group]
        i = next(self._rr[group]) % len(actors)
        if avoid is not None and len(actors) > 1 and i == avoid:
            i = (i + 1) % len(actors)
        timeout = max(self.cfg.layers[r.layer].timeout_s for r in requests)
        now = time.time()
        ref = actors[i].score.remote(requests)
        self._inflight[ref] = _Call(group, i, requests, now, now + timeout + self.cfg.call_deadline_slack_s)

    # --- results ------------------------------------------------------------------------------------------
    def _accept(self, p: PendingEpisode, r: ScoreResult) -> None:
        """Settle a layer with an ``ok`` result exactly once; later results for it are counted duplicates."""
        if r.layer in p.results:
            self.counters["duplicates"] += 1
            self._events.append({"kind": "duplicate", "episode_id": p.episode_id, "layer": r.layer})
            return
        assert r.values is not None
        if r.values.shape != (p.record.num_steps,):
            raise ValueError(
                f"{r.layer}: values of shape {r.values.shape} for a {p.record.num_steps}-step episode"
            )
        p.results[r.layer] = r
        p.inflight.discard(r.layer)
        p.missing.pop(r.layer, None)
        attempts = p.failures.get(r.layer, 0) + 1
        self._events.append(
            {
                "kind": "settled",
                "episode_id": p.episode_id,
                "layer": r.layer,
                "status": OK,
                "value_sum": float(r.values.sum()),
                "value_last": float(r.values[-1]),
                "scorer": r.scorer,
                "version": r.version,
                "latency_s": r.latency_s,
                "attempts": attempts,
                "reason": "",
            }
        )

    def _on_result(self, p: PendingEpisode, r: ScoreResult) -> list[ScoreRequest]:
        """Handle one result; return requests to retry."""
        if r.status == STATUS_OK:
            self._accept(p, r)
            return []
        if r.layer in p.results:  # a late failure of something already settled
            return []
        p.inflight.discard(r.layer)
        if r.status == STATUS_ACTOR_FAILED:
            k = p.resubmits.get(r.layer, 0) + 1
            p.resubmits[r.layer] = k
            self.counters["resubmits"] += 1
            if k <= self.cfg.max_actor_resubmits:
                # The actor is restarting: back off (0.1 s doubling, capped) instead of burning the budget.
                delay = min(self.cfg.actor_backoff_max_s, 0.1 * 2 ** (k - 1))
                p.inflight.add(r.layer)
                self._delayed.append(
                    (
                        time.time() + delay,
                        self.group_of[r.layer],
                        ScoreRequest(p.episode_id, r.layer, self._wire_record(p), r.attempt),
                    )
                )
                return []
        else:
            p.failures[r.layer] = p.failures.get(r.layer, 0) + 1
            self.counters[f"failed_attempts_{r.status}"] += 1
            if p.failures[r.layer] <= self.cfg.layers[r.layer].retries:
                p.inflight.add(r.layer)
                self.counters["retries"] += 1
                return [ScoreRequest(p.episode_id, r.layer, self._wire_record(p), r.attempt + 1)]
        p.missing[r.layer] = r.status
        self.counters["missing"] += 1
        self.reasons[f"missing:{r.layer}:{r.status}"] += 1
        logger.warning(
            "reward layer %s missing for episode %s (%s: %s)", r.layer, p.episode_id, r.status, r.error
        )
        return []

    def _handle_ready(self, refs: list[Any]) -> None:
        import ray
        from ray.exceptions import RayError

        retry: dict[str, list[ScoreRequest]] = defaultdict(list)
        for ref in refs:
            call = self._inflight.pop(ref)
            try:
                results = ray.get(ref)
            except RayError as e:
                # The actor died (it restarts) or the call itself raised: re-submit everything in it.
                results = [
                    ScoreResult(
                        q.episode_id,
                        q.layer,
                        STATUS_ACTOR_FAILED,
                        None,
                        "",
                        "",
                        0.0,
                        q.attempt,
                        type(e).__name__,
                    )
                    for q in call.requests
                ]
            for r in results:
                p = self._episodes.get(r.episode_id)
                if p is None:  # settled or dropped already
                    if r.status == STATUS_OK:
                        self.counters["late_results"] += 1
                    continue
                retry[call.group].extend(self._on_result(p, r))
        for group, reqs in retry.items():
            self._outbox[group].extend(reqs)

    def _check_deadlines(self, now: float) -> None:
        for ref, call in list(self._inflight.items()):
            if now > call.deadline:
                del self._inflight[ref]
                self.counters["abandoned_calls"] += 1
                for q in call.requests:
                    p = self._episodes.get(q.episode_id)
                    if p is not None and q.layer not in p.results:
                        for req in self._on_result(
                            p,
                            ScoreResult(
                                q.episode_id,
                                q.layer,
                                STATUS_TIMEOUT,
                                None,
                                "",
                                "",
                                0.0,
                                q.attempt,
                                "call deadline passed",
                            ),
                        ):
                            self._outbox[call.group].append(req)

    def _resolve_missing(self, now: float, force_hold_retry: bool) -> list[PendingEpisode]:
        """Apply the missing policy to episodes with missing layers; return dropped ones."""
        dropped = []
        for p in list(self._episodes.values()):
            if not p.missing or p.inflight:
                continue
            reason = ",".join(f"{layer}:{st}" for layer, st in sorted(p.missing.items()))
            # Holding only helps where a scorer can be asked again (async mode); blocking modes drop.
            hold = self.cfg.missing_policy == "hold" and self.cfg.mode == "async"
            if hold and p.hold_rounds < self.cfg.max_hold_rounds:
                if p.held_until is None:
                    p.held_until = now + self.cfg.hold_retry_s
                    self.counters["held"] += 1
                    self.reasons[f"held:{reason}"] += 1
                if force_hold_retry or now >= p.held_until:
                    p.hold_rounds += 1
                    p.held_until = None
                    for layer in list(p.missing):
                        p.failures[layer] = 0
                        p.missing.pop(layer)
                        if layer in self.group_of:
                            self._queue(p, layer, 1)
                        else:  # a cheap layer failed: re-score inline
                            self._rescore_sync(p, layer)
                continue
            p.drop_reason = f"{reason}:hold_exhausted" if hold else reason
            dropped.append(p)
        for p in dropped:
            self._drop(p, p.drop_reason)
        return dropped

    def _rescore_sync(self, p: PendingEpisode, name: str) -> None:
        layer = self.sync_layers[name]
        t0 = time.perf_counter()
        try:
            v = np.asarray(layer.score(p.record), dtype=np.float32)
            r = ScoreResult(
                p.episode_id,
                name,
                STATUS_OK,
                v,
                layer.scorer_name,
                layer.scorer_version,
                time.perf_counter() - t0,
                1,
            )
        except Exception as e:
            r = ScoreResult(
                p.episode_id,
                name,
                STATUS_ERROR,
                None,
                layer.scorer_name,
                layer.scorer_version,
                time.perf_counter() - t0,
                1,
                repr(e),
            )
        self._on_result(p, r)

    def _drop(self, p: PendingEpisode, reason: str) -> None:
        del self._episodes[p.episode_id]
        self._wire_cache.pop(p.episode_id, None)
        now = time.time()
        for layer, st in p.missing.items():
            self._events.append(
                {
                    "kind": "settled",
                    "episode_id": p.episode_id,
                    "layer": layer,
                    "status": MISSING,
                    "attempts": p.failures.get(layer, 0),
                    "reason": st,
                }
            )
        self._events.append({"kind": "dropped", "episode_id": p.episode_id, "reason": reason, "t": now})
        self.counters["dropped"] += 1
        self.reasons[f"dropped:{reason}"] += 1

    def _collect_settled(self) -> list[PendingEpisode]:
        done = [p for p in self._episodes.values() if p.settled]
        for p in done:
            del self._episodes[p.episode_id]
            self._wire_cache.pop(p.episode_id, None)
            for layer in p.layers:
                values = p.results[layer].values
                assert values is not None
                scored = values if LAYER_CLASSES[layer].granularity is Granularity.STEP else values[-1:]
                self.normalizer.update(layer, scored)
                self._norm_delta[layer].update(scored)
        self.counters["settled"] += len(done)
        return done

    def poll(
        self, timeout_s: float = 0.0, force_hold_retry: bool = False
    ) -> tuple[list[PendingEpisode], list[PendingEpisode]]:
        """Send queued work, collect finished calls (waiting at most ``timeout_s`` for the first one).

        Returns:
            ``(settled, dropped)``: settled episodes have every layer ``ok`` (normaliser statistics updated);
            dropped ones had a layer missing under the missing policy.
        """
        import ray

        if self._delayed:
            now = time.time()
            due = [d for d in self._delayed if d[0] <= now]
            self._delayed = [d for d in self._delayed if d[0] > now]
            for _, group, req in due:
                self._outbox[group].append(req)
        self._send(force=timeout_s > 0)
        queued = sum(len(v) for v in self._outbox.values())
        if self._inflight:
            ready, _ = ray.wait(list(self._inflight), num_returns=len(self._inflight), timeout=0)
            if not ready and timeout_s > 0:
                ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=timeout_s)
                if ready:
                    ready, _ = ray.wait(list(self._inflight), num_returns=len(self._inflight), timeout=0)
            self._handle_ready(ready)
        elif timeout_s > 0:
            time.sleep(min(timeout_s, 0.05))  # only back-off or held work is waiting
        now = time.time()
        self._check_deadlines(now)
        dropped = self._resolve_missing(now, force_hold_retry)
        # Retries go out at once; fresh submissions respect submit_interval_s.
        self._send(force=sum(len(v) for v in self._outbox.values()) > queued)
        return self._collect_settled(), dropped

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
        """Wait until nothing is pending (held episodes are retried at once), or until ``timeout_s``."""
        deadline = time.perf_counter() + (timeout_s if timeout_s is not None else self.cfg.drain_timeout_s)
        settled: list[PendingEpisode] = []
        dropped: list[PendingEpisode] = []
        while self._episodes and time.perf_counter() < deadline:
            s, d = self.poll(timeout_s=0.1, force_hold_retry=True)
            settled += s
            dropped += d
        return settled, dropped

    # --- ledger and normaliser sync -----------------------------------------------------------------------
    def mark_consumed(self, episode_id: str, policy_version: int) -> None:
        """Record that the learner-facing ``sample()`` returned this episode."""
        self._events.append(
            {"kind": "consumed", "episode_id": episode_id, "policy_version": policy_version, "t": time.time()}
        )

    def mark_dropped(self, episode_id: str, reason: str) -> None:
        """Record that a settled episode will never reach the learner (e.g. shutdown)."""
        self._events.append({"kind": "dropped", "episode_id": episode_id, "reason": reason, "t": time.time()})
        self.counters["dropped"] += 1
        self.reasons[f"dropped:{reason}"] += 1

    def flush_ledger(self, force: bool = False, wait: bool = False) -> None:
        """Send buffered ledger events (one Ray call) and adopt the merged normaliser state when it arrives."""
        import ray

        now = time.time()
        if self._latest_flush is not None:
            ready, _ = ray.wait([self._latest_flush], timeout=0)
            if ready:
                central = ray.get(self._latest_flush)
                self._latest_flush = None
                # Central state already contains every delta sent so far; add the not-yet-sent one.
                self.normalizer.set_state(central)
                for layer, d in self._norm_delta.items():
                    self.normalizer.stats[layer].merge(d.count, d.mean, d.m2)
        if self._events and (force or now - self._last_flush >= self.cfg.ledger_flush_interval_s):
            deltas = {n: (d.count, d.mean, d.m2) for n, d in self._norm_delta.items() if d.count}
            ref: Any = self._ledger.apply.remote(
                f"{self.runner_id}-{uuid.uuid4().hex}-{next(self._flush_seq)}", self._events, deltas
            )
            self._events = []
            self._norm_delta = {n: RunningMeanStd() for n in self.layers}
            self._last_flush = now
            self._latest_flush = ref
            self._ledger_refs.append(ref)
            self._ledger_refs = [r for r in self._ledger_refs if not ray.wait([r], timeout=0)[0]]
        if wait and self._ledger_refs:
            ray.get(self._ledger_refs)
            self._ledger_refs = []
