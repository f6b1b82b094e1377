"""The rubric judge over real HTTP on loopback, its latency, and timeouts that become 'missing', never 0."""

from __future__ import annotations

import asyncio
import time

import httpx
import numpy as np
import pytest

from agentic_ray.rewards.judge_service import JudgeServer
from agentic_ray.rewards.layer_group_scorer import LayerGroupScorer
from agentic_ray.rewards.layers import LLMJudgeLayer
from agentic_ray.rewards.reward_pool_config import LayerConfig, RewardPoolConfig
from agentic_ray.rewards.score_messages import STATUS_OK, STATUS_TIMEOUT, ScoreRequest
from agentic_ray.rollout.reward_aware_env_runner import BlockingRewardWrapper

from .records import five_step_record


@pytest.fixture(scope="module")
def judge():
    with JudgeServer(latency_ms=0.0, mode="thread") as srv:
        yield srv


def test_chat_completions_protocol(judge):
    layer = LLMJudgeLayer(judge.base_url)
    rec = five_step_record()
    resp = httpx.post(f"{judge.base_url}/v1/chat/completions", json=layer.request_body([rec]), timeout=5)
    assert resp.status_code == 200
    content = resp.json()["choices"][0]["message"]["content"]
    assert content == '{"scores": [{"episode_id": "ep-1", "completion": 5, "plan": 4, "memory": 3}]}'
    bad = httpx.post(f"{judge.base_url}/v1/chat/completions", json={"messages": []}, timeout=5)
    assert bad.status_code == 400


def test_layer_scores_over_http_sync_and_async(judge):
    layer = LLMJudgeLayer(judge.base_url, batch_size=2)
    recs = [
        five_step_record(episode_id=f"e{i}", completed=i % 2 == 0, goals_done_order=["a", "b"])
        for i in range(5)
    ]
    sync = layer.score_batch(recs)
    # completed: (5+4+3)/15*2-1 = 0.6 ; not completed, 2 of 3 goals: (2+4+3)/15*2-1 = 0.2
    np.testing.assert_allclose([v[-1] for v in sync], [0.6, 0.2, 0.6, 0.2, 0.6], rtol=1e-6)
    asyn = asyncio.run(layer.ascore_batch(recs))
    np.testing.assert_allclose(np.stack(asyn), np.stack(sync))


def test_latency_is_configurable(judge):
    layer = LLMJudgeLayer(judge.base_url)
    judge.set_latency(300)
    try:
        t0 = time.perf_counter()
        layer.score_batch([five_step_record()])
        assert time.perf_counter() - t0 >= 0.3
    finally:
        judge.set_latency(0)


def test_timeout_is_a_failed_attempt_not_a_zero(judge):
    judge.set_latency(600)
    try:
        layer = LLMJudgeLayer(judge.base_url, timeout_s=5.0)
        scorer = LayerGroupScorer({"judge": layer}, {"judge": 0.1})
        res = asyncio.run(scorer.ascore([ScoreRequest("e1", "judge", five_step_record(), 1)]))
        assert [(r.status, r.values) for r in res] == [(STATUS_TIMEOUT, None)]
        # the scorer spends the layer's retries itself (tenacity), each attempt under the timeout
        retrying = LayerGroupScorer({"judge": layer}, {"judge": 0.1}, {"judge": 2})
        t0 = time.perf_counter()
        res = asyncio.run(retrying.ascore([ScoreRequest("e1", "judge", five_step_record(), 1)]))
        assert [(r.status, r.attempt) for r in res] == [(STATUS_TIMEOUT, 3)]
        assert retrying.failed_attempts == 2 and time.perf_counter() - t0 >= 0.3
        # the blocking baseline spends the layer's retries, then reports the timeout, again without a value
        cfg = RewardPoolConfig(
            layers={"execution": LayerConfig(), "judge": LayerConfig(timeout_s=0.1, retries=1)}
        )
        import gymnasium as gym

        wrapper = BlockingRewardWrapper(gym.make("CartPole-v1"), cfg, judge.base_url)
        results = {r.layer: r for r in wrapper.score_record(five_step_record())}
        assert results["judge"].status == STATUS_TIMEOUT and results["judge"].values is None
        assert results["judge"].attempt == 2
        assert results["execution"].status == STATUS_OK
    finally:
        judge.set_latency(0)


def test_idempotent_cache_per_episode_and_layer(judge):
    scorer = LayerGroupScorer({"judge": LLMJudgeLayer(judge.base_url)}, {"judge": 5.0})
    req = ScoreRequest("e1", "judge", five_step_record(), 1)
    first = asyncio.run(scorer.ascore([req]))
    again = asyncio.run(scorer.ascore([ScoreRequest("e1", "judge", five_step_record(), 2)]))
    assert scorer.scored == 1 and scorer.cache_hits == 1
    np.testing.assert_array_equal(first[0].values, again[0].values)
    assert again[0].attempt == 2


def test_a_retry_that_succeeds_settles_with_its_attempt_count(judge):
    """A judge that is slow for the first attempt only: the second attempt (still inside the scorer) succeeds."""
    judge.set_latency(3000)
    layer = LLMJudgeLayer(judge.base_url, timeout_s=5.0)
    scorer = LayerGroupScorer({"judge": layer}, {"judge": 1.0}, {"judge": 1})

    async def run():
        task = asyncio.create_task(scorer.ascore([ScoreRequest("e1", "judge", five_step_record(), 1)]))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(judge.set_latency, 0)
        return await task

    try:
        res = asyncio.run(run())
    finally:
        judge.set_latency(0)
    assert [(r.status, r.attempt) for r in res] == [(STATUS_OK, 2)]
    assert res[0].values is not None and res[0].values.shape == (5,)
