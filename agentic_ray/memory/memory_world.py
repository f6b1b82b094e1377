"""A domain world with a memory: the customer's earlier conversations carried as data, the world's memory session,
and the memory skills' handlers bound to it. Generic: a memory domain's world mixes in :class:`MemoryWorld`.

A world carries its memory as data (``history``: the earlier conversations' memories, JSON-safe like the rest of
the world), so it travels to an HTTP backend and a replay rebuilds the same memory. Its
:class:`~agentic_ray.memory.memory_session.MemorySession` is built on first use from that data, over a store of its
own (a collection of the thread's embedded in-memory Qdrant, :func:`_shared_client`), holding the customer's
namespace (``customer``), one episode namespace per earlier conversation and this conversation's
(``conversation``), plus other customers' look-alike memories that the namespace must keep out. A world's own store is what makes rollouts reproducible: the
same seed gives the same memories, and a ``memory.write`` of one episode never reaches another episode of the same
seed.

Simulated time is in hours from the start of this conversation: earlier conversations are at negative hours, and
the session's clock advances with the world's tick (:data:`HOURS_PER_TICK` per env step).

Embedding goes through a per-process memo seeded with the shipped vectors of the domain's own sentences
(``memory_vectors`` of the world class, built by :func:`build_vectors` with the shipped model), so a rollout worker
neither loads the model nor embeds.
"""

from __future__ import annotations

import collections
import functools
import itertools
import random
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

HOURS_PER_TICK = 0.05
"""Simulated hours one env step of a conversation takes (three minutes)."""

MEMORY_STATE = "_memory"
"""Key of a world's memory session in its ``__dict__`` (not a dataclass field: it never travels)."""
START_STATE = "_memory_start_h"


@dataclass(kw_only=True)
class MemoryWorld:
    """Mixin of a dataclass world whose customer has earlier conversations in long-term memory (keyword-only
    fields, so that they follow the world's own in its constructor).

    Attributes:
        customer: this conversation's customer namespace.
        conversation: this conversation's episode namespace.
        history: memories as ``{"customer", "episode", "text", "entities": [{"id", "node_type"}], "at_h",
            "turn"}`` (:func:`memory_record`).
    """

    customer: str = ""
    conversation: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    memory_types: ClassVar[tuple[str, ...]] = ()
    """Node types memory may point at and reveal."""
    memory_vectors: ClassVar[Path | None] = None
    """The shipped model's vectors of every sentence the world's task families write or query."""
    memory_fields: ClassVar[dict[str, dict[str, str]]] = {}
    """Per node type, fields memory may hold and reveal (``{field: output type}``: the memory contracts'
    ``recalled_fields``)."""

    @property
    def clock_tick(self) -> int:
        """The world's tick (env steps of this conversation), which moves the memory session's clock."""
        return int(getattr(self, "tick", 0))

    def __getstate__(self) -> dict[str, Any]:
        """Pickles and deep copies leave the memory session behind (a Qdrant client does not travel): a copy
        opens its own from ``history`` on first use, without this episode's writes."""
        state = dict(self.__dict__)
        state.pop(MEMORY_STATE, None)
        return state


W = TypeVar("W", bound=MemoryWorld)


def with_memory(cls: type[W], base: Any, d: dict[str, Any]) -> W:
    """A ``cls`` world (a memory world over ``base``'s class) from the base world ``base`` and the memory fields of
    ``d`` (a ``to_dict()``): the body of ``cls.from_dict``."""
    own = {f.name for f in fields(MemoryWorld)}
    return cls(
        **{f.name: getattr(base, f.name) for f in fields(base) if f.name not in own},
        customer=str(d.get("customer", "")),
        conversation=str(d.get("conversation", "")),
        history=[dict(h) for h in d.get("history", [])],
    )


