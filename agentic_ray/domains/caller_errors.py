"""Injected caller errors (seed 000's controlled wrong samples, issue 13): contract-level helpers for domains.

A caller error is a call the agent got wrong, as opposed to a tool that failed. Three kinds are injected. Each
leaves something behind that makes a plain retry fail again, and each has its own correct fix, so the root cause
matters (a tool error, the fourth failure the reflection module tells apart, is fixed by a plain retry):

* ``wrong_entity``: the agent holds a look-alike id for an entity the task is about (seed 000's L4 failure,
  "remembers the wrong entity"): every call that names the entity sends the look-alike, which exists nowhere, until
  a lookup re-resolves the entity from a system of record (the env's ``misheld`` ids). Fix: the lookup that lists
  or identifies the entity, then the call. Retrying or re-reading the entity by its (wrong) id fails again.
* ``stale_information``: the call relies on what the agent saw of an entity that has changed since (the domain
  changes the world just before the call). Fix: re-read the entity, then call again; retrying at once fails again.
* ``bad_parameters``: a numeric argument above a limit the world sets and a lookup revealed (a ``max_from`` bound
  the referenced entity sets), where the value the call usually takes is above it too. Fix: call again with the
  value copied from the revealed limit.

**Every domain gets all three, derived from its contracts** (:func:`generic_caller_error_setup`,
:func:`generic_caller_error`; the env uses them for a domain that defines no ``caller_error`` hooks):

* ``wrong_entity``: a look-alike of a task entity of a *re-resolvable* type (some skill's entity output reveals it)
  in a call that names it (:func:`lookalike_entity`);
* ``stale_information``: a call naming a task entity of a *re-readable* type (some other skill reveals its fields)
  meets a simulated concurrent change: the backend answers ``CONFLICT`` (an injected fault, ``failure_code``) to
  every call naming that entity, except the calls that re-read it, until a result reveals the entity again. The
  world itself is not changed (generic code cannot change an opaque world); a domain's refinement may change it;
* ``bad_parameters``: a numeric argument above the ``max_from`` limit its referenced entity sets, read from the
  world (:func:`above_limit`); the tool is expected to enforce the bound its contract declares. Without the
  domain's set-up the agent's own value stays under the limit, so its next call with that value succeeds;
* the ``tool_error`` control on the calls that can carry a wrong entity.

A domain refines them with its own hooks (:meth:`~agentic_ray.domains.protocol.Domain.caller_error_setup`, which
also says whether the task can carry the cause, and :meth:`~agentic_ray.domains.protocol.Domain.caller_error`),
returning :data:`GENERIC` for a cause it leaves to the generic form; the helpers here do the contract-level parts
for any domain, so a domain only writes its own stale scenario and limit set-up.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from agentic_ray.skills.contracts import (
    ENTITY_OUTPUTS,
    DomainContracts,
    EntityListParam,
    EntityParam,
    FloatParam,
    IntParam,
    SkillContract,
)

if TYPE_CHECKING:
    from agentic_ray.domains.protocol import Domain, Task

__all__ = [
    "CALLER_ERROR_CAUSES",
    "GENERIC",
    "INJECTED_CAUSES",
    "above_limit",
    "caller_error_for",
    "caller_error_setup_for",
    "generic_caller_error",
    "generic_caller_error_setup",
    "lookalike_entity",
    "readers",
    "resolvable_types",
    "stale_entities",
]

GENERIC: Final = "generic"
"""What a domain's ``caller_error`` or ``caller_error_setup`` hook returns for a cause it leaves to the generic,
contract-derived form."""

CALLER_ERROR_CAUSES: tuple[str, ...] = ("wrong_entity", "stale_information", "bad_parameters")
"""Root causes (names in ``graph_spec.ROOT_CAUSES``) an injected caller error can have."""

INJECTED_CAUSES: tuple[str, ...] = (*CALLER_ERROR_CAUSES, "tool_error")
"""What error injection can put on a call: the caller errors, and ``tool_error``, the control whose fix is a plain
retry (the call's tool fails this once; the env makes it, a domain only says which calls can carry it)."""

LIMIT_FACTOR = 1.5
"""An above-limit value is this many times the limit (plus one), far enough to fail any tolerance."""


def lookalike_entity(
    contract: SkillContract,
    params: dict[str, Any],
    relevant: Iterable[str],
    existing: Callable[[str], Iterable[str]],
    rng: np.random.Generator,
    types: Container[str] | None = None,
) -> dict[str, Any] | None:
    """``params`` with one entity argument that names a task entity replaced by a look-alike id that exists
    nowhere (``existing(node_type)`` lists the world's ids), or None when the call names no task entity (of one
    of ``types``, when given: the types a lookup can re-resolve)."""
    rel = set(relevant)
    names = [
        n
        for n, p in contract.input.items()
        if isinstance(p, EntityParam)
        and isinstance(params.get(n), str)
        and params[n] in rel
        and (types is None or p.node_type in types)
    ]
    if not names:
        return None
    name = names[int(rng.integers(len(names)))]
    node_type = contract.input[name].node_type  # type: ignore[union-attr]
    taken = set(existing(node_type)) | rel
    base = str(params[name])
    for k in range(1, 100):
        cand = f"{base}{k}"
        if cand not in taken:
            return {**params, name: cand}
    return None


def above_limit(
    contract: SkillContract,
    params: dict[str, Any],
    field_of: Callable[[str, str, str], Any],
) -> dict[str, Any] | None:
    """``params`` with a numeric argument above the ``max_from`` limit its referenced entity sets, or None when the
    call has no such argument. ``field_of(node_type, entity_id, field)`` reads the limit (the world's value)."""
    ents = [(n, p) for n, p in contract.input.items() if isinstance(p, EntityParam)]
    for name, p in contract.input.items():
        if not isinstance(p, FloatParam) or p.max_from is None or name not in params:
            continue
        for en, ep in ents:
            eid = params.get(en)
            if not isinstance(eid, str):
                continue
            limit = field_of(ep.node_type, eid, p.max_from)
            if isinstance(limit, int | float):
                return {**params, name: round(float(limit) * LIMIT_FACTOR + 1.0, 2)}
    return None


def resolvable_types(contracts: DomainContracts) -> frozenset[str]:
    """Entity types some skill's entity output reveals (a lookup can re-resolve a wrong id of them)."""
    return frozenset(
        f.node_type
        for c in contracts.skills
        for f in c.output.fields.values()
        if f.type in ENTITY_OUTPUTS and f.node_type is not None
    )


def _ref_types(c: SkillContract) -> dict[str, str]:
    """Input parameter or entity output name -> the entity type it refers to."""
    out = {n: p.node_type for n, p in c.input.items() if isinstance(p, EntityParam | EntityListParam)}
    out |= {n: f.node_type for n, f in c.output.fields.items() if f.type == "entity" and f.node_type}
    return out


def readers(contracts: DomainContracts) -> dict[str, frozenset[str]]:
    """Skill -> the entity types its result touches (the entities its entity outputs reveal, and the entity an
    ``of:`` output attaches a value to): a call of it re-reads entities of those types, as the env counts a
    re-read (any result that reveals an entity clears its stale mark)."""
    out: dict[str, frozenset[str]] = {}
    for c in contracts.skills:
        refs = _ref_types(c)
        types = {refs[f.of] for f in c.output.fields.values() if f.of in refs}
        types |= {f.node_type for f in c.output.fields.values() if f.type in ENTITY_OUTPUTS and f.node_type}
        out[c.name] = frozenset(types)
    return out


def _named(c: SkillContract, values: dict[str, Any], relevant: Container[str]) -> list[tuple[str, str]]:
    """``(type, id)`` of the task entities the entity arguments of a call (or a goal) name."""
    out: list[tuple[str, str]] = []
    for n, p in c.input.items():
        if isinstance(p, EntityParam | EntityListParam):
            v = values.get(n)
            vals = v if isinstance(v, list | tuple) else [v]
            out += [(p.node_type, x) for x in vals if isinstance(x, str) and x in relevant]
    return out


def _stale_targets(
    contracts: DomainContracts, skill: str, values: dict[str, Any], relevant: Container[str]
) -> list[tuple[str, str]]:
    """Task entities a call of ``skill`` names that another skill re-reads and this one does not."""
    by, rd = contracts.by_name(), readers(contracts)
    rereadable = {t for s, ts in rd.items() for t in ts if s != skill}
    c = by.get(skill)
    if c is None:
        return []
    return [(t, i) for t, i in _named(c, values, relevant) if t in rereadable and t not in rd[skill]]


def stale_entities(
    contracts: DomainContracts, skill: str, params: dict[str, Any], stale: Container[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The stale entities (``(type, id)`` in ``stale``) a call of ``skill`` names without re-reading them: the
    calls the backend answers ``CONFLICT`` under a generic stale-information error."""
    c = contracts.by_name().get(skill)
    if c is None:
        return []
    rd = readers(contracts)[skill]
    out: list[tuple[str, str]] = []
    for n, p in c.input.items():
        if isinstance(p, EntityParam | EntityListParam) and p.node_type not in rd:
            v = params.get(n)
            out += [(p.node_type, x) for x in (v if isinstance(v, list) else [v]) if isinstance(x, str)]
    return [r for r in out if r in stale]


def _bounded(c: SkillContract) -> list[str]:
    return [
        n for n, p in c.input.items() if isinstance(p, FloatParam | IntParam) and getattr(p, "max_from", None)
    ]


def generic_caller_error_setup(domain: Domain, world: Any, task: Task, cause: str) -> Task | None:
    """The contract-derived :meth:`~agentic_ray.domains.protocol.Domain.caller_error_setup`: the task unchanged
    when one of its goals is a call that can carry ``cause`` (see the module docstring), else None."""
    dc = domain.contracts()
    by, rel = dc.by_name(), set(task.relevant)
    resolvable = resolvable_types(dc)
    for g in task.goals:
        c = by.get(g.skill)
        if c is None:
            continue
        if cause in ("wrong_entity", "tool_error"):
            if any(t in resolvable for t, _i in _named(c, g.args, rel)):
                return task
        elif cause == "stale_information":
            if _stale_targets(dc, g.skill, g.args, rel):
                return task
        elif cause == "bad_parameters" and any(n in g.numeric for n in _bounded(c)):
            return task
    return None


def generic_caller_error(
    domain: Domain,
    world: Any,
    task: Task,
    skill: str,
    params: dict[str, Any],
    cause: str,
    rng: np.random.Generator,
) -> dict[str, Any] | None:
    """The contract-derived :meth:`~agentic_ray.domains.protocol.Domain.caller_error` (see the module
    docstring): the call made wrong, or None when this call cannot carry ``cause``. For ``stale_information`` the
    params are unchanged: the env makes the backend answer ``CONFLICT`` (:func:`stale_entities`)."""
    dc = domain.contracts()
    c = dc.by_name().get(skill)
    if c is None:
        return None
    if cause in ("wrong_entity", "tool_error"):
        new = lookalike_entity(
            c, params, task.relevant, lambda t: domain.entity_ids(world, t), rng, resolvable_types(dc)
        )
        return new if cause == "wrong_entity" or new is None else dict(params)
    if cause == "stale_information":
        return dict(params) if _stale_targets(dc, skill, params, set(task.relevant)) else None
    if cause == "bad_parameters":
        return above_limit(c, params, lambda t, i, f: (domain.entity_fields(world, t, i) or {}).get(f))
    return None


def caller_error_for(
    domain: Domain,
    world: Any,
    task: Task,
    skill: str,
    params: dict[str, Any],
    cause: str,
    rng: np.random.Generator,
) -> tuple[dict[str, Any] | None, bool]:
    """``(the call made wrong or None, whether the generic form made it)``: the domain's own hook when it has
    one and does not return :data:`GENERIC`, else :func:`generic_caller_error`."""
    hook = getattr(domain, "caller_error", None)
    if hook is not None:
        out = hook(world, task, skill, params, cause, rng)
        if not (isinstance(out, str) and out == GENERIC):
            return out, False
    return generic_caller_error(domain, world, task, skill, params, cause, rng), True


def caller_error_setup_for(
    domain: Domain, world: Any, task: Task, cause: str, rng: np.random.Generator
) -> Task | None:
    """The domain's own ``caller_error_setup`` when it has one and does not return :data:`GENERIC`, else
    :func:`generic_caller_error_setup`."""
    hook = getattr(domain, "caller_error_setup", None)
    if hook is not None:
        out = hook(world, task, cause, rng)
        if not (isinstance(out, str) and out == GENERIC):
            return out  # type: ignore[no-any-return]
    return generic_caller_error_setup(domain, world, task, cause)
