"""What the agent knows: entities and fields revealed by the request and by tool results.

:class:`Knowledge` holds, per entity type, the entities known so far in the order they were revealed (that order
is the node order of the observation, so a pointer index means the same entity for the whole episode) and the
fields revealed for each, and which entities the request names (:attr:`Knowledge.mentioned`, until a task's
short-term window drops the request: :meth:`Knowledge.forget_mentions`). :func:`reveal_result` applies one
successful tool result to it, driven only by the contract's typed output fields (see
:class:`~agentic_ray.skills.contracts.OutputField`): an ``entity`` field reveals that entity (a nested object with
its declared ``id_field`` reveals its fields too), an ``entity_list`` field the listed ones and an ``entity_map``
field the ids it is keyed by (each with the fields its object carries), and ``of: <name>`` attaches a value to the
entity the input parameter or output field ``<name>`` refers to.

The env and the Serve endpoint rebuild knowledge with the same two calls, from the request and the transcript,
so an observation is a pure function of (request, transcript, SLA state).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from agentic_ray.skills.contracts import ENTITY_OUTPUTS, EntityListParam, EntityParam, SkillContract

__all__ = ["Knowledge", "reveal_result"]


class Knowledge:
    """Revealed entities and fields.

    Args:
        entity_types: the domain's entity types.
    """

    def __init__(self, entity_types: Iterable[str]) -> None:
        self._entities: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in entity_types}
        self.mentioned: set[tuple[str, str]] = set()
        self.version = 0
        """Incremented by every reveal (observation builders cache on it)."""
        self.entity_version: dict[tuple[str, str], int] = {}
        """Per entity, the :attr:`version` of its last change (builders re-encode only changed rows)."""

    @property
    def entity_types(self) -> tuple[str, ...]:
        return tuple(self._entities)

    def reveal(self, entity_type: str, entity_id: str, fields: dict[str, Any] | None = None) -> None:
        """Make an entity known (idempotent) and set the given fields (later values win).

        :attr:`version` and the entity's :attr:`entity_version` move only when something changes: a new entity,
        a new field, or a field whose value changes (another value, or an equal one of another type). A repeated
        lookup that reveals nothing new leaves them, so the builders' and masks' caches keyed on them stay valid
        (the version bumped on every reveal before, and a re-read invalidated the observation's entity part
        for nothing)."""
        ents = self._entities.get(entity_type)
        if ents is None:
            raise KeyError(f"unknown entity type {entity_type!r}; known: {list(self._entities)}")
        eid = str(entity_id)
        d = ents.get(eid)
        changed = d is None
        if d is None:
            d = ents[eid] = {}
        if fields:
            if not changed:
                for f, v in fields.items():
                    if f not in d:
                        changed = True
                        break
                    if not _same(d[f], v):
                        changed = True
                        break
            d.update(fields)
        if changed:
            self.version += 1
            self.entity_version[(entity_type, eid)] = self.version

    def mention(self, entity_type: str, entity_id: str) -> None:
        """The request names this entity: it is known (without fields) from the start."""
        ref = (entity_type, str(entity_id))
        known = self.version
        self.reveal(entity_type, entity_id)
        if ref not in self.mentioned:
            self.mentioned.add(ref)
            if self.version == known:  # known already, now also named: its row's "mentioned" flag changes
                self.version += 1
                self.entity_version[ref] = self.version

    def forget_mentions(self) -> None:
        """The request has left the short-term window (``Task.short_term_window``): its entities stay known but
        are no longer marked as named by the request."""
        for ref in self.mentioned:
            self.version += 1
            self.entity_version[ref] = self.version
        self.mentioned.clear()

    def ids(self, entity_type: str) -> list[str]:
        """Known ids of a type, in reveal order."""
        return list(self._entities.get(entity_type, {}))

    def fields(self, entity_type: str, entity_id: str) -> dict[str, Any]:
        """Revealed fields of an entity ({} if unknown)."""
        return self._entities.get(entity_type, {}).get(str(entity_id), {})

    def knows(self, entity_type: str, entity_id: Any) -> bool:
        return isinstance(entity_id, str) and entity_id in self._entities.get(entity_type, {})

    def type_of(self, entity_id: str) -> str | None:
        """The type of a known id (first match), or None."""
        for t, ents in self._entities.items():
            if entity_id in ents:
                return t
        return None

    def copy(self) -> Knowledge:
        k = Knowledge(self._entities)
        k._entities = copy.deepcopy(self._entities)
        k.mentioned = set(self.mentioned)
        k.version = self.version
        k.entity_version = dict(self.entity_version)
        return k

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (for traces and serving)."""
        return {"entities": copy.deepcopy(self._entities), "mentioned": sorted(self.mentioned)}


def _same(a: Any, b: Any) -> bool:
    """Whether a revealed value repeats one already known: the same type and equal (a value that cannot say,
    such as an array, counts as new)."""
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _ref_type(contract: SkillContract, name: str) -> str | None:
    """Entity type that input parameter or output field ``name`` refers to."""
    p = contract.input.get(name)
    if isinstance(p, EntityParam | EntityListParam):
        return p.node_type
    f = contract.output.fields.get(name)
    if f is not None and f.type == "entity":
        return f.node_type
    return None


def _ref_id(contract: SkillContract, name: str, params: dict[str, Any], payload: dict[str, Any]) -> Any:
    """The id input parameter or output field ``name`` holds (a nested entity object's declared id)."""
    if name in params:
        return params[name]
    f = contract.output.fields.get(name)
    if f is not None and f.type == "entity" and name in payload:
        ids = f.entity_ids(payload[name])
        return ids[0] if ids else None
    return payload.get(name)


def reveal_result(
    knowledge: Knowledge, contract: SkillContract, params: dict[str, Any], payload: dict[str, Any]
) -> list[tuple[str, str]]:
    """Apply one successful (non-degraded) tool result to ``knowledge``.

    Entity fields are applied first, so ``of:`` may name an entity revealed by the same result.

    Returns:
        ``(type, id)`` of every entity the result revealed or updated.
    """
    touched: list[tuple[str, str]] = []
    outs = contract.output.fields
    known_types = set(knowledge.entity_types)

    def attach(of: str | None, key: str, value: Any) -> None:
        if of is None:
            return
        t = _ref_type(contract, of)
        rid = _ref_id(contract, of, params, payload)
        if t in known_types and isinstance(rid, str) and rid:
            knowledge.reveal(t, rid, {key: value})
            touched.append((t, rid))

    for name, f in outs.items():
        if name not in payload or f.type not in ENTITY_OUTPUTS or f.node_type not in known_types:
            continue
        items = f.entity_items(payload[name])
        for eid, fields in items:
            knowledge.reveal(f.node_type, eid, fields)
        touched += [(f.node_type, eid) for eid, _f in items]
        if f.type == "entity":
            if items:
                attach(f.of, f.field_name(name, params), items[0][0])
        elif isinstance(payload[name], list | dict):
            attach(f.of, f.field_name(name, params), [eid for eid, _f in items])
    for name, f in outs.items():
        if f.type in ENTITY_OUTPUTS or f.of is None or name not in payload:
            continue
        attach(f.of, f.field_name(name, params), payload[name])
    return list(dict.fromkeys(touched))
