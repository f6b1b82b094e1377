"""Domains are found through the registry, which also reads the ``agentic_ray.domains`` entry points; every
domain's env is registered with Gymnasium and Tune under ``agentic_ray/<domain>-v1``."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import gymnasium as gym
import pytest

import agentic_ray.domains as registry
from agentic_ray.domains import available_domains, get_domain
from agentic_ray.domains.protocol import Domain
from agentic_ray.envs import env_id, register_envs
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.keys import EPISODE_RECORD


def test_builtin_domains_implement_the_protocol() -> None:
    for name in ("ecommerce", "helpdesk"):
        d = get_domain(name)
        assert isinstance(d, Domain) and d.name == name and d.families
        assert d.contracts_path.name == f"{name}.yaml"
    with pytest.raises(KeyError, match="unknown domain 'nope'"):
        get_domain("nope")


def test_an_installed_package_adds_a_domain_through_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint(
        name="plugin_desk", value="tests.unit.domains.plugin_domain:domain", group=registry.ENTRY_POINT_GROUP
    )
    real = registry.entry_points

    def fake(*, group: str):
        return [ep] if group == registry.ENTRY_POINT_GROUP else real(group=group)

    monkeypatch.setattr(registry, "entry_points", fake)
    assert "plugin_desk" in available_domains()
    env = AgentTaskEnv({"domain": "plugin_desk"})
    env.reset(seed=0)
    expert = env.domain.expert()
    done = False
    while not done:
        _obs, _r, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
        done = term or trunc
    assert info[EPISODE_RECORD]["completed"] and info[EPISODE_RECORD]["domain"] == "plugin_desk"
    assert env_id("plugin_desk") in register_envs()
    registry._LOADED.pop("plugin_desk", None)


def test_a_wrongly_named_domain_is_refused() -> None:
    registry.register_domain("alias", lambda: get_domain("helpdesk"))
    try:
        with pytest.raises(ValueError, match="calls itself 'helpdesk'"):
            get_domain("alias")
    finally:
        registry._REGISTRY.pop("alias")


@pytest.mark.parametrize("domain", ["ecommerce", "helpdesk"])
def test_gymnasium_make_names_every_domain(domain: str) -> None:
    env = gym.make(env_id(domain), config={"split": "validation"})
    _obs, info = env.reset(seed=0)
    assert env.unwrapped.config.domain == domain and env.unwrapped.config.split == "validation"
    assert info["task_family"] in get_domain(domain).families
    env.close()


def test_tune_registration_makes_the_name_usable_by_rllib() -> None:
    from ray.tune.registry import ENV_CREATOR, _global_registry

    ids = register_envs(with_tune=True)
    assert {env_id("ecommerce"), env_id("helpdesk")} <= set(ids)
    creator = _global_registry.get(ENV_CREATOR, env_id("helpdesk"))
    env = creator({"action_mode": "prototype"})
    assert env.config.domain == "helpdesk" and env.config.action_mode == "prototype"
    env.close()
