"""Contract-derived skill checks: call a skill through the ToolExecutor with arguments its contract implies.

:func:`check_skill` draws candidate arguments from the contract (entity arguments take ids of the world's entities
of the required node type, numbers a point inside their bounds, enums each choice, copied strings the request's
facts), satisfies the skill's business preconditions first by running the skills they name (recursively, sharing
the ``same`` arguments), and tries candidates until one returns OK, so a business rule such as "this order is not
delivered yet" does not hide a working skill. ``agentic-ray skills check`` (:mod:`agentic_ray.envs.skill_check`)
uses it for the skills the domain's expert does not call.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from agentic_ray.skills.backends import Backend
from agentic_ray.skills.contracts import (
    BoolParam,
    DomainContracts,
    EntityListParam,
    EntityParam,
    EnumParam,
    FloatParam,
    IntParam,
    SkillContract,
    StringParam,
)
from agentic_ray.skills.executor import SimClock, ToolExecutor, ToolResult

MAX_CANDIDATES = 24

EntityIds = Callable[[str], list[str]]
"""``node type -> ids of the world's entities of that type``."""


def candidate_params(
    c: SkillContract, ids_of: EntityIds, facts: Mapping[str, str | tuple[str, ...]] | None = None
) -> list[dict[str, Any]]:
    """Argument sets to try, derived from the contract, the world's entities and the request facts."""
    axes: list[list[tuple[str, Any]]] = []
    for name, p in c.input.items():
        vals: list[Any]
        if isinstance(p, EntityParam):
            vals = ids_of(p.node_type) or ["unknown"]
        elif isinstance(p, EntityListParam):
            ids = ids_of(p.node_type) or ["unknown"]
            lead = c.input.get(p.paired_with or "")
            n = max(
                (lead if isinstance(lead, EntityListParam) else p).min_items, 1
            )  # a paired list: its leader's
            vals = [(ids * n)[:n] if not p.unique else ids[:n]]
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
            fact = p.request_fact
            given = (facts or {}).get(fact, "") if fact else (p.default or "agentic-ray skills check")
            vals = list(given) if isinstance(given, tuple) else [given]  # a fact with several values: each
        else:
            continue
        axes.append([(name, v) for v in vals])
    return [dict(combo) for combo in itertools.islice(itertools.product(*axes), MAX_CANDIDATES)]


def _satisfy(
    ex: ToolExecutor,
    c: SkillContract,
    params: dict[str, Any],
    intent: str,
    ids_of: EntityIds,
    facts: Mapping[str, str | tuple[str, ...]] | None,
    depth: int = 0,
) -> None:
    """Run the skills a precondition names, sharing the `same` params, until the precondition holds."""
    if depth > 4:
        return
    for pc in c.preconditions:
        if ex.precondition_status(c.name, params, intent)[0]:
            return
        for after in pc.skills:
            dep = ex.contracts[after]
            done = False
            for cand in candidate_params(dep, ids_of, facts):
                cand.update({k: params[k] for k in pc.same if k in params and k in dep.input})
                cand.update({k: v for k, v in params.items() if k in dep.input})
                _satisfy(ex, dep, cand, intent, ids_of, facts, depth + 1)
                r = ex.call(dep.name, cand, intent_id=intent, world_id="check")
                if r.ok and all(r.payload.get(k) == v for k, v in pc.where.items()):
                    done = True
                    break
            if done:
                break


def check_skill(
    contracts: DomainContracts,
    skill: str,
    make_backend: Callable[[], Backend],
    world: Any,
    ids_of: EntityIds,
    facts: Mapping[str, str | tuple[str, ...]] | None = None,
    rules: dict[str, Any] | None = None,
) -> ToolResult:
    """The first OK call of ``skill`` over its candidate arguments (or the last failure), each on a fresh copy
    of ``world`` in a fresh executor."""
    c = contracts.by_name()[skill]
    last: ToolResult | None = None
    for i, params in enumerate(candidate_params(c, ids_of, facts)):
        ex = ToolExecutor(contracts, make_backend(), clock=SimClock(), rules=rules)
        ex.backend.put_world("check", copy.deepcopy(world))
        intent = ToolExecutor.intent_hash(f"check {c.name} {i}")
        _satisfy(ex, c, params, intent, ids_of, facts)
        last = ex.call(c.name, params, intent_id=intent, world_id="check")
        ex.close()
        if last.ok:
            break
    assert last is not None
    return last
