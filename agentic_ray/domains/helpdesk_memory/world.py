"""The help desk with a memory: the help-desk world plus the caller's earlier conversations
(:class:`~agentic_ray.memory.memory_world.MemoryWorld`: the memory travels with the world as data, each world opens
its own store from it, the memory skills' handlers act on it). The customer namespace is the caller's employee id;
another customer's look-alike memory is a colleague's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agentic_ray.domains.helpdesk.world import HelpdeskWorld
from agentic_ray.memory.memory_world import MemoryWorld, with_memory

MEMORY_TYPES: tuple[str, ...] = ("asset", "ticket")
"""Node types memory may point at and reveal."""

VECTORS = Path(__file__).resolve().parent / "data" / "memory_vectors.npz"
"""The shipped model's vectors of every sentence the task families write or query (rebuild:
``python -m agentic_ray.memory.memory_world helpdesk_memory``)."""


@dataclass
class HelpdeskMemoryWorld(HelpdeskWorld, MemoryWorld):
    """A help-desk world whose caller has earlier conversations in long-term memory (the fields of
    :class:`~agentic_ray.memory.memory_world.MemoryWorld`)."""

    memory_types: ClassVar[tuple[str, ...]] = MEMORY_TYPES
    memory_vectors: ClassVar[Path | None] = VECTORS

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HelpdeskMemoryWorld:
        return with_memory(cls, HelpdeskWorld.from_dict(d), d)
