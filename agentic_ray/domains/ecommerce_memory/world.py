"""The shop with a memory: the e-commerce world plus the customer's earlier conversations
(:class:`~agentic_ray.memory.memory_world.MemoryWorld`: the memory travels with the world as data, each world opens
its own store from it, the memory skills' handlers act on it). The customer namespace is the customer's user id;
another customer's look-alike memory sits in another namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agentic_ray.domains.ecommerce.world import ShopWorld
from agentic_ray.memory.memory_world import MemoryWorld, with_memory

MEMORY_TYPES: tuple[str, ...] = ("order", "product")
"""Node types memory may point at and reveal."""

DELIVERED_TO = "delivered_to"
"""What memory may hold about an earlier order: where the customer had it delivered (an address source)."""

VECTORS = Path(__file__).resolve().parent / "data" / "memory_vectors.npz"
"""The shipped model's vectors of every sentence the task families write or query (rebuild:
``python -m agentic_ray.memory.memory_world ecommerce_memory``)."""


@dataclass
class ShopMemoryWorld(ShopWorld, MemoryWorld):
    """A shop world whose customer has earlier conversations in long-term memory (the fields of
    :class:`~agentic_ray.memory.memory_world.MemoryWorld`)."""

    memory_types: ClassVar[tuple[str, ...]] = MEMORY_TYPES
    memory_vectors: ClassVar[Path | None] = VECTORS
    memory_fields: ClassVar[dict[str, dict[str, str]]] = {"order": {DELIVERED_TO: "string"}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShopMemoryWorld:
        return with_memory(cls, ShopWorld.from_dict(d), d)
