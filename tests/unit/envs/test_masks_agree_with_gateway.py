"""The action mask and the gateway read one definition of every precondition, so they cannot disagree.

Property over random histories (random masked policies and the expert, on every domain and the plug-in test
domain, in both risk modes): for every skill with business preconditions and every assignment of its
precondition-constrained entity arguments to known entities, the gateway accepts the call's preconditions exactly
when the mask allows the skill's business part, each chosen pointer target, and (for a precondition over several
arguments, ``belongs_to`` included) the combination, as the env checks it before sending the call. The per-slot
mask never forbids a combination the gateway accepts, and it is exact on its own whenever at most one constrained
argument has more than one allowed target.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentic_ray.domains import available_domains
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy
from agentic_ray.skills.contracts import EntityListParam, EntityParam
from agentic_ray.skills.preconditions import allowed_values, precondition_status, unconstrained_ok
from tests.helpers.plugin_domain import NAME as PLUGIN
from tests.helpers.plugin_domain import register

ENVS: dict[tuple[str, str], AgentTaskEnv] = {}
DOMAINS = sorted({*available_domains(), PLUGIN})


def _env(domain: str, risk_mode: str) -> AgentTaskEnv:
    register()
    if (domain, risk_mode) not in ENVS:
        ENVS[(domain, risk_mode)] = AgentTaskEnv(AgentTaskEnvConfig(domain=domain, risk_mode=risk_mode))
    return ENVS[(domain, risk_mode)]


def _check_agreement(env: AgentTaskEnv) -> int:
    m = env.current_masks
    assert m.business is not None
    tracker, history = env.masks.tracker, env.state.history
    safety = env.config.risk_mode == "hard"
    checked = 0
    for k, c in enumerate(env.contracts.skills):
        if not c.preconditions:
            continue
        # The incremental tracker equals the pure functions on this history.
        assert tracker.skill_ok(k) == unconstrained_ok(
            c, history, enforce_safety=safety, contracts=env.by_name
        )
        constrained = {n for pc in c.preconditions for n in pc.constrained}
        known = {
            n: env.builder.node_ids.get(p.node_type, [])
            for n, p in c.input.items()
            if n in constrained and isinstance(p, EntityParam | EntityListParam)
        }
        pointers = [(n, p) for n, p in c.input.items() if isinstance(p, EntityParam)]
        slot = {n: i for i, (n, _p) in enumerate(pointers)}
        lists = [n for n, p in c.input.items() if isinstance(p, EntityListParam)]
        list_slot = {n: i for i, n in enumerate(lists)}
        for n, ids in known.items():
            want = allowed_values(
                c, n, ids, history, enforce_safety=safety, contracts=env.by_name, known=known
            )
            assert tracker.allowed(k, n, ids, known) in (None, want)
            row = m.pointer_mask[k, slot[n]] if n in slot else m.list_mask[k, list_slot[n]]
            assert [bool(x) for x in row[: len(ids)]] == want, (c.name, n)  # each slot is the projection
        choices = []
        for n, p in [*pointers, *((n, c.input[n]) for n in lists)]:
            ids = env.builder.node_ids.get(p.node_type, [])
            if n in constrained:  # a list argument: each known id as a one-member list
                choices.append([(n, j, [v] if n in list_slot else v) for j, v in enumerate(ids)])
            else:
                choices.append([(n, 0, ids[0] if ids else "x")])
        wide = sum(
            int(m.pointer_mask[k, slot[n], : len(ids)].sum() > 1)
            if n in slot
            else int(m.list_mask[k, list_slot[n], : len(ids)].sum() > 1)
            for n, ids in known.items()
        )
        for combo in itertools.product(*choices):
            params = {n: v for n, _j, v in combo}
            gateway_ok, _why = env.executor.precondition_status(c.name, params, env.intent_id)
            slots_ok = not m.business[k] and all(
                m.pointer_mask[k, slot[n], j] if n in slot else m.list_mask[k, list_slot[n], j]
                for n, j, _v in combo
                if n in constrained
            )
            joint_ok = (
                not tracker.joint[k]
                or precondition_status(c, params, history, enforce_safety=safety, contracts=env.by_name)[0]
            )
            assert gateway_ok == (slots_ok and joint_ok), (c.name, params, m.reasons.get(c.name))
            assert slots_ok or not gateway_ok  # the mask never forbids what the gateway accepts
            if wide <= 1:
                assert gateway_ok == slots_ok, (c.name, params)  # exact without the combination check
            checked += 1
    return checked


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("risk_mode", ["hard", "soft"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), steps=st.integers(0, 14), expert_share=st.floats(0.0, 1.0))
def test_mask_and_gateway_agree_on_every_precondition(
    domain: str, risk_mode: str, seed: int, steps: int, expert_share: float
) -> None:
    env = _env(domain, risk_mode)
    rng = np.random.default_rng(seed)
    rand = RandomMaskedPolicy(env.layout, seed=seed)
    expert = env.domain.expert()
    obs, _ = env.reset(seed=seed)
    checked = _check_agreement(env)
    for _ in range(steps):
        a = env.encode_action(*expert.plan(env.view())) if rng.random() < expert_share else rand.act(obs)
        obs, _r, term, trunc, _info = env.step(a)
        if term or trunc:
            obs, _ = env.reset()
        checked += _check_agreement(env)
    assert checked > 0
