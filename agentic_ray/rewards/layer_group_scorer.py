"""The plain scorer of one group of reward layers (no Ray): batching, per-attempt timeouts, retries, a result cache.

:class:`LayerGroupScorer` answers a batch of :class:`ScoreRequest` with one :class:`ScoreResult` per request. It
groups requests by layer into chunks of the layer's ``request_batch_size`` (the judge takes 16 episodes per HTTP
request), runs the chunks concurrently on the async path, and retries a failed or timed-out chunk up to the layer's
``retries`` budget with tenacity. A successful result is cached under ``(episode_id, layer)``, so a request that
comes again (Ray re-ran the call after the actor restarted, or the client held the episode and asked again) is
answered without scoring twice.

Why the retries are here (tenacity, per chunk) and not Ray's ``retry_exceptions``: a raised exception fails the
whole actor call, so Ray would re-run every chunk of every layer in it because one judge request timed out, and the
attempt count that goes into the ledger would be lost. Ray's own retries (``max_task_retries``) are for what only
Ray can see: the actor or its node died.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, defaultdict
from collections.abc import Sequence

import httpx
import numpy as np
from tenacity import AsyncRetrying, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity.stop import stop_base

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers import LAYER_CLASSES, CostClass, RewardLayer, build_layer
from agentic_ray.rewards.layers.llm_judge_layer import InProcessRubricJudge
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig
from agentic_ray.rewards.score_messages import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_TIMEOUT,
    ScoreRequest,
    ScoreResult,
)

_TIMEOUTS = (asyncio.TimeoutError, TimeoutError, httpx.TimeoutException)


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


def score_inline(
    layer: RewardLayer, name: str, episode_id: str, record: EpisodeRecord, attempt: int
) -> ScoreResult:
    """One synchronous attempt of one layer: its values, or the failure (never a made-up value)."""
    t0 = time.perf_counter()
    try:
        v = np.asarray(layer.score(record), dtype=np.float32)
        return ScoreResult(
            episode_id,
            name,
            STATUS_OK,
            v,
            layer.scorer_name,
            layer.scorer_version,
            time.perf_counter() - t0,
            attempt,
        )
    except Exception as e:
        status = STATUS_TIMEOUT if isinstance(e, _TIMEOUTS) else STATUS_ERROR
        return ScoreResult(
            episode_id,
            name,
            status,
            None,
            layer.scorer_name,
            layer.scorer_version,
            time.perf_counter() - t0,
            attempt,
            repr(e),
        )


class LayerGroupScorer:
    """Plain scorer for one group of layers. Unit-testable without Ray.

    Args:
        layers: layer name → layer.
        timeouts: layer name → seconds per attempt (async path; enforced with ``asyncio.wait_for``).
        retries: layer name → extra attempts after a failed or timed-out one (default 0).
        cache_size: successful results remembered per (episode id, layer).
    """

    def __init__(
        self,
        layers: dict[str, RewardLayer],
        timeouts: dict[str, float],
        retries: dict[str, int] | None = None,
        cache_size: int = 50_000,
    ) -> None:
        self.layers = layers
        self.timeouts = timeouts
        self.retries = dict(retries or {})
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], ScoreResult] = OrderedDict()
        self.scored = 0
        self.cache_hits = 0
        self.failed_attempts = 0

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
        attempts: int,
        error: str = "",
    ) -> list[tuple[int, ScoreResult]]:
        layer = self.layers[requests[idx[0]].layer]
        res = []
        for k, i in enumerate(idx):
            r = requests[i]
            v: np.ndarray | None = None
            st, err = status, error
            if values is not None:
                arr = np.asarray(values[k], dtype=np.float32)
                if arr.shape == (r.record.num_steps,):
                    v = arr
                else:
                    st, err = (
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
                r.attempt + attempts - 1,
                err,
            )
            if st == STATUS_OK:
                self._cache[(r.episode_id, r.layer)] = sr
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
                self.scored += 1
            res.append((i, sr))
        return res

    def _stop(self, layer: str) -> stop_base:
        return stop_after_attempt(1 + max(0, int(self.retries.get(layer, 0))))

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Score synchronously (CPU-bound layers): one ``score_batch`` call per chunk and attempt."""
        out, chunks = self._split(requests)
        for idx in chunks:
            name = requests[idx[0]].layer
            layer = self.layers[name]
            t0 = time.perf_counter()
            attempts = 0
            try:
                for attempt in Retrying(
                    stop=self._stop(name), retry=retry_if_exception_type(Exception), reraise=True
                ):
                    with attempt:
                        attempts = attempt.retry_state.attempt_number
                        if attempts > 1:
                            self.failed_attempts += 1
                        vals = layer.score_batch([requests[i].record for i in idx])
                pairs = self._results(requests, idx, vals, STATUS_OK, time.perf_counter() - t0, attempts)
            except Exception as e:
                st = STATUS_TIMEOUT if isinstance(e, _TIMEOUTS) else STATUS_ERROR
                pairs = self._results(requests, idx, None, st, time.perf_counter() - t0, attempts, repr(e))
            for i, sr in pairs:
                out[i] = sr
        return [r for r in out if r is not None]

    async def ascore(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Score concurrently (I/O-bound layers): all chunks in flight at once, each attempt under its timeout."""
        out, chunks = self._split(requests)

        async def run(idx: list[int]) -> list[tuple[int, ScoreResult]]:
            name = requests[idx[0]].layer
            t0 = time.perf_counter()
            attempts = 0
            try:
                async for attempt in AsyncRetrying(
                    stop=self._stop(name), retry=retry_if_exception_type(Exception), reraise=True
                ):
                    with attempt:
                        attempts = attempt.retry_state.attempt_number
                        if attempts > 1:
                            self.failed_attempts += 1
                        vals = await asyncio.wait_for(
                            self.layers[name].ascore_batch([requests[i].record for i in idx]),
                            self.timeouts[name],
                        )
                return self._results(requests, idx, vals, STATUS_OK, time.perf_counter() - t0, attempts)
            except Exception as e:
                st = STATUS_TIMEOUT if isinstance(e, _TIMEOUTS) else STATUS_ERROR
                return self._results(requests, idx, None, st, time.perf_counter() - t0, attempts, repr(e))

        for pairs in await asyncio.gather(*(run(idx) for idx in chunks)):
            for i, sr in pairs:
                out[i] = sr
        return [r for r in out if r is not None]
