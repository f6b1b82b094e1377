"""The env's incremental caches equal a rebuild from scratch: SLA arrays (executor epoch, breaker polling) and
masks (structural cache keyed on the node order), under injected faults so that breakers open and close."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy
from agentic_ray.envs.masks import MaskComputer, sla_arrays
from agentic_ray.graph_spec import TOOL_NODE_TYPE


def _faulty_env(domain: str) -> AgentTaskEnv:
    cfg = AgentTaskEnvConfig(domain=domain)
    cfg.faults.enabled = True
    cfg.faults.end_share = 1.0
    cfg.faults.kinds = {"outage": 1.0, "transient": 1.0}
    cfg.faults.transient_rate = 0.8
    return AgentTaskEnv(cfg)


@pytest.mark.parametrize("domain", ["ecommerce", "helpdesk"])
def test_incremental_sla_and_masks_equal_a_rebuild(domain: str) -> None:
    env = _faulty_env(domain)
    pol = RandomMaskedPolicy(env.layout, seed=3)
    obs, _ = env.reset(seed=5)
    k = len(env.skills)
    opened = 0
    for _ in range(600):
        was_open = env._sla_cache["open"].copy()
        obs, _, term, trunc, _ = env.step(pol.act(obs))
        full = sla_arrays(env.executor.sla_stats(), env.skills)
        for key, arr in full.items():
            np.testing.assert_array_equal(env._sla_cache[key], arr, err_msg=key)
        tx = obs[f"{TOOL_NODE_TYPE}_x"]
        np.testing.assert_array_equal(tx[:, k + 4], full["open"])
        np.testing.assert_array_equal(tx[:, k + 5], full["half_open"])
        newly = full["open"] & ~was_open
        if newly.any():  # a breaker that opened on this step is soft-masked in the very next observation
            opened += 1
            assert not obs["skill_mask"][newly].any()
        fresh = MaskComputer(env.domain, env.contracts, env.layout)  # no cache: computed from scratch
        fresh.reset(env.task)
        fresh.tracker.reset(env.state.history)
        m = fresh.compute(
            env.knowledge, env.builder.node_ids, full, env.clock.now(), env.state.last_call_time
        )
        np.testing.assert_array_equal(obs["skill_mask"], m.skill_mask)
        np.testing.assert_array_equal(obs["pointer_mask"], m.pointer_mask)
        np.testing.assert_array_equal(obs["list_mask"], m.list_mask)
        assert env.current_masks.reasons == m.reasons
        if term or trunc:
            obs, _ = env.reset()
    assert opened > 0, "no breaker opened: the test did not exercise the breaker path"
    env.close()


class _FlagRule:
    """The real domain, with one more hard rule that reads a field value (not the node order)."""

    def __init__(self, domain) -> None:
        self._d = domain

    def __getattr__(self, name: str):
        return getattr(self._d, name)

    def hard_rules(self, knowledge, skills):
        out = dict(self._d.hard_rules(knowledge, skills))
        flagged = any(
            knowledge.fields(t, e).get("flag") for t in knowledge.entity_types for e in knowledge.ids(t)
        )
        if flagged:
            out[skills[0]] = "hard: flagged"
        return out


@pytest.mark.parametrize("domain", ["ecommerce", "helpdesk"])
def test_mask_cache_is_invalidated_by_a_field_reveal_and_by_an_open_breaker(domain: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain))
    env.reset(seed=0)
    mc = MaskComputer(_FlagRule(env.domain), env.contracts, env.layout)
    mc.reset(env.task)
    know, sla = env.knowledge, {k: v.copy() for k, v in env._sla(None).items()}
    t = know.entity_types[0]
    if not know.ids(t):
        know.reveal(t, "probe-1")
    e = know.ids(t)[0]

    def masks():
        env.builder.refresh(know)
        return mc.compute(know, env.builder.node_ids, sla, env.clock.now(), env.state.last_call_time)

    first, s0 = masks(), env.skills[0]
    assert "hard: flagged" not in first.reasons.get(s0, [])
    order = {k: list(v) for k, v in env.builder.node_ids.items()}
    know.reveal(t, e, {"flag": True})  # a field-only reveal: the node order is unchanged
    env.builder.refresh(know)
    assert env.builder.node_ids == order
    second = masks()
    assert second.skill_mask[0] == 0 and "hard: flagged" in second.reasons[s0]
    j = int(np.flatnonzero(second.skill_mask)[0])
    sla["open"][j] = True  # the breaker of an allowed skill opens
    third = masks()
    assert third.skill_mask[j] == 0 and third.soft[j]
    assert third.reasons[env.skills[j]] == ["soft: circuit breaker open"]
    env.close()


@pytest.mark.parametrize("domain", ["ecommerce", "helpdesk", "inspection"])
def test_kept_observations_never_change_and_shared_arrays_are_read_only(domain: str) -> None:
    """build hands out its memoised arrays without copying: an observation a caller keeps (RLlib's episodes keep
    every one) must read the same after later steps and episodes, an array handed out in two observations must be
    read-only (a write would corrupt the memo for every later observation), and a write into one must raise."""
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain))
    pol = RandomMaskedPolicy(env.layout, seed=1)
    obs, _ = env.reset(seed=2)
    kept: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = []
    owners: dict[int, set[int]] = {}  # id of an array's memory -> the observations holding it
    for i in range(300):
        kept.append((obs, {key: v.copy() for key, v in obs.items()}))
        for v in obs.values():
            owners.setdefault(id(v if v.base is None else v.base), set()).add(i)
        obs, _, term, trunc, _ = env.step(pol.act(obs))
        if term or trunc:
            obs, _ = env.reset()
    shared = 0
    for o, snapshot in kept:
        for key, v in o.items():
            np.testing.assert_array_equal(v, snapshot[key], err_msg=key)
            if len(owners[id(v if v.base is None else v.base)]) > 1:
                shared += 1
                assert not v.flags.writeable, f"{key} is handed out in several observations and writable"
                with pytest.raises(ValueError, match="read-only"):
                    v.reshape(-1)[:1] = 1
    assert shared > 300 * 10  # most of each observation is shared, not copied
    env.close()
