"""Failure evidence (the reflection module's input): agent-observable, distinct per injected cause, zeros after a
success, and the same when Serve rebuilds it from a transcript."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.domains.caller_errors import INJECTED_CAUSES
from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.failure_evidence import failure_evidence
from agentic_ray.envs.transcript import TranscriptCall, TranscriptState
from agentic_ray.graph_spec import EVIDENCE_FLAGS, FAILURE_CODE_CLASSES, evidence_width
from agentic_ray.keys import STEP_TRACE

FLAG = {f: i for i, f in enumerate(EVIDENCE_FLAGS)}
CLASS = {codes[0]: len(EVIDENCE_FLAGS) + j for j, codes in enumerate(FAILURE_CODE_CLASSES)}
AVAILABILITY = CLASS["TOOL_TIMEOUT"]


def _env(cause: str) -> AgentTaskEnv:
    return AgentTaskEnv(
        AgentTaskEnvConfig(
            drift=False,
            families=["quality_refund"] if cause == "bad_parameters" else None,
            faults={"caller_error_share": 1.0, "caller_errors": {cause: 1.0}},
        )
    )


def test_a_success_has_no_evidence_and_a_failure_names_its_code_and_skill() -> None:
    env = AgentTaskEnv()
    env.reset(seed=0)
    c = env.by_name["order.get"]
    k = Knowledge(env.domain.schema.type_names)
    k.reveal("order", "O1", {"total": 10.0})
    assert not failure_evidence(len(env.skills), 3, c, {"order_id": "O1"}, "OK", k).any()
    ev = failure_evidence(len(env.skills), 3, c, {"order_id": "O1"}, "UPSTREAM_ERROR", k)
    assert ev.shape == (evidence_width(len(env.skills)),)
    assert (
        ev[FLAG["failed"]] == ev[AVAILABILITY] == ev[len(EVIDENCE_FLAGS) + len(FAILURE_CODE_CLASSES) + 3] == 1
    )
    assert ev.sum() == 3  # the order was looked up and is known: no other flag
    ev = failure_evidence(len(env.skills), 3, c, {"order_id": "O17"}, "NOT_FOUND", k)
    assert ev[FLAG["unknown_entity"]] == ev[FLAG["entity_unread"]] == ev[CLASS["NOT_FOUND"]] == 1


@pytest.mark.parametrize("cause", INJECTED_CAUSES)
def test_each_injected_cause_leaves_its_own_evidence(cause: str) -> None:
    """What tells the causes apart is what the caller saw: the code class, an id it never learned, a value above
    the limit it had read. The env's hidden state (a bumped revision, the look-alike map) is not in it."""
    env = _env(cause)
    expert = env.domain.expert()
    seen = 0
    for seed in range(20):
        obs, _ = env.reset(seed=seed)
        while True:
            obs, _, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            if info[STEP_TRACE]["caller_error"] or term or trunc:
                break
        if not info[STEP_TRACE]["caller_error"]:
            continue
        seen += 1
        ev = obs["failure_evidence"]
        assert ev[FLAG["failed"]] == 1
        if cause == "wrong_entity":
            assert ev[FLAG["unknown_entity"]] == 1
            assert ev[CLASS["NOT_FOUND"]] == 1 or ev[CLASS["PRECONDITION_FAILED"]] == 1
        else:
            assert ev[FLAG["unknown_entity"]] == 0
        if cause == "stale_information":
            assert ev[CLASS["CONFLICT"]] == 1
        if cause == "bad_parameters":
            assert ev[CLASS["INVALID_INPUT"]] == 1 and ev[FLAG["above_known_limit"]] == 1
        if cause == "tool_error":
            assert ev[AVAILABILITY] == 1
        # the next success clears it
        obs, *_ = env.step(env.encode_action(*expert.plan(env.view())))
        assert not obs["failure_evidence"].any()
        if seen == 3:
            break
    assert seen == 3
    env.close()


@pytest.mark.parametrize("cause", INJECTED_CAUSES)
def test_serve_rebuilds_the_same_evidence_from_the_transcript(cause: str) -> None:
    """Training and serving share the observation code: the transcript (call, result code, payload) is enough."""
    env = _env(cause)
    server_env = AgentTaskEnv(AgentTaskEnvConfig())
    expert = env.domain.expert()
    failures = 0
    for seed in range(6):
        env.reset(seed=seed)
        calls: list[TranscriptCall] = []
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            t = info[STEP_TRACE]
            payload = env.state.history[-1].payload if t["result_code"] == "OK" else {}
            calls.append(TranscriptCall(t["skill"], t["args"], t["result_code"], payload, t["fallback_used"]))
            replay = TranscriptState(server_env, env.task, calls, budget=env.state.budget)
            robs, _ = replay.observation()
            np.testing.assert_array_equal(robs["failure_evidence"], obs["failure_evidence"])
            failures += int(obs["failure_evidence"].any())
            done = term or trunc
    assert failures >= 1
    env.close()
