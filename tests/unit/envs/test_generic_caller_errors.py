"""Generic caller errors derived from the contracts (issue 26, point 9): a domain that writes no caller-error hooks
(the plug-in test domain) still gets a wrong entity, a stale entity and a parameter past its bound, each
persisting until its own fix; a domain's own hooks refine them, handing a cause back with ``GENERIC``."""

from __future__ import annotations

from typing import Any

import agentic_ray.domains as registry
from agentic_ray.domains.caller_errors import GENERIC, readers, resolvable_types
from agentic_ray.domains.protocol import CallerErrorRefinement, Domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import STEP_TRACE
from tests.helpers.plugin_domain import NAME, register
from tests.plugin_domain import RetailDomain


def _env(cause: str, family: str, domain: str = NAME) -> AgentTaskEnv:
    register()
    return AgentTaskEnv(
        AgentTaskEnvConfig(
            domain=domain,
            families=[family],
            faults={"caller_error_share": 1.0, "caller_errors": {cause: 1.0}},
        )
    )


def _step(env: AgentTaskEnv, skill: str, **params: Any) -> dict[str, Any]:
    return env.step(env.encode_action(skill, params))[4][STEP_TRACE]


def _expert(env: AgentTaskEnv) -> dict[str, Any]:
    return env.step(env.encode_action(*env.domain.expert().plan(env.view())))[4][STEP_TRACE]


def test_the_plugin_defines_no_hooks_and_its_contracts_say_what_is_resolvable() -> None:
    register()
    d = RetailDomain()
    assert isinstance(d, Domain) and not isinstance(d, CallerErrorRefinement)
    dc = d.contracts()
    assert resolvable_types(dc) == {"customer", "payment_method", "order", "item"}
    rd = readers(dc)
    assert rd["get_order"] == {"order", "customer", "item"} and rd["refund_item"] == {"payment_method"}
    assert rd["cancel_order"] == {"order"} and rd["transfer_to_human"] == frozenset()


def test_a_stale_entity_conflicts_until_it_is_read_again() -> None:
    env = _env("stale_information", "refund_item")
    env.reset(seed=1)
    assert env.caller_error == "stale_information"
    _expert(env)
    _expert(env)  # find the customer, read the order
    g = env.task.goals[0]
    call = {**g.args, **g.numeric}
    first = _step(env, "refund_item", **call)
    assert first["caller_error"] == "stale_information" and first["result_code"] == "CONFLICT"
    again = _step(env, "refund_item", **call)  # a plain retry meets the same conflict
    assert again["result_code"] == "CONFLICT" and again["root_cause"] == "stale_information"
    assert not again["caller_error"]  # injected once; it persists on its own
    assert _step(env, "get_order", order_id=g.args["order_id"])["result_code"] == "OK"
    fixed = _step(env, "refund_item", **call)
    assert fixed["result_code"] == "OK" and fixed["goals_satisfied"] == ["refund"]


def test_a_parameter_past_its_bound_is_sent_above_the_revealed_limit() -> None:
    env = _env("bad_parameters", "refund_item")
    env.reset(seed=2)
    _expert(env)
    _expert(env)
    g = env.task.goals[0]
    price = env.knowledge.fields("item", g.args["item_id"])["price"]
    bad = _expert(env)
    assert bad["caller_error"] == "bad_parameters" and bad["result_code"] == "INVALID_INPUT"
    assert bad["args"]["amount"] > price and bad["root_cause"] == "bad_parameters"
    assert _expert(env)["result_code"] == "OK"  # the expert's call at the limit


def test_a_wrong_entity_is_a_lookalike_of_the_right_type_until_re_resolved() -> None:
    env = _env("wrong_entity", "cancel_order")
    for seed in range(10):
        env.reset(seed=seed)
        trace = _expert(env)
        while not trace["caller_error"]:
            trace = _expert(env)
        (typ, real), fake = next(iter(env.misheld.items()))
        assert fake.startswith(real) and fake not in env.domain.entity_ids(env.world, typ)
        assert trace["root_cause"] == "wrong_entity" and trace["result_code"] in (
            "NOT_FOUND",
            "PRECONDITION_FAILED",
        )
        fix = _expert(env)  # the lookup that lists entities of that type
        assert fix["result_code"] == "OK" and env.misheld == {}
        return
    raise AssertionError("no wrong entity injected")


class _Refined(RetailDomain):
    """A domain that refines one cause (no bad parameters: ``None``) and leaves the rest to the generic form."""

    name = "retail_refined"

    def caller_error(self, world, task, skill, params, cause, rng) -> Any:
        return None if cause == "bad_parameters" else GENERIC

    def caller_error_setup(self, world, task, cause, rng) -> Any:
        return GENERIC


def test_a_domain_hook_refines_the_generic_errors() -> None:
    d = _Refined()
    registry.register_domain(d.name, lambda: d)
    try:
        _refines(d)
    finally:
        registry._REGISTRY.pop(d.name, None)
        registry._LOADED.pop(d.name, None)


def _refines(d: _Refined) -> None:
    assert isinstance(d, CallerErrorRefinement)
    env = _env("bad_parameters", "refund_item", domain=d.name)
    env.reset(seed=2)
    assert env.caller_error == "bad_parameters"  # the generic set-up accepted the task
    codes = []
    while True:
        _obs, _r, term, trunc, info = env.step(env.encode_action(*d.expert().plan(env.view())))
        codes.append(info[STEP_TRACE]["result_code"])
        assert not info[STEP_TRACE]["caller_error"]  # the domain's hook refused every call
        if term or trunc:
            break
    assert codes == ["OK", "OK", "OK"] and env.caller_error == "bad_parameters"
    env = _env("stale_information", "refund_item", domain=d.name)
    env.reset(seed=1)
    for _ in range(3):
        trace = _expert(env)
    assert trace["caller_error"] == "stale_information" and trace["result_code"] == "CONFLICT"
