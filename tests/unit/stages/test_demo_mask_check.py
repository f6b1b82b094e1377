"""Demonstrations checked against the masks (issue 26, point 7): an imitated action the masks forbid is an error
naming the step, the skill and the mask's reason; ``collect_demos`` drops such demonstrations and says how many and
why. The plug-in domain's expert and a careless variant of it."""

from __future__ import annotations

from typing import Any

import pytest

import agentic_ray.domains as registry
from agentic_ray.domains.caller_errors import INJECTED_CAUSES
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.stages.demos import ForbiddenDemoAction, collect_demos
from tests.helpers.plugin_domain import register
from tests.plugin_domain import RetailDomain
from tests.plugin_domain.expert import RetailExpert, gold_call


class _Hasty(RetailExpert):
    """Starts a return without reading the order first (the request names the items, so it can): the return's
    precondition is unmet, so the mask forbids it."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        g = view.task.goals[0] if view.task.goals else None
        if g is not None and g.skill == "return_items" and view.succeeded("find_customer_by_email"):
            return g.skill, gold_call(g)
        return super().plan(view)


class _HastyDomain(RetailDomain):
    name = "retail_hasty"

    def expert(self) -> _Hasty:
        return _Hasty()


@pytest.fixture
def hasty() -> Any:
    d = _HastyDomain()
    registry.register_domain(d.name, lambda: d)
    yield d.name
    registry._REGISTRY.pop(d.name, None)
    registry._LOADED.pop(d.name, None)


def test_the_plugin_expert_demonstrates_only_allowed_actions() -> None:
    demos = collect_demos(
        AgentTaskEnvConfig(domain=register()), n=40, wrong_share=0.5, seed=1, caller_errors=INJECTED_CAUSES
    )
    assert len(demos) == 40 and demos.n_dropped == 0 and not demos.dropped
    assert {d.kind for d in demos} >= {"clean", "caller_error"}


def test_a_forbidden_action_drops_its_demonstration_and_says_why(hasty: str) -> None:
    demos = collect_demos(AgentTaskEnvConfig(domain=hasty), n=24, wrong_share=0.0, seed=0)
    returns = [e for e in demos.errors if e.family == "return_items"]
    assert demos.n_dropped == len(returns) > 0 and len(demos) == 24 - demos.n_dropped
    assert all(d.family != "return_items" for d in demos)  # every other family is kept
    ((why, count),) = demos.dropped.items()
    assert count == len(returns) and why.startswith(
        "return_items: business: The order was read for this customer"
    )
    e = returns[0]
    assert e.step == 1 and e.skill == "return_items" and e.kind == "clean"
    assert f"step 1: the expert's return_items is forbidden by the masks: {e.reason}" in str(e)


def test_strict_collection_raises_at_the_first_forbidden_action(hasty: str) -> None:
    with pytest.raises(ForbiddenDemoAction, match=r"step 1: the expert's return_items is forbidden") as ei:
        collect_demos(
            AgentTaskEnvConfig(domain=hasty, families=["return_items"]), n=3, wrong_share=0.0, strict=True
        )
    assert ei.value.demo == 0 and "needs a prior get_order" in ei.value.reason
