"""``agentic-ray skills check``: every skill of a domain once through the ToolExecutor, as a table.

Skills the domain's scripted expert uses are checked on the expert's own calls while it solves one validation
task per family (so business rules such as "refund only a delivered order after a stock check" hold). Every other
skill is checked with contract-derived arguments (:func:`agentic_ray.skills.check.check_skill`) on a fresh world.
"""

from __future__ import annotations

import copy
from typing import Any

from agentic_ray.domains import get_domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import STEP_TRACE
from agentic_ray.skills.backends import HttpBackend, PythonBackend
from agentic_ray.skills.check import check_skill


def expert_calls(domain: str, url: str | None = None, seed: int = 0) -> dict[str, dict[str, Any]]:
    """The first successful call of each skill while the domain's expert solves one task per family."""
    cfg = (
        AgentTaskEnvConfig(domain=domain, backend="http", http_url=url)
        if url
        else AgentTaskEnvConfig(domain=domain)
    )
    env = AgentTaskEnv(cfg)
    expert = env.domain.expert()
    found: dict[str, dict[str, Any]] = {}
    for family in env.families:
        env.reset(
            seed=seed, options={"family": family, "task_seed": env.domain.validation_seeds(family, 1)[0]}
        )
        for _ in range(env.state.budget if env.state else 20):
            _, _, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            t = info[STEP_TRACE]
            if t["result_code"] == "OK" and t["skill"] not in found:
                found[t["skill"]] = {
                    "skill": t["skill"],
                    "code": "OK",
                    "ok": True,
                    "latency_ms": t["latency_ms"],
                    "attempts": t["attempts"],
                    "fallback": t["fallback_used"],
                    "warnings": t["warnings"],
                    "params": t["args"],
                    "via": f"expert:{family}",
                }
            if term or trunc:
                break
    env.close()
    return found


def run_skill_check(domain: str, url: str | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """One row per skill: code, ok, latency, attempts, fallback used, warnings, and how it was called."""
    d = get_domain(domain)
    contracts = d.contracts()
    via_expert = expert_calls(domain, url, seed)
    world, task = d.make_task(d.families[0], d.validation_seeds(d.families[0], 1)[0])
    rows = []
    for c in contracts.skills:
        if c.name in via_expert:
            rows.append(via_expert[c.name])
            continue
        last = check_skill(
            contracts,
            c.name,
            (lambda: HttpBackend(url, d.world_from_dict)) if url else PythonBackend,
            copy.deepcopy(world),
            lambda nt: d.entity_ids(world, nt),
            task.request.facts,
            d.fallback_rules(),
        )
        rows.append(
            {
                "skill": c.name,
                "code": last.code,
                "ok": last.ok,
                "latency_ms": last.latency_ms,
                "attempts": last.attempts,
                "fallback": last.fallback_used,
                "warnings": last.warnings,
                "params": last.params,
                "via": "contract",
            }
        )
    return rows
