"""Explicit ends (issue 26, point 10): a task with no goal must declare how it ends, or it is refused; with a
declared end only that call completes the task (an empty goal DAG no longer completes after any first step)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import agentic_ray.domains as registry
from agentic_ray.domains.protocol import Request, Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from tests.helpers.plugin_domain import register
from tests.plugin_domain import RetailDomain


def _env(family: str, domain: str | None = None) -> AgentTaskEnv:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain or register(), families=[family]))
    env.reset(seed=0, options={"task_seed": 4})
    return env


def _step(env: AgentTaskEnv, skill: str, **params: Any) -> tuple[bool, dict[str, Any]]:
    _o, _r, term, trunc, info = env.step(env.encode_action(skill, params))
    return term or trunc, info


def test_a_task_without_goals_or_end_is_refused() -> None:
    with pytest.raises(ValueError, match="no goal and declares no end"):
        Task("f", 1, Request("hi"), (), 1)
    assert Task("f", 1, Request("hi"), (), 1, end_skill="close_case").end_skill == "close_case"


def test_no_change_ends_only_with_its_declared_end() -> None:
    env = _env("no_change")
    assert env.task is not None and env.task.goals == () and env.task.end_skill == "close_case"
    done, info = _step(env, "find_customer_by_email", email=env.task.request.facts["email"])
    assert not done  # an empty DAG used to complete here
    cid = env.world.customer.id
    done, info = _step(env, "close_case", customer_id=cid, outcome="not_cancellable")
    rec = info[EPISODE_RECORD]
    assert done and rec["completed"] and len(rec["steps"]) == env.task.optimal_steps
    env = _env("no_change")  # the wrong answer: the end is reached, the final check fails
    _step(env, "find_customer_by_email", email=env.task.request.facts["email"])
    done, info = _step(env, "close_case", customer_id=cid, outcome="resolved")
    assert done and info[EPISODE_RECORD]["failed"] and not info[EPISODE_RECORD]["completed"]
    env = _env("no_change")  # another terminal skill ends it as a failure
    done, info = _step(env, "transfer_to_human", reason="other")
    assert done and info[EPISODE_RECORD]["failed"]


class _EndsWithClose(RetailDomain):
    """Cancellations that must also tell the customer: the goal, then the declared end."""

    name = "retail_ends"

    def make_task(self, family: str, seed: int, options: Any = None) -> Any:
        world, task = super().make_task(family, seed, options)
        return world, dataclasses.replace(task, end_skill="close_case", optimal_steps=task.optimal_steps + 1)


def test_with_goals_the_declared_end_completes_once_they_are_done() -> None:
    d = _EndsWithClose()
    registry.register_domain(d.name, lambda: d)
    try:
        env = _env("cancel_order", d.name)
        assert env.task is not None
        g = env.task.goals[0]
        _step(env, "find_customer_by_email", email=env.task.request.facts["email"])
        done, info = _step(env, "close_case", customer_id=g.args["customer_id"], outcome="resolved")
        assert done and info[EPISODE_RECORD]["failed"]  # the end with the goal pending: a failure
        env = _env("cancel_order", d.name)
        _step(env, "find_customer_by_email", email=env.task.request.facts["email"])
        _step(env, "list_orders", customer_id=g.args["customer_id"])
        done, info = _step(env, "cancel_order", **g.args)
        assert info[STEP_TRACE]["goals_satisfied"] == ["cancel"] and not done  # every goal done, not ended
        done, info = _step(env, "close_case", customer_id=g.args["customer_id"], outcome="resolved")
        assert done and info[EPISODE_RECORD]["completed"]
    finally:
        registry._REGISTRY.pop(d.name, None)
        registry._LOADED.pop(d.name, None)


def test_an_end_that_is_no_skill_is_refused_at_reset() -> None:
    class _Typo(RetailDomain):
        name = "retail_typo"

        def make_task(self, family: str, seed: int, options: Any = None) -> Any:
            world, task = super().make_task(family, seed, options)
            return world, dataclasses.replace(task, end_skill="close_the_case")

    d = _Typo()
    registry.register_domain(d.name, lambda: d)
    try:
        env = AgentTaskEnv(AgentTaskEnvConfig(domain=d.name))
        with pytest.raises(ValueError, match="ends with 'close_the_case', which is not a skill"):
            env.reset(seed=0)
    finally:
        registry._REGISTRY.pop(d.name, None)
        registry._LOADED.pop(d.name, None)


class _GoalsEnd(RetailDomain):
    """``no_change`` judged on its (empty) goal DAG instead of the final world: only the declared end decides."""

    name = "retail_goals_end"

    def make_task(self, family: str, seed: int, options: Any = None) -> Any:
        world, task = super().make_task(family, seed, options)
        return world, dataclasses.replace(task, end="goals")


def test_an_empty_goal_dag_does_not_complete_after_the_first_step() -> None:
    d = _GoalsEnd()
    registry.register_domain(d.name, lambda: d)
    try:
        env = _env("no_change", d.name)
        assert env.task is not None and env.task.end == "goals" and not env.task.goals
        done, _ = _step(env, "find_customer_by_email", email=env.task.request.facts["email"])
        assert not done
        done, info = _step(env, "close_case", customer_id=env.world.customer.id, outcome="resolved")
        assert done and info[EPISODE_RECORD]["completed"]
    finally:
        registry._REGISTRY.pop(d.name, None)
        registry._LOADED.pop(d.name, None)
