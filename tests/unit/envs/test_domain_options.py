"""Domain options (issue 26, point 8): ``env.domain_options`` is validated by the schema the domain declares and
reaches its ``make_task``; a domain that declares none takes none."""

from __future__ import annotations

import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD
from agentic_ray.settings import ExperimentSettings
from tests.helpers.plugin_domain import register
from tests.plugin_domain import RetailOptions


def _env(**options: object) -> AgentTaskEnv:
    return AgentTaskEnv(
        AgentTaskEnvConfig(
            domain=register(), families=["refund_item"], split="validation", domain_options=options
        )
    )


def test_options_reach_make_task() -> None:
    for n in (1, 4):
        env = _env(items_per_order=n)
        env.reset(seed=0)
        assert isinstance(env.domain_options, RetailOptions) and env.domain_options.items_per_order == n
        assert {len(o.items) for o in env.world.customer.orders} == {n}
    env = _env()  # the declared defaults
    env.reset(seed=0)
    assert {len(o.items) for o in env.world.customer.orders} == {RetailOptions().items_per_order}


def test_a_judging_regime_changes_what_the_goal_asks_and_the_expert_still_solves_it() -> None:
    env = _env(refund_to="original")
    expert = env.domain.expert()
    env.reset(seed=0)
    for i in range(10):
        if i:
            env.reset()
        g = env.task.goals[0]
        assert g.args["payment_method_id"] == env.world.order(g.args["order_id"]).paid_with
        assert "paid with" in env.task.request.text
        while True:
            _o, _r, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            if term or trunc:
                break
        assert info[EPISODE_RECORD]["completed"]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"items_per_order": 9}, r"retail_plugin.*items_per_order: Input should be less than or equal to 4"),
        ({"refund_to": "anywhere"}, r"refund_to: Input should be 'requested' or 'original'"),
        ({"judging": "strict"}, r"judging: Extra inputs are not permitted"),
    ],
)
def test_options_the_schema_rejects_are_refused_at_load(options: dict, match: str) -> None:
    register()
    with pytest.raises(ValueError, match=match):
        AgentTaskEnvConfig(domain="retail_plugin", domain_options=options)
    with pytest.raises(ValueError, match=match):  # the experiment settings validate them with the env
        ExperimentSettings.model_validate({"env": {"domain": "retail_plugin", "domain_options": options}})


def test_a_domain_without_options_takes_none() -> None:
    with pytest.raises(ValueError, match="'helpdesk' declares no options"):
        AgentTaskEnvConfig(domain="helpdesk", domain_options={"items_per_order": 2})
    env = AgentTaskEnv(AgentTaskEnvConfig(domain="helpdesk"))
    env.reset(seed=0)  # called as make_task(family, seed)
    assert env.domain_options is None
