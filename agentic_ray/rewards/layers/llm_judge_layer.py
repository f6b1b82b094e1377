"""LLM-as-judge: seed 000's rubric (completion, plan, memory, each 0–5) over an OpenAI-compatible HTTP API.

The layer POSTs ``/v1/chat/completions`` and parses JSON from ``choices[0].message.content``. Several episodes
go into one request (``batch_size``), and requests of one batch run concurrently. The value is
``(completion + plan + memory) / 15`` mapped to [−1, 1], episode-level. A timeout, an HTTP error or a malformed
answer raises: the pool records the layer as failed and retries it; nothing is turned into 0.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.judge_service import JUDGE_SYSTEM_PROMPT, episode_summary
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream, episode_level

CRITERIA = ("completion", "plan", "memory")


class JudgeResponseError(RuntimeError):
    """The judge answered, but not with valid rubric JSON for the episodes asked about."""


class LLMJudgeLayer(RewardLayer):
    """Async I/O layer, reward stream, episode-level.

    Args:
        base_url: judge server root (``.../v1/chat/completions`` is appended).
        model: the ``model`` field of the request.
        timeout_s: per HTTP request.
        batch_size: episodes per request.
        api_key: sent as a bearer token when set.
    """

    name = "judge"
    version = "1"
    cost = CostClass.ASYNC_IO
    stream = Stream.REWARD
    granularity = Granularity.EPISODE
    default_weight = 0.1

    def __init__(
        self,
        base_url: str,
        model: str = "rubric-judge",
        timeout_s: float = 5.0,
        batch_size: int = 16,
        api_key: str | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/v1/chat/completions"
        self.model = model
        self.timeout_s = float(timeout_s)
        self.batch_size = int(batch_size)
        self.request_batch_size = self.batch_size
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._aclient: httpx.AsyncClient | None = None
        self._client: httpx.Client | None = None

    @property
    def scorer_version(self) -> str:
        return f"{self.version}/{self.model}"

    def request_body(self, records: Sequence[EpisodeRecord]) -> dict[str, Any]:
        """The chat-completions request for a batch of episodes."""
        return {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": JUDGE_SYSTEM_PROMPT},
                {"role": "user", "content": json.dumps({"episodes": [episode_summary(r) for r in records]})},
            ],
        }

    def parse(self, records: Sequence[EpisodeRecord], response: dict[str, Any]) -> list[np.ndarray]:
        """Turn a chat-completions response into one ``(T,)`` array per record.

        Raises:
            JudgeResponseError: missing fields, wrong episode ids, or a score outside 0–5.
        """
        try:
            scores = json.loads(response["choices"][0]["message"]["content"])["scores"]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise JudgeResponseError(f"unparseable judge response: {e}") from e
        if [s.get("episode_id") for s in scores] != [r.episode_id for r in records]:
            raise JudgeResponseError("judge answered for different episodes than it was asked about")
        out = []
        for r, s in zip(records, scores, strict=True):
            vals = [s.get(c) for c in CRITERIA]
            if not all(isinstance(v, int | float) and 0 <= v <= 5 for v in vals):
                raise JudgeResponseError(f"judge scores out of range for {r.episode_id}: {s}")
            out.append(episode_level(r, 2.0 * sum(vals) / 15.0 - 1.0))
        return out

    def score(self, record: EpisodeRecord) -> np.ndarray:
        return self.score_batch([record])[0]

    def score_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        """Blocking variant (used by the blocking baseline): one request per chunk, sequentially."""
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout_s, headers=self.headers)
        out: list[np.ndarray] = []
        for i in range(0, len(records), self.batch_size):
            chunk = records[i : i + self.batch_size]
            resp = self._client.post(self.url, json=self.request_body(chunk))
            resp.raise_for_status()
            out.extend(self.parse(chunk, resp.json()))
        return out

    async def _ascore_chunk(self, chunk: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        if self._aclient is None:
            self._aclient = httpx.AsyncClient(
                timeout=self.timeout_s,
                headers=self.headers,
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            )
        resp = await self._aclient.post(self.url, json=self.request_body(chunk))
        resp.raise_for_status()
        return self.parse(chunk, resp.json())

    async def ascore_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        """Concurrent requests of ``batch_size`` episodes each; raises if any chunk fails."""
        chunks = [records[i : i + self.batch_size] for i in range(0, len(records), self.batch_size)]
        results = await asyncio.gather(*(self._ascore_chunk(c) for c in chunks))
        return [v for chunk in results for v in chunk]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        self._aclient = None


class InProcessRubricJudge(LLMJudgeLayer):
    """The rubric judge's "model" applied in-process: identical scores, no HTTP and no latency.

    Used only by the ``zero_latency`` reference mode, to measure what the pipeline costs when scorers are free.
    It goes through the same request body and response parser as the HTTP layer.
    """

    def __init__(self, model: str = "rubric-judge", batch_size: int = 16, **_: object) -> None:
        super().__init__(base_url="inproc://", model=model, batch_size=batch_size)

    def score_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        from agentic_ray.rewards.judge_service import rubric_scores

        body = self.request_body(records)
        episodes = json.loads(body["messages"][-1]["content"])["episodes"]
        content = json.dumps({"scores": [rubric_scores(e) for e in episodes]})
        return self.parse(records, {"choices": [{"message": {"content": content}}]})

    async def ascore_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        return self.score_batch(records)
