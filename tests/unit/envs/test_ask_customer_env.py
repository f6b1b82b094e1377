"""Asking the customer in an episode (issue 26, point 12), on the plug-in domain's ``expedite_order`` (a charge that
needs the customer's yes) and ``refund_choice`` (the customer chooses where the refund goes): the mask and the
gateway forbid the write until the answer is yes, a no changes what the task needs, the answer reaches the
observation only once asked, and the ask is a step that efficiency counts."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from agentic_ray.domains.protocol import Goal, Request, Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.observation import build_specs
from agentic_ray.keys import EPISODE_RECORD, MASK_REASONS, STEP_TRACE
from agentic_ray.rewards.layers.efficiency_layer import efficiency
from agentic_ray.skills.contracts import ASK_CUSTOMER
from tests.helpers.plugin_domain import register
from tests.plugin_domain import domain


@pytest.fixture(scope="module")
def env() -> AgentTaskEnv:
    return AgentTaskEnv(AgentTaskEnvConfig(domain=register()))


def _seed_answering(family: str, question: str, answer: str) -> int:
    """A task seed of ``family`` whose customer answers ``question`` with ``answer``."""
    for seed in range(100):
        world, task = domain.make_task(family, seed)
        order = next(r.id for r in task.request.mentioned if r.type == "order")
        if world.answers[f"{question}:{order}"] == answer:
            return seed
    raise AssertionError(f"no {family} seed answers {answer}")


def _start(env: AgentTaskEnv, family: str, answer: str) -> tuple[dict[str, np.ndarray], str, str]:
    seed = _seed_answering(family, "express_fee" if family == "expedite_order" else "refund_to", answer)
    obs, _ = env.reset(seed=0, options={"family": family, "task_seed": seed})
    assert env.task is not None
    cust = env.task.relevant[0]
    order = next(r.id for r in env.task.request.mentioned if r.type == "order")
    return obs, cust, order


def _step(env: AgentTaskEnv, skill: str, **params: Any) -> tuple[dict[str, np.ndarray], bool, dict[str, Any]]:
    obs, _r, term, trunc, info = env.step(env.encode_action(skill, params))
    return obs, term or trunc, info


def _identify(env: AgentTaskEnv) -> dict[str, Any]:
    """Identify the customer (the precondition of asking); the step's info."""
    assert env.task is not None
    return _step(env, "find_customer_by_email", email=env.task.request.facts["email"])[2]


def _completes(env: AgentTaskEnv, skill: str, done_order: list[str], **params: Any) -> None:
    """The call ends the episode completed, with these goals satisfied in this order."""
    _obs, done, info = _step(env, skill, **params)
    rec = info[EPISODE_RECORD]
    assert done and rec["completed"] and rec["goals_done_order"] == done_order


def _allowed(env: AgentTaskEnv, obs: dict[str, np.ndarray], skill: str) -> bool:
    return bool(obs["skill_mask"][env.skills.index(skill)])


def test_the_charge_is_masked_and_refused_until_the_customer_said_yes(env: AgentTaskEnv) -> None:
    obs, cust, order = _start(env, "expedite_order", "yes")
    info = _identify(env)
    assert not env.view().allowed("expedite_order")
    assert any("agreed to the express fee" in r for r in info[MASK_REASONS]["expedite_order"])
    # the gateway reads the same precondition: called directly, the charge is refused and nothing changes
    res = env.executor.call(
        "expedite_order",
        {"customer_id": cust, "order_id": order},
        intent_id=env.intent_id,
        world_id=env.world_id,
    )
    assert res.code == "PRECONDITION_FAILED" and env.world.order(order).shipping == "standard"
    obs, done, info = _step(env, ASK_CUSTOMER, question="express_fee", order_id=order)
    assert info[STEP_TRACE]["goals_satisfied"] == ["ask"] and not done
    assert env.knowledge.fields("order", order)["express_fee"] == "yes"  # type: ignore[union-attr]
    assert _allowed(env, obs, "expedite_order")
    _completes(env, "expedite_order", ["ask", "expedite"], customer_id=cust, order_id=order)
    assert env.world.order(order).shipping == "express"


def test_a_no_keeps_the_charge_forbidden_and_asks_for_closing_the_case_instead(env: AgentTaskEnv) -> None:
    _obs, cust, order = _start(env, "expedite_order", "no")
    _identify(env)
    obs, _d, _i = _step(env, ASK_CUSTOMER, question="express_fee", order_id=order)
    assert env.knowledge.fields("order", order)["express_fee"] == "no"  # type: ignore[union-attr]
    assert not _allowed(env, obs, "expedite_order")
    assert env.state is not None and env.state.goals_void == ["expedite"]
    view = env.view()
    assert [g.id for g, r in zip(view.task.goals, view.ready, strict=True) if r] == ["close"]
    _completes(env, "close_case", ["ask", "close"], customer_id=cust, outcome="resolved")
    assert env.world.order(order).shipping == "standard"


