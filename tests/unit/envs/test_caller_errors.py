"""Injected caller errors (issue 13): each is attributed to its own root cause, and each cause has its own fix."""

from __future__ import annotations

import pytest

from agentic_ray.domains.caller_errors import CALLER_ERROR_CAUSES
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.faults import FaultScheduleConfig, draw_caller_error
from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord

SUPPORTED = {
    "ecommerce": CALLER_ERROR_CAUSES,
    "helpdesk": ("wrong_entity",),  # help-desk tools check no read revision and no max_from limit
}


def _env(domain: str, cause: str) -> AgentTaskEnv:
    return AgentTaskEnv(
        AgentTaskEnvConfig(domain=domain, faults={"caller_error_share": 1.0, "caller_errors": {cause: 1.0}})
    )


def _expert_episode(env: AgentTaskEnv, seed: int) -> EpisodeRecord:
    env.reset(seed=seed)
    ex = env.domain.expert()
    while True:
        _, _, term, trunc, info = env.step(env.encode_action(*ex.plan(env.view())))
        if term or trunc:
            return EpisodeRecord.from_dict(info[EPISODE_RECORD])


def test_causes_are_root_causes_and_drawn_by_weight() -> None:
    import numpy as np

    assert set(CALLER_ERROR_CAUSES) <= set(ROOT_CAUSES)
    cfg = FaultScheduleConfig(caller_error_share=0.5)
    rng = np.random.default_rng(0)
    draws = [draw_caller_error(cfg, rng) for _ in range(600)]
    assert 0.4 < sum(d is not None for d in draws) / 600 < 0.6
    assert {d for d in draws if d} == set(CALLER_ERROR_CAUSES)
    assert draw_caller_error(FaultScheduleConfig(), rng) is None


@pytest.mark.parametrize(("domain", "cause"), [(d, c) for d, cs in SUPPORTED.items() for c in cs])
def test_an_injected_error_is_attributed_to_its_cause_and_the_expert_fixes_it(
    domain: str, cause: str
) -> None:
    env = _env(domain, cause)
    hits = 0
    for seed in range(30):
        rec = _expert_episode(env, seed)
        inj = [s for s in rec.steps if s.caller_error]
        assert len(inj) <= 1
        if inj:
            hits += 1
            s = inj[0]
            assert s.caller_error == cause and s.root_cause == cause and not s.ok and s.injected
            assert rec.completed  # the expert's cause-specific correction recovers
    assert hits >= 3
    env.close()


def test_stale_information_needs_a_re_read_first() -> None:
    """Retrying a call that failed on stale information fails again; after a re-read it succeeds."""
    env = _env("ecommerce", "stale_information")
    ex = env.domain.expert()
    for seed in range(30):
        env.reset(seed=seed)
        while True:
            action = env.encode_action(*ex.plan(env.view()))
            _, _, term, trunc, info = env.step(action)
            if info[STEP_TRACE]["caller_error"] or term or trunc:
                break
        if not info[STEP_TRACE]["caller_error"]:
            continue
        _, _, _, _, again = env.step(action)  # the same call at once
        assert again[STEP_TRACE]["result_code"] == "CONFLICT"
        assert again[STEP_TRACE]["root_cause"] == "stale_information"
        skill, params = ex.plan(env.view())  # the expert re-reads
        assert skill == "order.get"
        env.step(env.encode_action(skill, params))
        _, _, _, _, fixed = env.step(action)
        assert fixed[STEP_TRACE]["result_code"] == "OK"
        return
    pytest.fail("no episode carried a stale read")


def test_no_caller_error_by_default() -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig())
    rec = _expert_episode(env, 0)
    assert not any(s.caller_error for s in rec.steps) and env.caller_error is None
