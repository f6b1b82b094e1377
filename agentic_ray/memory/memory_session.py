"""One conversation's view of memory: the customer's long-term store, the entity graph and the short-term window.

A session is what the memory skills act on (:mod:`agentic_ray.memory.memory_skills`). It knows its customer and
episode (the namespaces), the simulated time ``now_h`` and the current ``turn`` (the env moves both). Searches read
the whole customer namespace by default (earlier conversations included: "the same locker as last time"); writes
go to this episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentic_ray.memory.entity_graph import EntityGraph
from agentic_ray.memory.memory_store import MemoryEntity, MemoryHit, MemoryRecord
from agentic_ray.memory.short_term_window import DEFAULT_K, ShortTermWindow


class LongTermMemory(Protocol):
    """What a session needs of a store: :class:`~agentic_ray.memory.memory_store.MemoryStore` in-process, or
    :class:`~agentic_ray.memory.memory_actor.RemoteMemoryStore` when one actor owns it."""

    def write(self, records: Sequence[MemoryRecord]) -> list[str]: ...

    def search(
        self, query: str, customer: str | None, episode: str | None, entity_id: str | None, limit: int
    ) -> list[MemoryHit]: ...

    def records(
        self, customer: str | None, episode: str | None, entity_id: str | None
    ) -> list[MemoryRecord]: ...


@dataclass
class RecalledEntity:
    """An entity a search revealed: its best hit's score, the fields memory holds about it, and when it was last
    confirmed (simulated hours: the entity graph's time, or the latest memory naming it)."""

    id: str
    node_type: str
    score: float
    last_confirmed_h: float
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class MemorySession:
    """The memory of one conversation.

    Args:
        store: the long-term store (in-process, or a worker's view of an actor-owned one).
        customer: the customer namespace.
        episode: this conversation's namespace.
        graph: the entity graph of this customer (shared across the customer's sessions by the caller).
        window: the short-term window.
        episode_only: search only this episode (default: every episode of the customer).
    """

    store: LongTermMemory
    customer: str
    episode: str
    graph: EntityGraph = field(default_factory=EntityGraph)
    window: ShortTermWindow = field(default_factory=lambda: ShortTermWindow(DEFAULT_K))
    episode_only: bool = False
    now_h: float = 0.0
    turn: int = 0

    def search(
        self, query: str | None, pointer: tuple[str, str] | None, limit: int = 5
    ) -> tuple[list[MemoryHit], list[RecalledEntity]]:
        """Memories for a query text, an entity pointer ``(node_type, id)``, or both (the query ranks the
        pointer's memories); and the entities they name, best score first, plus the pointer's related entities
        from the graph (score 0).

        Raises:
            ValueError: neither a query nor a pointer.
        """
        if not query and pointer is None:
            raise ValueError("a memory search needs a query or an entity pointer")
        episode = self.episode if self.episode_only else None
        entity_id = pointer[1] if pointer is not None else None
        if query:
            hits = self.store.search(query, self.customer, episode, entity_id, limit)
        else:  # a pointer alone: its memories, most recent first (scored 1.0: an exact match on the entity)
            recs = self.store.records(self.customer, episode, entity_id)[::-1][:limit]
            hits = [MemoryHit(r.id, 1.0, r) for r in recs]
        found: dict[str, RecalledEntity] = {}
        for h in hits:
            for e in h.record.entities:
                self._merge(found, e.id, e.node_type, h.score, h.record.at_h, e.fields)
        if pointer is not None and pointer[1] in self.graph:
            for rel_in in (False, True):
                for other in self.graph.related(pointer[1], incoming=rel_in):
                    n = self.graph.node(other)
                    self._merge(found, other, n["node_type"], 0.0, n["last_confirmed_h"], n["fields"])
        return hits, sorted(found.values(), key=lambda r: (-r.score, r.id))

    def _merge(
        self,
        found: dict[str, RecalledEntity],
        eid: str,
        node_type: str,
        score: float,
        at_h: float,
        fields: Mapping[str, Any],
    ) -> None:
        if eid in self.graph:
            at_h = max(at_h, self.graph.node(eid)["last_confirmed_h"])
        r = found.get(eid)
        if r is None:
            found[eid] = RecalledEntity(eid, node_type, score, at_h, dict(fields))
        else:
            r.score = max(r.score, score)
            r.last_confirmed_h = max(r.last_confirmed_h, at_h)
            r.fields = {**fields, **r.fields}

    def write(self, text: str, entities: Sequence[MemoryEntity], source: str = "agent") -> str:
        """Store one memory in this episode and mention its entities in the graph. Returns its id."""
        rec = MemoryRecord(self.customer, self.episode, text, tuple(entities), source, self.turn, self.now_h)
        for e in entities:
            self.graph.mention(
                e.id, e.node_type, source=source, at_h=self.now_h, turn=self.turn, fields=e.fields
            )
        return self.store.write([rec])[0]
