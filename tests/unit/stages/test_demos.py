"""Controlled wrong samples: every kind is present, the wrong step is never imitated, and the expert's step right
after a failure depends on the failure's root cause."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from agentic_ray.domains.caller_errors import INJECTED_CAUSES
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.stages.demos import WRONG_KINDS, Demo, collect_demos

REREADS, HANDOFF = ("order.get", "inventory.check"), "human.handoff"


@pytest.fixture(scope="module")
def demos() -> list[Demo]:
    return collect_demos(AgentTaskEnvConfig(), n=120, wrong_share=0.5, seed=0, caller_errors=INJECTED_CAUSES)


def _post_failure_steps(demos: list[Demo], caller_error: bool = False) -> dict[str, list[tuple[dict, dict]]]:
    """Root cause → (failed action, imitated action right after it). ``caller_error`` demos record the expert's
    intended action for the step the env made wrong, so they are read apart."""
    out: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for d in demos:
        if (d.kind == "caller_error") != caller_error:
            continue
        for i, o in enumerate(d.obs):
            failed_last = o["session_x"][0, 4] > 0
            if i and d.weights[i] > 0 and failed_last and o["reflection"].any():  # the step after a failure
                out[ROOT_CAUSES[int(o["reflection"].argmax())]].append((d.actions[i - 1], d.actions[i]))
    return out


def _same_call(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in ("skill", "pointer", "enum"))


def test_kinds_labels_and_weights(demos: list[Demo]) -> None:
    kinds = Counter(d.kind for d in demos)
    assert set(WRONG_KINDS) <= set(kinds), kinds
    assert kinds["clean"] >= 60 and kinds["caller_error"] >= 25  # half of the 60 wrong samples
    for d in demos:
        assert len(d.obs) == len(d.actions) == len(d.weights)
        assert d.weights.count(0.0) == (1 if d.kind in ("reversed", "caller_error") else 0), d.kind
    assert all(d.completed for d in demos if d.kind in ("clean", "caller_error"))
    # the injected causes in turn: every one is demonstrated, about equally often
    injected = Counter(ROOT_CAUSES[d.root_cause] for d in demos if d.kind == "caller_error")
    assert set(injected) == set(INJECTED_CAUSES) and min(injected.values()) >= 5, injected


def test_correction_depends_on_the_root_cause(demos: list[Demo]) -> None:
    from agentic_ray.envs.agent_task_env import AgentTaskEnv

    skills = AgentTaskEnv().skills
    post = _post_failure_steps(demos)
    assert "tool_error" in post, set(post)
    # tool error: the same call again (or a handoff once the soft mask has taken the failing tool away)
    assert all(_same_call(a, b) or skills[int(b["skill"])] == HANDOFF for a, b in post["tool_error"])
    assert sum(_same_call(a, b) for a, b in post["tool_error"]) >= 0.9 * len(post["tool_error"])


def test_an_injected_caller_error_is_fixed_by_its_cause(demos: list[Demo]) -> None:
    """The imitated step right after each injected error is that cause's own fix."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv

    env = AgentTaskEnv()
    skills = env.skills
    post = _post_failure_steps(demos, caller_error=True)
    assert set(post) == set(INJECTED_CAUSES), set(post)
    # tool error: the same call again
    assert all(_same_call(a, b) for a, b in post["tool_error"])
    # stale information: a re-read first
    assert all(skills[int(b["skill"])] in REREADS for _, b in post["stale_information"])
    # wrong entity: the lookup that lists the customer's orders (the order id the agent held was a look-alike)
    assert all(skills[int(b["skill"])] == "order.list" for _, b in post["wrong_entity"])
    # bad parameter: the same call at once, the amount copied from the order's total (the limit)
    for a, b in post["bad_parameters"]:
        assert int(a["skill"]) == int(b["skill"]) and env.codec.source_field(int(b["source"][0]) - 1) == (
            "order",
            "total",
        )
