"""Memory reads and writes as skills: generic contracts, and in-process handlers for the executor gateway.

Recall is an action the policy learns, so memory goes through the same gateway, audit and reveal rules as any
lookup. A domain adds the two skills to its library with :func:`memory_skill_contracts` (its node types, the
fields memory may reveal per type, and the request facts a query or a note is copied from) and binds the handlers
of :func:`memory_handlers` to the episode's :class:`~agentic_ray.memory.memory_session.MemorySession`:

* ``memory.search``: a ``query`` copied from the request, and/or an entity pointer ``<node type>_id`` (one at
  most). Its typed outputs reveal, per node type, the entities the hits name (``<node type>_hits``: an
  ``entity_list`` of objects ``{id, memory_score, memory_age_h}``), exactly as a lookup reveals them; ``texts`` and
  ``scores`` carry the hits for traces. ``memory_age_h`` is the simulated time since the entity was last confirmed,
  so the policy can tell a fresh fact from one to confirm again. Other fields memory holds are revealed only where
  the domain declares them (``recalled_fields``, e.g. where an earlier order was delivered), in a list of their own
  (``<node type>_recalled``) that names only the entities whose memories state them: a contract's entity objects
  carry every declared field, and memory knows different fields of different entities.
* ``memory.write``: a ``note`` copied from the request, tied to the entity pointers given, stored in this
  episode's namespace and mentioned in the entity graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentic_ray.memory.memory_episode import WRITE_SKILL
from agentic_ray.memory.memory_session import MemorySession
from agentic_ray.memory.memory_store import MemoryEntity
from agentic_ray.skills.backends import Handler, ToolError
from agentic_ray.skills.contracts import SkillContract

SEARCH = "memory.search"
WRITE = WRITE_SKILL
HIT_SCORE = "memory_score"
HIT_AGE = "memory_age_h"


def pointer_param(node_type: str) -> str:
    """The input naming an entity of ``node_type`` (``order`` -> ``order_id``)."""
    return f"{node_type}_id"


def hits_field(node_type: str) -> str:
    """The output revealing recalled entities of ``node_type`` (``order`` -> ``order_hits``)."""
    return f"{node_type}_hits"


def recalled_field(node_type: str) -> str:
    """The output revealing what memory holds about recalled entities of ``node_type`` (``order`` ->
    ``order_recalled``)."""
    return f"{node_type}_recalled"


def memory_skill_contracts(
    node_types: Sequence[str],
    *,
    query_source: str,
    note_source: str,
    max_length: int = 512,
    handler_module: str | None = None,
    preconditions: Sequence[dict[str, Any]] = (),
    recalled_fields: Mapping[str, Mapping[str, str]] | None = None,
) -> list[SkillContract]:
    """The contracts of ``memory.search`` and ``memory.write`` for a domain's node types.

    Args:
        node_types: entity types memory may point at and reveal.
        query_source: ``request.<fact>`` a search query is copied from.
        note_source: ``request.<fact>`` a written note is copied from.
        max_length: longest query or note.
        handler_module: a module defining ``memory_search`` and ``memory_write`` (handlers bound to the worlds'
            memory sessions, e.g. with :func:`memory_handlers`); the contracts then name them
            (``handler: <module>:memory_search``), so a backend resolves them as any domain skill's.
        preconditions: business rules before either skill (e.g. ``{"any_of": [...]}``: the customer, whose
            namespace memory reads, is identified), as a contract's ``preconditions:`` entries.
        recalled_fields: per node type, fields memory may hold about an entity (``{field: output type}``, e.g.
            where an earlier order was delivered): a search reveals them, for the recalled entities whose memories
            state all of them, in ``<node type>_recalled`` (:func:`recalled_field`).

    Returns:
        ``[search, write]``, validated.
    """
    pointers = {
        pointer_param(t): {
            "type": "entity",
            "node_type": t,
            "required": False,
            "description": f"A {t} to recall.",
        }
        for t in node_types
    }
    outputs: dict[str, Any] = {
        hits_field(t): {
            "type": "entity_list",
            "node_type": t,
            "id_field": "id",
            "fields": {HIT_SCORE: "float", HIT_AGE: "float"},
        }
        for t in node_types
    }
    for t, fields in (recalled_fields or {}).items():
        outputs[recalled_field(t)] = {
            "type": "entity_list",
            "node_type": t,
            "id_field": "id",
            "fields": dict(fields),
        }
    text = {"type": "string", "max_length": max_length, "required": False}

    def extra(fn: str) -> dict[str, Any]:
        out: dict[str, Any] = {"preconditions": list(preconditions)} if preconditions else {}
        return out | ({"handler": f"{handler_module}:{fn}"} if handler_module else {})

    search = SkillContract.model_validate(
        {
            "name": SEARCH,
            "description": "Recall what the customer said before: memories nearest to a query copied from the "
            "request, or about an entity; reveals the entities they name.",
            "input": {"query": {**text, "source": query_source}, **pointers},
            "output": {"fields": {**outputs, "found": "int", "texts": "list", "scores": "list"}},
            "sla": {"timeout_ms": 500, "p95_ms": 100},
            **extra("memory_search"),
        }
    )
    write = SkillContract.model_validate(
        {
            "name": WRITE,
            "description": "Remember a note from the request, tied to the entities given, for later turns and "
            "later conversations of this customer.",
            "input": {"note": {**text, "required": True, "source": note_source}, **pointers},
            "output": {"fields": {"memory_id": "string", "entities": "int"}},
            "sla": {"timeout_ms": 500, "p95_ms": 100},
            **extra("memory_write"),
        }
    )
    return [search, write]


def memory_handlers(
    session_of: Callable[[Any], MemorySession],
    node_types: Sequence[str],
    limit: int = 5,
    recalled_fields: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Handler]:
    """In-process handlers of the two skills for a :class:`~agentic_ray.skills.backends.PythonBackend`.

    Args:
        session_of: the memory session of a backend world (e.g. ``lambda world: world.memory``).
        node_types: the node types the contracts were built for.
        limit: hits per search.
        recalled_fields: per node type, the fields the contracts' ``recalled_fields`` declared.
    """
    recalled = {t: list(fs) for t, fs in (recalled_fields or {}).items() if fs}

    def pointers(params: dict[str, Any]) -> list[tuple[str, str]]:
        return [(t, params[pointer_param(t)]) for t in node_types if params.get(pointer_param(t))]

    def search(world: Any, params: dict[str, Any]) -> dict[str, Any]:
        given = pointers(params)
        if len(given) > 1:
            raise ToolError("INVALID_INPUT", "point at one entity at most")
        if not params.get("query") and not given:
            raise ToolError("INVALID_INPUT", "a memory search needs a query or an entity pointer")
        session = session_of(world)
        hits, found = session.search(params.get("query"), given[0] if given else None, limit)
        out: dict[str, Any] = {hits_field(t): [] for t in node_types} | {
            recalled_field(t): [] for t in recalled
        }
        for r in found:
            if r.node_type in node_types:
                age = session.now_h - r.last_confirmed_h
                out[hits_field(r.node_type)].append({"id": r.id, HIT_SCORE: r.score, HIT_AGE: age})
            held = recalled.get(r.node_type, [])
            if held and all(f in r.fields for f in held):
                out[recalled_field(r.node_type)].append({"id": r.id, **{f: r.fields[f] for f in held}})
        return {
            **out,
            "found": sum(len(out[hits_field(t)]) for t in node_types),
            "texts": [h.record.text for h in hits],
            "scores": [h.score for h in hits],
        }

    def write(world: Any, params: dict[str, Any]) -> dict[str, Any]:
        entities = [MemoryEntity(eid, t) for t, eid in pointers(params)]
        memory_id = session_of(world).write(params["note"], entities)
        return {"memory_id": memory_id, "entities": len(entities)}

    return {SEARCH: search, WRITE: write}
