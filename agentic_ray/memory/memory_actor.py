"""One Ray actor owns a store that several workers share (Qdrant's local mode allows one process per path).

The actor is :class:`~agentic_ray.memory.memory_store.MemoryStore` itself, made remote: every method keeps its
signature and returns the same plain dataclasses. A named actor (``get_if_exists``) lets every EnvRunner find the
one owner of a run's store. The hop costs one Ray round trip per call; ``benchmarks/memory.py`` measures it
(``actor_hop_ms``: the median of a remote search minus the median of the same search in-process).
"""

from __future__ import annotations

from typing import Any

import ray

from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_store import MemoryStore


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
