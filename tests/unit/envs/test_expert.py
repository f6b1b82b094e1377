"""ScriptedExpert corrections and the env's root cause of a failed call: the correction depends on the cause."""

from __future__ import annotations

import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig, FaultScheduleConfig
from agentic_ray.envs.expert import ScriptedExpert
from agentic_ray.envs.graph_spec import ROOT_CAUSES
from agentic_ray.keys import STEP_TRACE

# logistics_exception, env seed 0: goals order.get -> express.contact(trace) -> waybill -> sms on ORDER; OTHER is
# one of the world's orders that the customer never mentioned.
ORDER, OTHER = "O7344540", "O7923911"


def _cause(env: AgentTaskEnv) -> str | None:
    assert env.state is not None
    return ROOT_CAUSES[int(env.state.reflection.argmax())] if env.state.reflection.any() else None


def _after_wrong_contact(params: dict) -> tuple[AgentTaskEnv, ScriptedExpert, str]:
    env, expert = AgentTaskEnv(), ScriptedExpert()
    env.reset(seed=0, options={"family": "logistics_exception"})
    assert env.task is not None and env.task.entities == ("U80143", ORDER)
    env.step(expert.act(env))  # order.get, the first goal
    _, _, _, _, info = env.step(env.encode_action("express.contact", params))
    return env, expert, info[STEP_TRACE]["result_code"]


def test_wrong_enum_on_the_requested_entity_is_bad_parameters_and_the_expert_rereads_first() -> None:
    env, expert, code = _after_wrong_contact({"order_id": ORDER, "action": "return_pickup"})
    # An enum value is a string but not an entity: before the fix this was labelled forgotten_entity.
    assert code == "CONFLICT" and _cause(env) == "bad_parameters"
    assert expert.plan(env) == ("order.get", {"order_id": ORDER})  # the minimal experiment
    env.step(expert.act(env))
    assert expert.plan(env) == ("express.contact", {"order_id": ORDER, "action": "trace"})


def test_unmentioned_entity_is_forgotten_entity_and_the_expert_calls_the_requested_one() -> None:
    env, expert, code = _after_wrong_contact({"order_id": OTHER, "action": "trace"})
    assert code == "CONFLICT" and _cause(env) == "forgotten_entity"
    assert expert.plan(env) == ("express.contact", {"order_id": ORDER, "action": "trace"})


def test_tool_error_is_retried_as_is() -> None:
    faults = FaultScheduleConfig(
        enabled=True, start_share=1.0, end_share=1.0, kinds={"garbage": 1.0}, garbage_rate=1.0
    )
    env, expert = AgentTaskEnv(AgentTaskEnvConfig(faults=faults)), ScriptedExpert()
    env.reset(seed=0, options={"family": "address_error"})
    call = expert.plan(env)
    assert call[0] == "user.verify"  # no fallback: a garbled reply is a failed call
    _, _, _, _, info = env.step(expert.act(env))
    assert info[STEP_TRACE]["result_code"] == "INVALID_OUTPUT" and _cause(env) == "tool_timeout"
    assert expert.plan(env) == call


@pytest.mark.parametrize("params", [{"order_id": ORDER, "action": "return_pickup"}, {"order_id": OTHER}])
def test_expert_still_completes_after_a_caller_error(params: dict) -> None:
    env, expert, _ = _after_wrong_contact({"action": "trace", **params})
    done = term = False
    while not done:
        _, _, term, trunc, _ = env.step(expert.act(env))
        done = term or trunc
    assert term and env.state is not None and env.state.goal_done.all()
