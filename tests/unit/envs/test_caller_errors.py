"""Injected caller errors (issue 13): each is attributed to its own root cause, each persists, and each has exactly
one fix (the others fail), so a policy that does not know the cause cannot fix most of them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agentic_ray.domains.caller_errors import CALLER_ERROR_CAUSES, INJECTED_CAUSES
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.faults import FaultScheduleConfig, draw_caller_error
from agentic_ray.eval.correction import FIX_STEPS, first_failure, fixed
from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord
from tests.helpers.plugin_domain import NAME as PLUGIN
from tests.helpers.plugin_domain import register

SUPPORTED = {
    "ecommerce": INJECTED_CAUSES,
    # help-desk tools check no read revision and no contract sets a max_from limit
    "helpdesk": ("wrong_entity", "tool_error"),
    # the plug-in test domain defines no caller-error hooks: every cause is the generic, contract-derived one
    PLUGIN: INJECTED_CAUSES,
}


def _env(domain: str, cause: str, **kw: Any) -> AgentTaskEnv:
    register()
    return AgentTaskEnv(
        AgentTaskEnvConfig(
            domain=domain, faults={"caller_error_share": 1.0, "caller_errors": {cause: 1.0}}, **kw
        )
    )


def _expert_episode(env: AgentTaskEnv, seed: int) -> EpisodeRecord:
    env.reset(seed=seed)
    ex = env.domain.expert()
    while True:
        _, _, term, trunc, info = env.step(env.encode_action(*ex.plan(env.view())))
        if term or trunc:
            return EpisodeRecord.from_dict(info[EPISODE_RECORD])


def test_causes_are_root_causes_and_drawn_by_weight() -> None:
    assert set(INJECTED_CAUSES) <= set(ROOT_CAUSES) and set(CALLER_ERROR_CAUSES) < set(INJECTED_CAUSES)
    cfg = FaultScheduleConfig(caller_error_share=0.5)
    rng = np.random.default_rng(0)
    draws = [draw_caller_error(cfg, rng) for _ in range(600)]
    assert 0.4 < sum(d is not None for d in draws) / 600 < 0.6
    assert {d for d in draws if d} == set(CALLER_ERROR_CAUSES)  # the control only when asked for
    cfg = FaultScheduleConfig(caller_error_share=1.0, caller_errors=dict.fromkeys(INJECTED_CAUSES, 1.0))
    assert {draw_caller_error(cfg, rng) for _ in range(200)} == set(INJECTED_CAUSES)
    assert draw_caller_error(FaultScheduleConfig(), rng) is None


@pytest.mark.parametrize(("domain", "cause"), [(d, c) for d, cs in SUPPORTED.items() for c in cs])
def test_an_injected_error_is_attributed_to_its_cause_and_the_expert_fixes_it(
    domain: str, cause: str
) -> None:
    env = _env(domain, cause)
    hits = 0
    for seed in range(40):
        rec = _expert_episode(env, seed)
        inj = [i for i, s in enumerate(rec.steps) if s.caller_error]
        assert len(inj) <= 1
        if inj:
            hits += 1
            s = rec.steps[inj[0]]
            assert s.caller_error == cause and s.root_cause == cause and not s.ok and s.injected
            assert first_failure(rec) == inj[0] and fixed(rec, inj[0])  # the expert's next call(s): the fix
            assert rec.completed
    assert hits >= 3
    env.close()


def _to_injection(env: AgentTaskEnv, seed: int) -> tuple[list[Any], dict[str, Any]] | None:
    """Expert actions up to and including the one the env made wrong, and that step's trace (None: no injection)."""
    env.reset(seed=seed)
    ex = env.domain.expert()
    actions = []
    while True:
        actions.append(env.encode_action(*ex.plan(env.view())))
        _, _, term, trunc, info = env.step(actions[-1])
        if info[STEP_TRACE]["caller_error"]:
            return actions, info[STEP_TRACE]
        if term or trunc:
            return None