def memory_record(
    customer: str,
    episode: str,
    text: str,
    node_type: str,
    entity: str,
    at_h: float,
    fields: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One memory of ``history``: ``text`` said by ``customer`` in conversation ``episode``, naming one entity (with
    the ``fields`` it states about it, if any), at ``at_h`` hours (negative: before this conversation)."""
    return {
        "customer": customer,
        "episode": episode,
        "text": text,
        "entities": [{"id": entity, "node_type": node_type} | ({"fields": dict(fields)} if fields else {})],
        "at_h": at_h,
        "turn": 0,
    }


def key_fact(
    slot: str,
    value: str,
    needed_turn: int,
    confirmed_at_h: float,
    distractors: Sequence[str] | None = None,
    stated_turn: int = 0,
) -> dict[str, Any]:
    """A task's key fact as ``Task.key_facts`` holds it (a :class:`~agentic_ray.memory.memory_episode.KeyFact` as a
    dict; ``distractors`` only when given)."""
    out: dict[str, Any] = {
        "slot": slot,
        "value": value,
        "stated_turn": stated_turn,
        "needed_turn": needed_turn,
        "confirmed_at_h": confirmed_at_h,
    }
    return out | ({"distractors": list(distractors)} if distractors is not None else {})


def earlier_memories(
    customer: str,
    episode: str,
    node_type: str,
    said: Sequence[tuple[str, str]],
    r: random.Random,
    hours: tuple[float, float],
    fixed: Mapping[str, float | None] | None = None,
) -> list[dict[str, Any]]:
    """One earlier conversation of ``customer`` per ``(entity id, text)`` of ``said`` (episodes ``<episode>-<i>``),
    each at ``-uniform(*hours)`` hours (drawn from ``r`` in order), or at ``fixed[id]`` hours where given (None: no
    conversation about that entity; neither draws)."""
    fixed = fixed or {}
    out = []
    for i, (eid, text) in enumerate(said):
        at = fixed[eid] if eid in fixed else -round(r.uniform(*hours), 2)
        if at is not None:
            out.append(memory_record(customer, f"{episode}-{i}", text, node_type, eid, at))
    return out


class MemoEmbedder:
    """The shipped sentence embedder (:mod:`agentic_ray.text`) behind a per-process memo, seeded with the vectors
    at ``path`` (the same model's output, checked by a test). A rollout worker then neither loads the model (46 s
    to import on the loaded box) nor embeds (one to two seconds per sentence there); a sentence outside the
    families (a Serve customer's words) is embedded by the model."""

    def __init__(self, path: Path | None = None) -> None:
        self._memo: dict[str, np.ndarray] = {}
        if path is not None and path.exists():
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
def memo_embedder(path: Path | None) -> MemoEmbedder:
    """One memo per process and vectors file."""
    return MemoEmbedder(path)


def build_vectors(texts: Sequence[str], path: Path) -> None:
    """Embed ``texts`` with the shipped model and write them to ``path`` (run when a domain's sentences change)."""
    from agentic_ray.text import get_embedder

    texts = sorted(set(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, texts=np.array(texts), vectors=get_embedder().encode(texts).astype(np.float32))


def memory_session(world: MemoryWorld) -> Any:
    """The world's :class:`~agentic_ray.memory.memory_session.MemorySession` (built on first use, see the module
    docstring, unless :func:`attach_memory` gave it one), its clock and turn set from the world's tick."""
    from agentic_ray.memory.memory_config import MemoryConfig
    from agentic_ray.memory.memory_store import MemoryStore

    s = world.__dict__.get(MEMORY_STATE)
    if s is None:
        name = f"world-{next(_WORLD_STORES)}"
        client, gone = _shared_client()
        store = MemoryStore(
            MemoryConfig(collection=name), embedder=memo_embedder(type(world).memory_vectors), client=client
        )
        weakref.finalize(store, gone.append, name)  # the world is gone: its collection goes at the next open
        s = _session(world, store, world.conversation, 0.0)
    s.now_h = world.__dict__.get(START_STATE, 0.0) + world.clock_tick * HOURS_PER_TICK
    s.turn = world.clock_tick
    return s


_WORLD_STORES = itertools.count()
_LOCAL = threading.local()


def _shared_client() -> tuple[Any, collections.deque[str]]:
    """This thread's in-memory Qdrant client, shared by the worlds' own stores, one collection each, and the names
    of the collections whose worlds are gone (dropped here first, on this thread).

    Each world used to open a client of its own: ~8 ms, most of it qdrant-client building its inference
    inspector's model schemas (a deepcopy per client), against ~0.05 ms to create a collection in a shared one;
    on help-desk-memory that was ~27% of env time (py-spy, random masked policy). A collection is a store of its
    own (its points, scrolls and counts see no other), so a world still reads only its memories, and the golden
    trajectories (tests/unit/envs/test_env_golden.py) are unchanged. Per thread, and a collection is dropped by
    the thread that owns the client, never by a finalizer (which runs on whichever thread collects the world):
    qdrant-client's local mode is not documented as thread-safe."""
    state = getattr(_LOCAL, "state", None)
    if state is None:
        from qdrant_client import QdrantClient

        state = _LOCAL.state = (QdrantClient(location=":memory:"), collections.deque())
    client, gone = state
    while gone:
        client.delete_collection(gone.popleft())
    return state


def open_memory(config: Any, vectors: Path | None) -> Any:
    """A long-term store for :func:`attach_memory` (``config``: a
    :class:`~agentic_ray.memory.memory_config.MemoryConfig`), embedding with the memo of ``vectors``."""
    from agentic_ray.memory.memory_store import MemoryStore

    return MemoryStore(config, embedder=memo_embedder(vectors))


def attach_memory(world: MemoryWorld, store: Any, episode: str, start_h: float) -> None:
    """Serve's agent mode: the world's memory session reads and writes ``store``, which every session of the served
    app shares, instead of a store of its own, so a returning customer's facts are there in the next session.

    The world's earlier conversations are written into it (their ids derive from customer, episode and text, so
    writing them again replaces them); this conversation is episode ``episode``; the clock starts at ``start_h``
    (the store's clock, e.g. hours since the Unix epoch), so what an earlier session wrote is found with its real
    age; the entity graph holds every entity the customer's memories name, earlier sessions' included.
    """
    _session(world, store, episode, start_h)
    world.__dict__[START_STATE] = start_h


def _session(world: MemoryWorld, store: Any, episode: str, start_h: float) -> Any:
    """A memory session of the world's customer over ``store``, holding the world's earlier conversations (their
    simulated hours shifted by ``start_h``), set as the world's."""
    from agentic_ray.memory.memory_session import MemorySession
    from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord

    store.write(
        [
            MemoryRecord(
                h["customer"],
                h["episode"],
                h["text"],
                tuple(
                    MemoryEntity(e["id"], e["node_type"], dict(e.get("fields", {}))) for e in h["entities"]
                ),
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
            s.graph.mention(e.id, e.node_type, source=r.source, at_h=r.at_h, turn=r.turn, fields=e.fields)
    world.__dict__[MEMORY_STATE] = s
    return s


@functools.cache
def _handlers(node_types: tuple[str, ...], fields: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, Any]:
    from agentic_ray.memory.memory_skills import memory_handlers

    return memory_handlers(memory_session, node_types, recalled_fields=dict(fields))


def _world_handlers(world: MemoryWorld) -> dict[str, Any]:
    cls = type(world)
    return _handlers(cls.memory_types, tuple((t, tuple(fs)) for t, fs in cls.memory_fields.items()))


def memory_search(world: MemoryWorld, params: dict[str, Any]) -> dict[str, Any]:
    """``memory.search`` on the world's memory session (the contracts' handler)."""
    from agentic_ray.memory.memory_skills import SEARCH

    return _world_handlers(world)[SEARCH](world, params)  # type: ignore[no-any-return]


def memory_write(world: MemoryWorld, params: dict[str, Any]) -> dict[str, Any]:
    """``memory.write`` on the world's memory session (the contracts' handler)."""
    from agentic_ray.memory.memory_skills import WRITE

    return _world_handlers(world)[WRITE](world, params)  # type: ignore[no-any-return]


def main() -> None:  # pragma: no cover - maintenance entry point
    """Rebuild a memory domain's shipped vectors from its task module's ``sentences()``:
    ``python -m agentic_ray.memory.memory_world <domain>`` (when the families' sentences change)."""
    import sys

    from agentic_ray.domains import get_domain

    d: Any = get_domain(sys.argv[1])
    path = d.world_class.memory_vectors
    build_vectors(d.task_module.sentences(), path)
    print(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    main()
