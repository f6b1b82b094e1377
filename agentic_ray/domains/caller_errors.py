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

Domains prepare an episode for its error at reset (:meth:`~agentic_ray.domains.protocol.Domain.caller_error_setup`,
which also says whether the task can carry it) and turn a call into its erroneous version
(:meth:`~agentic_ray.domains.protocol.Domain.caller_error`); the helpers here do the two contract-level kinds for
any domain, so a domain only writes its own stale scenario and limit set-up.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any

import numpy as np

from agentic_ray.skills.contracts import EntityParam, FloatParam, SkillContract

__all__ = ["CALLER_ERROR_CAUSES", "INJECTED_CAUSES", "above_limit", "lookalike_entity"]

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
