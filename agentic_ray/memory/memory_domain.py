"""A domain with a memory, built from a domain without one: the memory skills appended to its contracts, the memory
fields added to its schema's node types, their feature maps added to its quantiles. Generic: names no domain.

A memory domain (e.g. the help desk or the shop with a memory) is its base domain plus these; a separate domain, so
that the base domain's skill head, feature widths, shipped parser and recorded checkpoints stay as they are.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from agentic_ray.domains.protocol import DomainSchema, FieldSpec, Task
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.memory.memory_skills import HIT_AGE, HIT_SCORE, memory_skill_contracts
from agentic_ray.memory.memory_world import MemoryWorld, attach_memory, open_memory, with_memory
from agentic_ray.skills.contracts import DomainContracts

MEMORY_FIELDS = (FieldSpec(HIT_SCORE, "number"), FieldSpec(HIT_AGE, "number"))
"""What a memory hit reveals about an entity (see :mod:`agentic_ray.memory.memory_skills`)."""

SCORE_QUANTILES = [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
"""Feature map of a hit's cosine score: evenly."""
AGE_QUANTILES = [0.0, 6.0, 24.0, 48.0, 72.0, 168.0, 336.0, 600.0, 1000.0]
"""Feature map of a hit's age (hours): with the freshness bounds (24 h, 72 h) inside."""

HANDLER_MODULE = "agentic_ray.memory.memory_world"
"""Where the memory skills' handlers live (bound to a :class:`~agentic_ray.memory.memory_world.MemoryWorld`)."""


def memory_schema(base: DomainSchema, node_types: Sequence[str], **changes: Any) -> DomainSchema:
    """``base`` with :data:`MEMORY_FIELDS` appended to the fields of ``node_types`` (and ``changes`` applied, e.g.
    a larger ``max_goals``)."""
    return dataclasses.replace(
        base,
        entity_types=tuple(
            dataclasses.replace(et, fields=(*et.fields, *MEMORY_FIELDS)) if et.name in node_types else et
            for et in base.entity_types
        ),
        **changes,
    )


def memory_quantiles(base: QuantileMap, node_types: Sequence[str]) -> QuantileMap:
    """``base`` plus the feature maps of the memory fields of ``node_types``."""
    extra = QuantileMap(
        {f"{t}.{HIT_SCORE}": SCORE_QUANTILES for t in node_types}
        | {f"{t}.{HIT_AGE}": AGE_QUANTILES for t in node_types}
    )
    out = QuantileMap({})
    out.xp, out.fp = {**base.xp, **extra.xp}, {**base.fp, **extra.fp}
    return out


def memory_contracts(
    base: DomainContracts,
    domain: str,
    node_types: Sequence[str],
    recall_fact: str,
    identify: Sequence[str],
    recalled_fields: dict[str, dict[str, str]] | None = None,
) -> DomainContracts:
    """``base``'s contracts, renamed ``domain``, with ``memory.search`` / ``memory.write`` appended (after the
    base's skills, so the base's skill order is kept).

    Args:
        node_types: entity types memory may point at and reveal.
        recall_fact: the request fact a search query and a written note are copied from (the customer's words).
        identify: the skills that identify the customer; memory is read in the customer's namespace, so either
            memory skill is allowed after one of them.
        recalled_fields: per node type, the fields memory may hold and a search reveals
            (:func:`~agentic_ray.memory.memory_skills.memory_skill_contracts`).
    """
    memory = memory_skill_contracts(
        node_types,
        query_source=f"request.{recall_fact}",
        note_source=f"request.{recall_fact}",
        handler_module=HANDLER_MODULE,
        recalled_fields=recalled_fields,
        preconditions=[
            {
                "any_of": list(identify),
                "description": "Memory is read in the customer's namespace: identify the customer first.",
            }
        ],
    )
    return DomainContracts(
        domain=domain,
        version=base.version,
        node_types=base.node_types,
        skills=[*base.skills, *memory],
        ask_customer=base.ask_customer,
        source=base.source,
    )


VALIDATION_SEED_BASE = 1_000_000_000
"""Task seeds at or above this value are reserved for validation; training draws below it."""


class MemoryDomain:
    """The members a domain with a memory adds to its base domain class, or overrides (a mixin listed first:
    ``class ShopMemory(MemoryDomain, ShopDomain)``). The class sets:

    * ``name`` and ``families``; ``task_module``: its task module (``generate_task(family, seed)`` and ``RECALL_FACT``,
      the request fact of the customer's words);
    * ``world_class``: its :class:`~agentic_ray.memory.memory_world.MemoryWorld` (its ``memory_types`` are what
      memory points at, its ``memory_vectors`` the shipped vectors of the families' sentences);
    * ``identify_skills``: the skills that identify the customer (memory is read in the customer's namespace);
    * ``base_contracts``: the base domain's contracts file name (the memory skills are generated);
    * ``base_quantiles``: the base domain's feature quantiles file.

    Validation seeds are a fixed range per family, disjoint from training (:data:`VALIDATION_SEED_BASE`). Serve's
    agent-mode sessions share one long-term store through ``open_memory`` / ``attach_memory`` (``agent.memory`` of
    the serve settings), so a returning customer's facts are there in the next session.
    """

    name: str
    families: tuple[str, ...]
    task_module: ClassVar[Any]
    world_class: ClassVar[type[MemoryWorld]]
    identify_skills: ClassVar[tuple[str, ...]]
    base_contracts: ClassVar[str]
    base_quantiles: ClassVar[Path]

    @property
    def contracts_path(self) -> Path:
        return super().contracts_path.with_name(self.base_contracts)  # type: ignore[misc]

    @functools.cache  # noqa: B019 - one instance per process; contracts are immutable
    def contracts(self) -> DomainContracts:
        base = super().contracts()  # type: ignore[misc]
        w = self.world_class
        fact = self.task_module.RECALL_FACT
        return memory_contracts(base, self.name, w.memory_types, fact, self.identify_skills, w.memory_fields)

    def make_task(self, family: str, seed: int) -> tuple[Any, Task]:
        return self.task_module.generate_task(family, seed)  # type: ignore[no-any-return]

    def validation_seeds(self, family: str, n: int) -> list[int]:
        """The fixed validation seeds of one family (disjoint from any training seed)."""
        return [VALIDATION_SEED_BASE + self.families.index(family) * 100_000 + i for i in range(n)]

    def draw_training_seed(self, rng: np.random.Generator) -> int:
        return int(rng.integers(0, VALIDATION_SEED_BASE))

    def world_from_dict(self, d: dict[str, Any]) -> Any:
        return self.world_class.from_dict(d)  # type: ignore[attr-defined]

    def perturb_hidden(self, world: Any, rng: np.random.Generator) -> Any:
        """The base domain's hidden-value edits (on its copy of the world), with the memory kept."""
        edited = super().perturb_hidden(world, rng)  # type: ignore[misc]
        return with_memory(self.world_class, edited, world.to_dict())

    @functools.cache  # noqa: B019
    def quantiles(self) -> QuantileMap:
        return memory_quantiles(QuantileMap.from_json(self.base_quantiles), self.world_class.memory_types)

    def open_memory(self, config: Any) -> Any:
        """A store that Serve's agent-mode sessions share (:func:`~agentic_ray.memory.memory_world.open_memory`)."""
        return open_memory(config, self.world_class.memory_vectors)

    def attach_memory(self, world: Any, store: Any, episode: str, start_h: float) -> None:
        """Point a session's world at the shared store (:func:`~agentic_ray.memory.memory_world.attach_memory`)."""
        attach_memory(world, store, episode, start_h)
