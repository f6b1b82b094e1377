"""agentic_ray.envs: the generic tool-using env over any registered domain.

Importing this package registers ``agentic_ray/<domain>-v1`` for every domain with Gymnasium
(``gymnasium.make("agentic_ray/ecommerce-v1")``). ``register_envs(with_tune=True)`` also registers them with Ray
Tune, so RLlib configs can name them (``config.environment("agentic_ray/ecommerce-v1")``); it is not done at
import because importing Tune costs about 2 s. ``build_algo_config`` does it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["env_id", "make_env", "register_envs"]

_REGISTERED: set[tuple[str, bool]] = set()


def env_id(domain: str) -> str:
    """The registered env name of a domain."""
    return f"agentic_ray/{domain}-v1"


def make_env(domain: str, config: dict[str, Any] | None = None) -> Any:
    """An :class:`~agentic_ray.envs.agent_task_env.AgentTaskEnv` of ``domain`` (``config`` = other fields)."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv

    return AgentTaskEnv({**(config or {}), "domain": domain})


def _rllib_creator(domain: str) -> Any:
    def create(env_config: Any) -> Any:
        return make_env(domain, dict(env_config or {}))

    return create


def _gym_creator(domain: str) -> Any:
    def create(config: dict[str, Any] | None = None, **fields: Any) -> Any:
        return make_env(domain, {**(config or {}), **fields})

    return create


def register_envs(with_tune: bool = False) -> list[str]:
    """Register every known domain's env with Gymnasium (and Tune) (idempotent). Returns the env ids."""
    import gymnasium as gym

    from agentic_ray.domains import available_domains

    ids = []
    for name in available_domains():
        eid = env_id(name)
        ids.append(eid)
        if eid not in gym.registry:
            gym.register(id=eid, entry_point=_gym_creator(name), disable_env_checker=True)
        if with_tune and (eid, True) not in _REGISTERED:
            from ray.tune.registry import register_env

            register_env(eid, _rllib_creator(name))
            _REGISTERED.add((eid, True))
    return ids


register_envs()
