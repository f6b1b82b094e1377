"""AgentTaskEnv against a real local skill server (``agentic-ray skills serve``) through HttpBackend."""

from __future__ import annotations

import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.skills.server import skill_server_process


@pytest.fixture(scope="module")
def server_url():
    with skill_server_process(["--domain", "ecommerce"]) as url:
        yield url


def test_expert_solves_tasks_over_http(server_url: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(backend="http", http_url=server_url))
    expert = env.domain.expert()
    for family in ("quality_refund", "wrong_item_exchange"):
        env.reset(seed=3, options={"family": family})
        done, steps = False, 0
        while not done:
            _, _, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            assert info[STEP_TRACE]["result_code"] == "OK"
            steps += 1
            done = term or trunc
        rec = info[EPISODE_RECORD]
        assert rec["completed"] and steps == rec["optimal_steps"]
        if family == "quality_refund":  # the refund happened on the server and came back with the world
            oid = next(g for g in env.task.goals if g.skill == "refund.trigger").args["order_id"]
            assert env.world.order(oid).refunded > 0  # type: ignore[union-attr]
            assert env.backend.get_world(env.world_id).order(oid).refunded == env.world.order(oid).refunded
    env.close()
