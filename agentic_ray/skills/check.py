"""``agentic-ray skills check``: run every skill of a domain once through the ToolExecutor.

Skills the scripted expert uses are checked on the expert's own calls while it solves one validation task per
family (so business rules such as "refund only a delivered order after a stock check" hold). For any other skill
a fresh world is drawn, the skill's business preconditions are satisfied first by running the
skills they name (recursively), and the skill is then called with parameters derived from its contract:
entity arguments take ids of the world's entities of the required node type, numbers the middle of their bounds,
enums each choice. A skill is tried on a few candidate argument sets until one returns OK, so a business rule
such as "this order is not delivered yet" does not hide a working skill. The row reports that call.
"""

from __future__ import annotations

import itertools
from typing import Any

from agentic_ray.skills.backends import HttpBackend, PythonBackend
from agentic_ray.skills.contracts import (
    BoolParam,
    EntityParam,
    EnumParam,
    FloatParam,
    IntParam,
    SkillContract,
    StringParam,
    load_contracts,
)
from agentic_ray.skills.executor import SimClock, ToolExecutor, ToolResult

MAX_CANDIDATES = 24


def entity_ids(world: Any, node_type: str) -> list[str]:
    """Ids of a world's entities of one node type, read from its JSON form (``user`` / ``products`` / ...)."""
    d = world.to_dict() if hasattr(world, "to_dict") else world
    found = d.get(node_type) or d.get(node_type + "s") or []
    items = found if isinstance(found, list) else [found]
    out = []
    for it in items:
        if isinstance(it, dict):
            for key in ("id", "sku", f"{node_type}_id"):
                if key in it:
                    out.append(str(it[key]))
                    break
    return out


def candidate_params(c: SkillContract, world: Any) -> list[dict[str, Any]]:
    """Argument sets to try, derived from the contract and the world's entities."""
    axes: list[list[tuple[str, Any]]] = []
    for name, p in c.input.items():
        vals: list[Any]
        if isinstance(p, EntityParam):
            vals = entity_ids(world, p.node_type) or ["unknown"]
        elif isinstance(p, FloatParam):
            hi = min(p.max, p.min + 10.0) if p.max_from else p.max
            vals = [round(p.min + 0.25 * (hi - p.min), 2)]
        elif isinstance(p, IntParam):
            vals = [p.default if p.default is not None else (p.min + p.max) // 2]
        elif isinstance(p, EnumParam):
            vals = list(p.choices)
        elif isinstance(p, BoolParam):
            vals = [True if p.default is None else p.default]
        elif isinstance(p, StringParam):
            vals = [p.default or "agentic-ray skills check"]
        else:
            continue
        axes.append([(name, v) for v in vals])
    return [dict(combo) for combo in itertools.islice(itertools.product(*axes), MAX_CANDIDATES)]


def _satisfy(ex: ToolExecutor, c: SkillContract, params: dict[str, Any], intent: str, depth: int = 0) -> None:
    """Run the skills a precondition names, sharing the `same` params, until the precondition holds."""
    if depth > 4:
        return
    for pc in c.preconditions:
        if ex.precondition_status(c.name, params, intent)[0]:
            return
        dep = ex.contracts[pc.after]
        for cand in candidate_params(dep, ex.backend.get_world("check")):
            cand.update({k: params[k] for k in pc.same if k in params})
            shared = {k: v for k, v in params.items() if k in dep.input}
            cand.update(shared)
            _satisfy(ex, dep, cand, intent, depth + 1)
            r = ex.call(dep.name, cand, intent_id=intent, world_id="check")
            if r.ok and all(r.payload.get(k) == v for k, v in pc.where.items()):
                break


def expert_calls(domain: str, url: str | None = None, seed: int = 0) -> dict[str, dict[str, Any]]:
    """The first successful call of each skill while the scripted expert solves one task per family.

    Business rules (a refund needs a delivered order and a stock check, a coupon a late delivery, ...) make
    blind arguments fail; the expert's tasks set up exactly the state each skill needs. Same executor and
    backend as the generic path. Domains without an env return {}.
    """
    if domain != "ecommerce":
        return {}
    from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
    from agentic_ray.envs.ecommerce_tasks import FAMILIES, validation_seeds
    from agentic_ray.envs.expert import ScriptedExpert
    from agentic_ray.keys import STEP_TRACE

    cfg = AgentTaskEnvConfig(backend="http", http_url=url) if url else AgentTaskEnvConfig()
    env, expert = AgentTaskEnv(cfg), ScriptedExpert()
    found: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        env.reset(seed=seed, options={"family": family, "task_seed": validation_seeds(family, 1)[0]})
        for _ in range(env.state.budget if env.state else 20):
            _, _, term, trunc, info = env.step(expert.act(env))
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
    """One row per skill: code, ok, latency, attempts, fallback used, warnings."""
    from agentic_ray.skills.domains import get_domain

    d = get_domain(domain)
    contracts = load_contracts(d.contracts_path)
    via_expert = expert_calls(domain, url, seed)
    rows = []
    for c in contracts.skills:
        if c.name in via_expert:
            rows.append(via_expert[c.name])
            continue
        last: ToolResult | None = None
        world0 = d.make_world(seed)
        for i, params in enumerate(candidate_params(c, world0)):
            backend = HttpBackend(url, d.world_from_dict) if url else PythonBackend()
            ex = ToolExecutor(contracts, backend, clock=SimClock())
            ex.backend.put_world("check", d.make_world(seed))
            intent = ToolExecutor.intent_hash(f"check {c.name} {i}")
            _satisfy(ex, c, params, intent)
            last = ex.call(c.name, params, intent_id=intent, world_id="check")
            ex.close()
            if last.ok:
                break
        assert last is not None
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
