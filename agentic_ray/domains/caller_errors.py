"""Injected caller errors (seed 000's controlled wrong samples, issue 13): contract-level helpers for domains.

A caller error is a call the agent got wrong, as opposed to a tool that failed. Three kinds are injected, each
with its own correct fix, so the root cause the env attributes (the policy's reflection input) matters:

* ``wrong_entity``: an entity argument names an entity the task is not about (a look-alike id that exists
  nowhere). Fix: call again on the request's entity; re-reading first wastes a step.
* ``stale_information``: the call relies on a revealed value that changed since it was read (the domain changes
  the world just before the call). Fix: re-read the entity, then call again; retrying at once fails again.
* ``bad_parameters``: a numeric argument above its limit (a ``max_from`` bound the referenced entity sets).
  Fix: call again with the value the task needs.

:meth:`~agentic_ray.domains.protocol.Domain.caller_error` turns a call into its erroneous version; the helpers
here do the two contract-level kinds for any domain, so a domain only writes its own stale scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from agentic_ray.skills.contracts import EntityParam, FloatParam, SkillContract

__all__ = ["CALLER_ERROR_CAUSES", "above_limit", "lookalike_entity"]

CALLER_ERROR_CAUSES: tuple[str, ...] = ("wrong_entity", "stale_information", "bad_parameters")
"""Root causes (names in ``graph_spec.ROOT_CAUSES``) an injected caller error can have."""

LIMIT_FACTOR = 1.5
"""An above-limit value is this many times the limit (plus one), far enough to fail any tolerance."""


def lookalike_entity(
    contract: SkillContract,
    params: dict[str, Any],
    relevant: Iterable[str],
    existing: Callable[[str], Iterable[str]],
    rng: np.random.Generator,
) -> dict[str, Any] | None:
    """``params`` with one entity argument that names a task entity replaced by a look-alike id that exists
    nowhere (``existing(node_type)`` lists the world's ids), or None when the call names no task entity."""
    rel = set(relevant)
    names = [
        n
        for n, p in contract.input.items()
        if isinstance(p, EntityParam) and isinstance(params.get(n), str) and params[n] in rel
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
