"""No hidden state reaches the policy: two worlds that differ only in what the agent has not revealed produce the same
observations, masks and action layouts along the same actions, until a tool result reveals the difference.

A hypothesis property over every domain in :data:`DOMAINS` (the registered ones and the test plug-in domain;
other tests may append theirs) and both action modes. Each example draws a task and a second version of it that
differs in one hidden thing: its world, through the domain's own
:meth:`~agentic_ray.domains.protocol.Domain.perturb_hidden` (another order total, item status, customer tier,
...), its goals' hidden entity arguments (the entities the request does not name, permuted among the world's
others of their type: which item the customer means, which tickets are duplicates), or the goal arguments the
request does not state (``Goal.hidden_args``, another valid choice: the verification method MFA enrolment decides). One at a time, so that a
lookup that reveals a perturbed field does not end the comparison before the goal arguments could show. Both
episodes then take the same actions, random masked ones or the scripted expert's (read from the first episode),
from the same env seed.

At every step, as long as neither tool result revealed a difference (the same result code, the same knowledge,
the same goals done) and neither episode ended, the observations are equal (but for the label entries of
:data:`~agentic_ray.graph_spec.LABEL_OBS_KEYS`), and so are the node orders pointers refer to and the calls an
action decodes to.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentic_ray.domains as registry
from agentic_ray.domains import get_domain
from agentic_ray.domains.protocol import Domain, Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy
from agentic_ray.graph_spec import LABEL_OBS_KEYS
from agentic_ray.keys import STEP_TRACE
from agentic_ray.skills.contracts import BoolParam, EntityListParam, EntityParam, EnumParam
from tests.helpers.plugin_domain import register as register_retail

PLUGIN = "plugin_desk"
RETAIL = register_retail()  # the plug-in retail domain of tests/plugin_domain (lists, options)
DOMAINS: list[str] = [
    "ecommerce",
    "ecommerce_memory",
    "helpdesk",
    "helpdesk_memory",
    "inspection",
    PLUGIN,
    RETAIL,
]
"""Domains the property runs on; a test that adds a domain appends its registered name here."""
MODES = ("structured", "prototype")


@pytest.fixture(scope="module", autouse=True)
def _plugin_domain():
    """The test plug-in domain (``tests/unit/domains/plugin_domain.py``), registered for this module."""
    from tests.unit.domains.plugin_domain import domain

    registry.register_domain(PLUGIN, lambda: domain)
    yield
    registry._REGISTRY.pop(PLUGIN, None)
    registry._LOADED.pop(PLUGIN, None)


class _Given:
    """The domain, except that ``make_task`` hands out a prepared world and task (the env draws nothing else)."""

    def __init__(self, domain: Domain) -> None:
        self._domain = domain
        self.world: Any = None
        self.task: Task | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._domain, name)

    def make_task(self, family: str, seed: int, options: Any = None) -> tuple[Any, Task]:
        assert self.task is not None
        return self._domain.world_from_dict(self.world.to_dict()), self.task


_ENVS: dict[tuple[str, str], tuple[AgentTaskEnv, AgentTaskEnv]] = {}


def _envs(domain: str, mode: str) -> tuple[AgentTaskEnv, AgentTaskEnv]:
    """Two envs of the domain (built once per module: contracts and specs take a while)."""
    if (domain, mode) not in _ENVS:
        cfg = AgentTaskEnvConfig(
            domain=domain, action_mode=mode, faults={"enabled": True, "start_share": 0.3, "end_share": 0.3}
        )
        pair = (AgentTaskEnv(cfg), AgentTaskEnv(cfg))
        for env in pair:
            env.domain = _Given(env.domain)  # type: ignore[assignment]
        _ENVS[(domain, mode)] = pair
    return _ENVS[(domain, mode)]


def other_hidden_goal_args(domain: Domain, world: Any, task: Task, rng: np.random.Generator) -> Task:
    """``task`` whose goals' entity arguments that the request does not name are mapped through one random
    permutation, per entity type, of the world's entities the request does not name (a hidden choice)."""
    named = {(r.type, r.id) for r in task.request.mentioned}
    contracts = domain.contracts().by_name()
    perm: dict[tuple[str, str], str] = {}
    for t in domain.schema.type_names:
        ids = [i for i in domain.entity_ids(world, t) if (t, i) not in named]
        perm |= {(t, a): str(b) for a, b in zip(ids, rng.permutation(ids), strict=True)}
    goals = []
    for g in task.goals:
        args = dict(g.args)
        for name, p in contracts[g.skill].input.items():
            if isinstance(p, EntityParam | EntityListParam) and name in args:
                v = args[name]
                if isinstance(v, list | tuple):
                    args[name] = [perm.get((p.node_type, str(x)), x) for x in v]
                else:
                    args[name] = perm.get((p.node_type, str(v)), v)
        goals.append(dataclasses.replace(g, args=args))
    return dataclasses.replace(task, goals=tuple(goals))


