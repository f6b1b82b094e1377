"""The help desk with a memory: the help-desk world plus the caller's earlier conversations, and the memory skills'
handlers bound to the world's memory session.

A world carries its memory as data (``history``: the earlier conversations' memories, JSON-safe like the rest of
the world), so it travels to an HTTP backend and a replay rebuilds the same memory. Its
:class:`~agentic_ray.memory.memory_session.MemorySession` is built on first use from that data, over a store of its
own: an embedded Qdrant in memory (about 15 ms to open), holding the customer's namespace (``customer``: the
caller's employee id), one episode namespace per earlier conversation and this conversation's
(``conversation``), plus another customer's look-alike memory that the namespace must keep out. A world's own
store is what makes rollouts reproducible: the same seed gives the same memories, and a ``memory.write`` of one
episode never reaches another episode of the same seed.

Simulated time is in hours from the start of this conversation: earlier conversations are at negative hours, and
the session's clock advances with the world's tick (``HOURS_PER_TICK`` per env step).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.domains.helpdesk.world import HelpdeskWorld

MEMORY_TYPES: tuple[str, ...] = ("asset", "ticket")
"""Node types memory may point at and reveal."""

HOURS_PER_TICK = 0.05
"""Simulated hours one env step of this conversation takes (three minutes)."""


@dataclass
class HelpdeskMemoryWorld(HelpdeskWorld):
    """A help-desk world whose caller has earlier conversations in long-term memory.

    ``history``: memories as ``{"customer", "episode", "text", "entities": [{"id", "node_type"}], "at_h",
    "turn"}``; ``customer`` / ``conversation``: this conversation's namespaces.
    """

    customer: str = ""
    conversation: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)

    def __getstate__(self) -> dict[str, Any]:
        """Pickles and deep copies leave the memory session behind (a Qdrant client does not travel): a copy
        opens its own from ``history`` on first use, without this episode's writes."""
        state = dict(self.__dict__)
        state.pop("_memory", None)
        return state

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HelpdeskMemoryWorld:
        base = HelpdeskWorld.from_dict(d)
        return cls(
            **{f.name: getattr(base, f.name) for f in fields(HelpdeskWorld)},
            customer=str(d.get("customer", "")),
            conversation=str(d.get("conversation", "")),
            history=[dict(h) for h in d.get("history", [])],
        )


VECTORS = Path(__file__).resolve().parent / "data" / "memory_vectors.npz"
"""The shipped model's vectors of every sentence the task families write or query (:func:`build_vectors`)."""


class _MemoEmbedder:
    """The shipped sentence embedder (:mod:`agentic_ray.text`) behind a per-process memo, seeded with the vectors
    of the families' own sentences (:data:`VECTORS`, the same model's output, checked by a test). A rollout
    worker then neither loads the model (46 s to import on the loaded box) nor embeds (one to two seconds per
    sentence there); a sentence outside the families (a Serve customer's words) is embedded by the model."""

    def __init__(self, path: Path = VECTORS) -> None:
        self._memo: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path) as z:
                self._memo = dict(
                    zip([str(t) for t in z["texts"]], z["vectors"].astype(np.float32), strict=True)
                )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        from agentic_ray.text import get_embedder

        todo = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if todo:
            for t, v in zip(todo, get_embedder().encode(todo), strict=True):
                self._memo[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self._memo[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


@functools.cache
def memo_embedder() -> _MemoEmbedder:
    return _MemoEmbedder()


def build_vectors(texts: Sequence[str], path: Path = VECTORS) -> None:
    """Embed ``texts`` with the shipped model and write them to ``path`` (run when the families' sentences
    change: ``python -m agentic_ray.domains.helpdesk_memory.tasks``)."""
    from agentic_ray.text import get_embedder

    texts = sorted(set(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, texts=np.array(texts), vectors=get_embedder().encode(texts).astype(np.float32))


def memory_session(world: HelpdeskMemoryWorld) -> Any:
    """The world's :class:`~agentic_ray.memory.memory_session.MemorySession` (built on first use, see the module
    docstring, unless :func:`attach_memory` gave it one), its clock and turn set from the world's tick."""
    from agentic_ray.memory.memory_config import MemoryConfig
    from agentic_ray.memory.memory_store import MemoryStore

    s = world.__dict__.get("_memory")
    if s is None:
        s = _session(world, MemoryStore(MemoryConfig(), embedder=memo_embedder()), world.conversation, 0.0)
    s.now_h = world.__dict__.get("_memory_start_h", 0.0) + world.tick * HOURS_PER_TICK
    s.turn = world.tick
    return s


def open_memory(config: Any) -> Any:
    """A long-term store for :func:`attach_memory` (``config``: a
    :class:`~agentic_ray.memory.memory_config.MemoryConfig`), embedding with the shipped vectors' memo."""
    from agentic_ray.memory.memory_store import MemoryStore

    return MemoryStore(config, embedder=memo_embedder())


def attach_memory(world: HelpdeskMemoryWorld, store: Any, episode: str, start_h: float) -> None:
    """Serve's agent mode: the world's memory session reads and writes ``store``, which every session of the served
    app shares, instead of a store of its own, so a returning caller's facts are there in the next session.

    The world's earlier conversations are written into it (their ids derive from customer, episode and text, so
    writing them again replaces them); this conversation is episode ``episode``; the clock starts at ``start_h``
    (the store's clock, e.g. hours since the Unix epoch), so what an earlier session wrote is found with its real
    age; the entity graph holds every entity the caller's memories name, earlier sessions' included.
    """
    _session(world, store, episode, start_h)
    world.__dict__["_memory_start_h"] = start_h


def _session(world: HelpdeskMemoryWorld, store: Any, episode: str, start_h: float) -> Any:
    """A memory session of the world's caller over ``store``, holding the world's earlier conversations (their
    simulated hours shifted by ``start_h``), set as the world's."""
    from agentic_ray.memory.memory_session import MemorySession
    from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord

    store.write(
        [
            MemoryRecord(
                h["customer"],
                h["episode"],
                h["text"],
                tuple(MemoryEntity(e["id"], e["node_type"]) for e in h["entities"]),
                "customer",
                int(h.get("turn", 0)),
                start_h + float(h["at_h"]),
            )
            for h in world.history
        ]
    )
    s = MemorySession(store, customer=world.customer, episode=episode)
    for r in store.records(world.customer, None, None):
        for e in r.entities:
            s.graph.mention(e.id, e.node_type, source=r.source, at_h=r.at_h, turn=r.turn)
    world.__dict__["_memory"] = s
    return s


@functools.cache
def _handlers() -> dict[str, Any]:
    from agentic_ray.memory.memory_skills import SEARCH, WRITE, memory_handlers

    h = memory_handlers(memory_session, MEMORY_TYPES)
    return {"search": h[SEARCH], "write": h[WRITE]}


def memory_search(world: HelpdeskMemoryWorld, params: dict[str, Any]) -> dict[str, Any]:
    """``memory.search`` on the world's memory session."""
    return _handlers()["search"](world, params)  # type: ignore[no-any-return]


def memory_write(world: HelpdeskMemoryWorld, params: dict[str, Any]) -> dict[str, Any]:
    """``memory.write`` on the world's memory session."""
    return _handlers()["write"](world, params)  # type: ignore[no-any-return]
