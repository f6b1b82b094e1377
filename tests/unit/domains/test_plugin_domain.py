"""The plug-in test domain (``tests/plugin_domain``), a third party's domain: written against the protocol,
contracts and knowledge modules only, registered without touching the project, solved by its expert, and a valid
Gymnasium env in both action modes."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentic_ray.domains import available_domains, get_domain
from agentic_ray.domains.protocol import Domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy
from agentic_ray.keys import EPISODE_RECORD
from tests.helpers.plugin_domain import NAME, register
from tests.plugin_domain import tasks

PACKAGE = Path(__file__).resolve().parents[2] / "plugin_domain"
ALLOWED = {"agentic_ray.domains.protocol", "agentic_ray.skills.contracts", "agentic_ray.domains.knowledge"}


def test_it_imports_nothing_of_the_project_beyond_the_plugin_api() -> None:
    used = set()
    for f in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                used.add(node.module)
            elif isinstance(node, ast.Import):
                used |= {a.name for a in node.names}
    project = {m for m in used if m.startswith("agentic_ray")}
    assert project and project <= ALLOWED, project - ALLOWED
    pyproject = (PACKAGE.parents[1] / "pyproject.toml").read_text()
    assert "plugin_domain" not in pyproject and NAME not in pyproject  # registered by the tests alone


def test_it_registers_and_implements_the_protocol() -> None:
    register()
    d = get_domain(NAME)
    assert isinstance(d, Domain) and NAME in available_domains()
    assert d.families == (
        "refund_item",
        "return_items",
        "cancel_order",
        "no_change",
        "refund_items",
        "expedite_order",
        "refund_choice",
        "ship_like_other",
        "tracking_answer",
        "two_emails",
    )


@pytest.mark.parametrize("family", tasks.FAMILIES)
def test_tasks_are_deterministic_and_worlds_travel(family: str) -> None:
    d = get_domain(register())
    (w1, t1), (w2, t2) = d.make_task(family, 11), d.make_task(family, 11)
    assert w1.to_dict() == w2.to_dict() and t1 == t2
    assert d.world_from_dict(w1.to_dict()).to_dict() == w1.to_dict()
    assert d.make_task(family, 12)[1].request != t1.request
    val = d.validation_seeds(family, 25)
    assert (
        min(val)
        >= tasks.VALIDATION_SEED_BASE
        > max(d.draw_training_seed(np.random.default_rng(0)) for _ in range(1000))
    )


@pytest.mark.parametrize("mode", ["structured", "prototype"])
def test_the_expert_solves_every_validation_task_in_optimal_steps(mode: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register(), split="validation", action_mode=mode))
    expert = env.domain.expert()
    results = []
    env.reset(seed=0)
    for i in range(25 * len(env.families)):
        if i:
            env.reset()
        assert env.task is not None
        while True:
            _o, _r, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            if term or trunc:
                break
        rec = info[EPISODE_RECORD]
        results.append((env.task.family, rec["completed"], len(rec["steps"]) == env.task.optimal_steps))
    assert all(ok and optimal for _f, ok, optimal in results), [r for r in results if not (r[1] and r[2])]
    assert {r[0] for r in results} == set(env.families)


def test_a_random_masked_policy_is_far_below_the_expert() -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register(), split="validation"))
    pol = RandomMaskedPolicy(env.layout, seed=0)
    obs, _ = env.reset(seed=0)
    done = []
    while len(done) < 60:
        obs, _r, term, trunc, info = env.step(pol.act(obs))
        if term or trunc:
            done.append(info[EPISODE_RECORD]["completed"])
            obs, _ = env.reset()
    assert np.mean(done) < 0.3


@pytest.mark.parametrize("mode", ["structured", "prototype"])
def test_check_env(mode: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register(), action_mode=mode))
    check_env(env, skip_render_check=True)
    env.close()
