"""One Ray actor owns a store that several workers share (Qdrant's local mode allows one process per path).

The actor is :class:`~agentic_ray.memory.memory_store.MemoryStore` itself, made remote: every method keeps its
signature and returns the same plain dataclasses. A named actor (``get_if_exists``) lets every EnvRunner find the
one owner of a run's store. The hop costs one Ray round trip per call; ``benchmarks/memory.py`` measures it
(``actor_hop_ms``: the median of a remote search minus the median of the same search in-process).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import ray

from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_store import Embedder, EmbedsTexts, MemoryHit, MemoryRecord, MemoryStore


def memory_actor(config: MemoryConfig, name: str | None = None, namespace: str | None = None) -> Any:
    """The actor owning ``config``'s store: created, or (with ``name``) found if it already runs.

    Args:
        config: the store's settings (its ``path`` is opened inside the actor's process).
        name: a Ray actor name shared by every worker of the run (None: an anonymous actor).
        namespace: the Ray namespace of a named actor (None: the job's).

    Returns:
        An actor handle with :class:`MemoryStore`'s methods (``handle.search_vector.remote(...)``).
    """
    opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": 1}
    if name is not None:
        opts.update(name=name, get_if_exists=True, namespace=namespace)
    return ray.remote(MemoryStore).options(**opts).remote(config)


class RemoteMemoryStore(EmbedsTexts):
    """A worker's view of an actor-owned store, with the store's reading and writing methods.

    Texts are embedded here, in the calling worker, and only vectors cross to the owner: the actor does index work
    alone and never becomes the embedding bottleneck of every worker. A
    :class:`~agentic_ray.memory.memory_session.MemorySession` takes it in place of a :class:`MemoryStore`.

    Args:
        handle: the owner (:func:`memory_actor`).
        embedder: the worker's embedder (default: the shipped model, loaded once per process).
    """

    def __init__(self, handle: Any, embedder: Embedder | None = None) -> None:
        self.handle = handle
        self._embedder = embedder

    def write(self, records: Sequence[MemoryRecord]) -> list[str]:
        vectors = self.embedder.encode([r.text for r in records])
        return list(ray.get(self.handle.write_vectors.remote(list(records), vectors)))

    def search(
        self,
        query: str,
        customer: str | None,
        episode: str | None = None,
        entity_id: str | None = None,
        limit: int = 5,
    ) -> list[MemoryHit]:
        vector: np.ndarray = self.embedder.encode([query])[0]
        return list(ray.get(self.handle.search_vector.remote(vector, customer, episode, entity_id, limit)))

    def records(
        self, customer: str | None, episode: str | None = None, entity_id: str | None = None
    ) -> list[MemoryRecord]:
        return list(ray.get(self.handle.records.remote(customer, episode, entity_id)))