def test_closing_without_asking_fails_the_task(env: AgentTaskEnv) -> None:
    _obs, cust, _order = _start(env, "expedite_order", "no")
    _identify(env)
    _obs, done, info = _step(env, "close_case", customer_id=cust, outcome="resolved")
    assert done and not info[EPISODE_RECORD]["completed"]


@pytest.mark.parametrize("answer", ["credit_card", "gift_card"])
def test_a_choice_decides_which_refund_the_task_needs(env: AgentTaskEnv, answer: str) -> None:
    _obs, _cust, order = _start(env, "refund_choice", answer)
    _identify(env)
    _step(env, ASK_CUSTOMER, question="refund_to", order_id=order)
    other = "gift_card" if answer == "credit_card" else "credit_card"
    assert env.state is not None and env.state.goals_void == [f"refund_{other}"]
    _step(env, "get_order", order_id=order)
    g = next(g for g in env.task.goals if g.id == f"refund_{other}")  # type: ignore[union-attr]
    _obs, done, info = _step(
        env, "refund_item", **g.args, **g.numeric
    )  # the refund the customer did not choose
    assert info[STEP_TRACE]["result_code"] == "OK" and not info[STEP_TRACE]["goals_satisfied"]
    assert (
        done and not info[EPISODE_RECORD]["completed"]
    )  # the chosen refund is no longer possible (item refunded)


def test_the_ask_is_a_step_that_efficiency_counts(env: AgentTaskEnv) -> None:
    """The expert asks once and is optimal; one more (needless) ask is one more step and lowers efficiency."""
    _obs, cust, order = _start(env, "expedite_order", "yes")
    opt = env.task.optimal_steps  # type: ignore[union-attr]
    _identify(env)
    _step(env, ASK_CUSTOMER, question="express_fee", order_id=order)
    _o, _d, info = _step(env, ASK_CUSTOMER, question="express_fee", order_id=order)
    assert info[STEP_TRACE]["result_code"] == "OK" and not info[STEP_TRACE]["goals_satisfied"]
    _o, done, info = _step(env, "expedite_order", customer_id=cust, order_id=order)
    rec = info[EPISODE_RECORD]
    assert done and rec["completed"] and len(rec["steps"]) == opt + 1 == 4
    assert rec["steps"][2]["redundant"] and efficiency(len(rec["steps"]), opt) < 1.0 == efficiency(opt, opt)


def test_what_the_task_asks_does_not_depend_on_the_answer() -> None:
    """The goals, their skills and the optimal steps (hence the step budget the policy sees) are the same whatever
    the customer will answer: only asking tells."""
    for family, question in (("expedite_order", "express_fee"), ("refund_choice", "refund_to")):
        shapes = {}
        for seed in range(40):
            world, task = domain.make_task(family, seed)
            order = next(r.id for r in task.request.mentioned if r.type == "order")
            shape = (task.optimal_steps, tuple((g.id, g.skill, g.deps, g.on_answer) for g in task.goals))
            shapes.setdefault(world.answers[f"{question}:{order}"], set()).add(shape)
        assert len(shapes) == 2 and len(set.union(*shapes.values())) == 1, shapes


def test_a_schema_that_cannot_show_the_answer_is_refused() -> None:
    order = domain.schema.entity_type("order")
    fields = tuple(f for f in order.fields if f.name != "refund_to")
    schema = dataclasses.replace(
        domain.schema,
        entity_types=tuple(
            dataclasses.replace(t, fields=fields) if t.name == "order" else t
            for t in domain.schema.entity_types
        ),
    )
    with pytest.raises(ValueError, match="FieldSpec\\('refund_to', 'category'"):
        build_specs(schema, domain.contracts())


def test_a_goal_conditional_on_an_answer_needs_the_question_among_its_deps() -> None:
    ask = Goal("ask", ASK_CUSTOMER, args={"question": "express_fee"})
    go = Goal("go", "expedite_order", on_answer=("ask", "yes"))
    with pytest.raises(ValueError, match="must be an ask_customer goal among its deps"):
        Task("f", 0, Request("r"), (ask, go), 2)
    Task("f", 0, Request("r"), (ask, dataclasses.replace(go, deps=("ask",))), 2)
