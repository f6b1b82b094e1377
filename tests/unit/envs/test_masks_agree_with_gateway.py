"""The action mask and the gateway read one definition of every precondition, so they cannot disagree.

Property over random histories (random masked policies and the expert, on every domain, in both risk modes): for
every skill with business preconditions and every assignment of its precondition-constrained entity argument to a
known entity, the gateway accepts the call's preconditions exactly when the mask allows the skill's business
part and that pointer target.
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
from agentic_ray.skills.contracts import EntityParam
from agentic_ray.skills.preconditions import allowed_values, unconstrained_ok

ENVS: dict[tuple[str, str], AgentTaskEnv] = {}


def _env(domain: str, risk_mode: str) -> AgentTaskEnv:
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
        assert tracker.skill_ok(k) == unconstrained_ok(c, history, enforce_safety=safety)
        for n, p in c.input.items():
            if isinstance(p, EntityParam) and any(n in pc.same for pc in c.preconditions):
                ids = env.builder.node_ids.get(p.node_type, [])
                assert tracker.allowed(k, n, ids) in (
                    None,
                    allowed_values(c, n, ids, history, enforce_safety=safety),
                )
        pointers = [(n, p) for n, p in c.input.items() if isinstance(p, EntityParam)]
        slot = {n: i for i, (n, _p) in enumerate(pointers)}
        constrained = [n for pc in c.preconditions for n in pc.same]
        choices = []
        for n, p in pointers:
            ids = env.builder.node_ids.get(p.node_type, [])
            choices.append(
                [(n, j, v) for j, v in enumerate(ids)]
                if n in constrained
                else [(n, 0, ids[0] if ids else "x")]
            )
        for combo in itertools.product(*choices):
            params = {n: v for n, _j, v in combo}
            gateway_ok, _why = env.executor.precondition_status(c.name, params, env.intent_id)
            mask_ok = not m.business[k] and all(
                m.pointer_mask[k, slot[n], j] for n, j, _v in combo if n in constrained
            )
            assert gateway_ok == mask_ok, (c.name, params, m.reasons.get(c.name))
            checked += 1
    return checked


@pytest.mark.parametrize("domain", available_domains())
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
