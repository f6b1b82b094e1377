"""Registration of the plug-in test domain (``tests/plugin_domain``) and the maintenance of its data files.

The domain is registered the way a notebook or a test registers one, with
:func:`agentic_ray.domains.register_domain`; an installed package would use the ``agentic_ray.domains`` entry-point
group instead. Nothing in pyproject names it.

Regenerate its data files (after changing its schema, skills or families)::

    python -m tests.helpers.plugin_domain
"""

from __future__ import annotations

from tests.plugin_domain import NAME, domain

__all__ = ["NAME", "register"]


def register() -> str:
    """Register the domain in this process (idempotent); returns its name."""
    from agentic_ray.domains import _REGISTRY, register_domain

    if _REGISTRY.get(NAME) is None:
        register_domain(NAME, lambda: domain)
    return NAME


def regenerate_data() -> None:  # pragma: no cover - maintenance entry point
    """Refit ``data/quantiles.json`` and re-mine ``data/prototypes.json`` with the project's own tools."""
    from agentic_ray.domains.quantile_fit import fit_quantiles
    from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
    from agentic_ray.envs.prototypes import (
        collect_expert_steps,
        mine_prototypes,
        save_prototypes,
        with_every_skill,
    )

    register()
    domain.data_dir.mkdir(exist_ok=True)
    fit_quantiles(domain, n_tasks=500).to_json(domain.data_dir / "quantiles.json")
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=NAME))
    protos = with_every_skill(
        mine_prototypes(collect_expert_steps(NAME, n_per_family=20), env.layout), env.layout, env.skills
    )
    save_prototypes(protos, domain.data_dir / "prototypes.json")
    print(f"{len(protos)} prototypes, quantiles -> {domain.data_dir}")


if __name__ == "__main__":  # pragma: no cover
    regenerate_data()