def _strategies(env: AgentTaskEnv, intended: Any, trace: dict[str, Any]) -> dict[str, list[Any]]:
    """What a caller who does not know the cause could do next (e-commerce): each ends with the failed call."""
    assert env.knowledge is not None
    k = env.knowledge
    meant = {v: real for (_t, real), v in env.misheld.items()}.get(trace["args"]["order_id"])
    order = meant or trace["args"]["order_id"]
    out = {
        "retry": [intended],
        "reread": [env.encode_action("order.get", {"order_id": order}), intended],
        "resolve": [env.encode_action("order.list", {"user_id": k.ids("user")[0]}), intended],
    }
    if (
        trace["skill"] == "refund.trigger"
    ):  # the value a refund usually copies (the item's price) vs the limit
        price = k.fields("product", trace["args"]["sku"])["price"]
        total = k.fields("order", order)["total"]
        args = {**trace["args"], "order_id": order}
        out["retry"] = [env.encode_action("refund.trigger", {**args, "amount": price})]
        out["cap"] = [env.encode_action("refund.trigger", {**args, "amount": total})]
    return out


FIX = {
    "tool_error": "retry",
    "stale_information": "reread",
    "wrong_entity": "resolve",
    "bad_parameters": "cap",
}


@pytest.mark.parametrize("cause", INJECTED_CAUSES)
def test_each_cause_has_its_own_fix_and_only_that(cause: str) -> None:
    """Replays the expert to the injected failure, then tries every blind strategy: only the cause's own fix makes
    the failed call succeed (e-commerce: every injected error lands on an order write)."""
    env = _env("ecommerce", cause, families=["quality_refund"] if cause == "bad_parameters" else None)
    tried = 0
    for seed in range(30):
        found = _to_injection(env, seed)
        if found is None:
            continue
        actions, trace = found
        assert trace["root_cause"] == cause
        names = list(_strategies(env, actions[-1], trace))
        outcome = {}
        for name in names:
            env.reset(seed=seed)
            for a in actions:
                env.step(a)
            plan = _strategies(env, actions[-1], trace)[name]
            for a in plan:
                _, _, _, _, info = env.step(a)
            last = info[STEP_TRACE]
            # fixed as CU counts it: the call succeeds, does what it was for, within the cause's fix length
            outcome[name] = (
                last["result_code"] == "OK"
                and bool(last["goals_satisfied"])
                and len(plan) <= FIX_STEPS[cause]
            )
        assert outcome[FIX[cause]], (seed, trace["skill"], outcome)
        assert not any(ok for name, ok in outcome.items() if name != FIX[cause]), (
            seed,
            trace["skill"],
            outcome,
        )
        tried += 1
        if tried == 3:
            break
    assert tried == 3
    env.close()


def test_a_wrong_entity_is_held_until_a_lookup_re_resolves_it() -> None:
    """The agent keeps sending the look-alike (its observation does not change: it cannot see the id) until
    ``order.list`` reveals the real order again."""
    env = _env("ecommerce", "wrong_entity")
    for seed in range(20):
        found = _to_injection(env, seed)
        if found is not None:
            break
    assert found is not None
    actions, trace = found
    (_, real), lookalike = next(iter(env.misheld.items()))
    assert trace["args"]["order_id"] == lookalike and trace["result_code"] in (
        "NOT_FOUND",
        "PRECONDITION_FAILED",
    )
    assert env.knowledge is not None and env.knowledge.knows("order", real)
    assert not env.knowledge.knows("order", lookalike)
    _, _, _, _, again = env.step(actions[-1])
    assert (
        again[STEP_TRACE]["args"]["order_id"] == lookalike
        and again[STEP_TRACE]["root_cause"] == "wrong_entity"
    )
    env.step(env.encode_action("order.list", {"user_id": env.knowledge.ids("user")[0]}))
    assert env.misheld == {}
    _, _, _, _, fixed_ = env.step(actions[-1])
    assert fixed_[STEP_TRACE]["result_code"] == "OK" and fixed_[STEP_TRACE]["args"]["order_id"] == real
    env.close()


def test_bad_parameters_set_up_a_limit_below_the_usual_value() -> None:
    """The refund goal becomes the order's total (what was paid), below the item's price."""
    env = _env("ecommerce", "bad_parameters", families=["quality_refund"])
    env.reset(seed=0)
    assert env.task is not None and env.caller_error == "bad_parameters"
    g = next(g for g in env.task.goals if g.skill == "refund.trigger")
    o = env.world.order(g.args["order_id"])
    price = next(it.price for it in o.items if it.sku == g.args["sku"])
    assert g.numeric["amount"] == o.total < price
    env.close()


def test_no_caller_error_by_default() -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig())
    rec = _expert_episode(env, 0)
    assert not any(s.caller_error for s in rec.steps) and env.caller_error is None