def other_hidden_goal_choices(domain: Domain, task: Task, rng: np.random.Generator) -> Task:
    """``task`` whose goals' enum and flag arguments that the request does not state (``Goal.hidden_args``) take
    another valid choice."""
    contracts = domain.contracts().by_name()
    goals = []
    for g in task.goals:
        args = dict(g.args)
        for name in g.hidden_args:
            p = contracts[g.skill].input.get(name)
            choices = (
                list(p.choices)
                if isinstance(p, EnumParam)
                else [False, True]
                if isinstance(p, BoolParam)
                else []
            )
            others = [c for c in choices if c != args.get(name)]
            if name in args and others:
                args[name] = others[int(rng.integers(len(others)))]
        goals.append(dataclasses.replace(g, args=args))
    return dataclasses.replace(task, goals=tuple(goals))


def _policy_view(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in obs.items() if k not in LABEL_OBS_KEYS}


def _assert_same(a: AgentTaskEnv, b: AgentTaskEnv, oa: dict, ob: dict, where: str) -> None:
    pa, pb = _policy_view(oa), _policy_view(ob)
    assert pa.keys() == pb.keys()
    for k in pa:
        np.testing.assert_array_equal(pa[k], pb[k], err_msg=f"{where}: observation entry {k!r} differs")
    assert a.builder.node_ids == b.builder.node_ids, f"{where}: the node order pointers refer to differs"


def _revealed(a: AgentTaskEnv, b: AgentTaskEnv, ia: dict, ib: dict) -> bool:
    """Whether the last step's tool results told the two episodes apart."""
    sa, sb = ia[STEP_TRACE], ib[STEP_TRACE]
    assert a.state is not None and b.state is not None and a.knowledge is not None and b.knowledge is not None
    return (
        sa["result_code"] != sb["result_code"]
        or a.knowledge.to_dict() != b.knowledge.to_dict()
        or not np.array_equal(a.state.goal_done, b.state.goal_done)
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("domain", DOMAINS)
@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.integers(0, 63),
    task_seed=st.integers(0, 10**6),
    env_seed=st.integers(0, 2**31 - 1),
    expert=st.booleans(),
    hidden=st.sampled_from(["world", "goal_args", "goal_choices"]),
)
def test_unrevealed_state_does_not_reach_the_policy(
    domain: str, mode: str, family: int, task_seed: int, env_seed: int, expert: bool, hidden: str
) -> None:
    d = get_domain(domain)
    a, b = _envs(domain, mode)
    fam = d.families[family % len(d.families)]
    world, task = d.make_task(fam, task_seed)
    rng = np.random.default_rng(env_seed)
    other_world, other_task = world, task
    if hidden == "goal_args":
        other_task = other_hidden_goal_args(d, world, task, rng)
    elif hidden == "goal_choices":
        other_task = other_hidden_goal_choices(d, task, rng)
    if other_task == task:  # nothing hidden in the goals (every argument is stated): the world then
        other_world = d.perturb_hidden(world, rng)
        assert other_world.to_dict() != world.to_dict(), "perturb_hidden changed nothing"
    a.domain.world, a.domain.task = world, task  # type: ignore[attr-defined]
    b.domain.world, b.domain.task = other_world, other_task  # type: ignore[attr-defined]
    options = {"family": fam, "task_seed": task_seed}
    oa, _ = a.reset(seed=env_seed, options=options)
    ob, _ = b.reset(seed=env_seed, options=options)
    _assert_same(a, b, oa, ob, "reset")
    random_policy = RandomMaskedPolicy(a.layout, env_seed)
    for t in range(64):
        action = a.encode_action(*a.domain.expert().plan(a.view())) if expert else random_policy.act(oa)
        oa, _ra, term_a, trunc_a, ia = a.step(action)
        ob, _rb, term_b, trunc_b, ib = b.step(action)
        assert (ia[STEP_TRACE]["skill"], ia[STEP_TRACE]["args"]) == (
            ib[STEP_TRACE]["skill"],
            ib[STEP_TRACE]["args"],
        ), f"step {t}: the same action decoded to another call"
        if _revealed(a, b, ia, ib) or term_a or trunc_a or term_b or trunc_b:
            return
        _assert_same(a, b, oa, ob, f"step {t} ({ia[STEP_TRACE]['skill']})")
