"""The help desk with a memory (issue 27, phase 2): help-desk tasks in which the caller refers to an earlier call.

``domain`` is the :class:`~agentic_ray.domains.protocol.Domain` the registry loads (``helpdesk_memory``). It is the
help-desk domain (same world, tools, contracts, rules and expert) plus:

* the memory skills ``memory.search`` / ``memory.write`` (:func:`~agentic_ray.memory.memory_skills.
  memory_skill_contracts`, appended after the help desk's skills, allowed once the caller is identified: memory is
  read in the caller's namespace), handled on the world's memory session (:mod:`.world`);
* two asset fields memory reveals (``memory_score``, ``memory_age_h``), so the observation shows which recalled
  asset the caller's words match best and how long ago it was last talked about;
* the task families of :mod:`.tasks`, whose key facts feed the memory reward and Entity Recall@5 / forgetting
  (``ticket_said_earlier``: a fact stated early in the call, needed after the short-term window dropped it; up to
  seven goals, so this domain's ``max_goals`` is 7);
* the optional memory hooks ``open_memory`` / ``attach_memory``: Serve's agent-mode sessions then share one
  long-term store (``agent.memory`` of the serve settings), so a returning caller's facts are there in the next
  session;
* its own ``data/``: action prototypes mined from its expert (``python -m agentic_ray.envs.prototypes
  helpdesk_memory``) and the vectors of its sentences; feature quantiles are the help desk's plus the memory
  fields' (:data:`MEMORY_QUANTILES`).

A separate domain rather than new help-desk families: the help desk's skill head, feature widths, shipped goal
parser and recorded checkpoints stay as they are. Its contracts are the help desk's file plus the generated
memory contracts, so ``contracts_path`` names the help desk's file.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.domains.helpdesk import HelpdeskDomain
from agentic_ray.domains.helpdesk.schema import SCHEMA as HELPDESK_SCHEMA
from agentic_ray.domains.helpdesk.world import perturb_desk
from agentic_ray.domains.helpdesk_memory import tasks
from agentic_ray.domains.helpdesk_memory.expert import HelpdeskMemoryExpert
from agentic_ray.domains.helpdesk_memory.world import (
    MEMORY_TYPES,
    HelpdeskMemoryWorld,
    attach_memory,
    open_memory,
)
from agentic_ray.domains.protocol import DomainSchema, FieldSpec, Task
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.memory.memory_skills import HIT_AGE, HIT_SCORE, memory_skill_contracts
from agentic_ray.skills.contracts import DomainContracts

MEMORY_FIELDS = (FieldSpec(HIT_SCORE, "number"), FieldSpec(HIT_AGE, "number"))
"""What a memory hit reveals about an entity (see :mod:`agentic_ray.memory.memory_skills`)."""

MEMORY_QUANTILES: dict[str, list[float]] = {
    f"{t}.{HIT_SCORE}": [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0] for t in MEMORY_TYPES
} | {f"{t}.{HIT_AGE}": [0.0, 6.0, 24.0, 48.0, 72.0, 168.0, 336.0, 600.0, 1000.0] for t in MEMORY_TYPES}
"""Feature maps of the memory fields: cosine scores evenly; ages with the freshness bounds (24 h, 72 h) inside."""

SCHEMA = dataclasses.replace(
    HELPDESK_SCHEMA,
    max_goals=7,  # ticket_said_earlier: verify, reset, up to three stolen devices, read, set the priority
    entity_types=tuple(
        dataclasses.replace(et, fields=(*et.fields, *MEMORY_FIELDS)) if et.name in MEMORY_TYPES else et
        for et in HELPDESK_SCHEMA.entity_types
    ),
)


class HelpdeskMemoryDomain(HelpdeskDomain):
    """The help desk with a memory (see the module docstring)."""

    name = "helpdesk_memory"
    families = tasks.FAMILIES
    schema: DomainSchema = SCHEMA
    data_dir = (
        Path(__file__).resolve().parent / "data"
    )  # its prototypes (memory.search among them), its vectors

    @property
    def contracts_path(self) -> Path:
        return super().contracts_path.with_name("helpdesk.yaml")

    @functools.cache  # noqa: B019 - one instance per process; contracts are immutable
    def contracts(self) -> DomainContracts:
        desk = super().contracts()
        memory = memory_skill_contracts(
            MEMORY_TYPES,
            query_source=f"request.{tasks.RECALL_FACT}",
            note_source=f"request.{tasks.RECALL_FACT}",
            handler_module="agentic_ray.domains.helpdesk_memory.world",
            preconditions=[
                {
                    "any_of": ["lookup_employee_by_email", "lookup_employee_by_badge"],
                    "description": "Memory is read in the caller's namespace: identify the caller first.",
                }
            ],
        )
        return DomainContracts(
            domain=self.name,
            version=desk.version,
            node_types=desk.node_types,
            skills=[*desk.skills, *memory],
            ask_customer=desk.ask_customer,
            source=desk.source,
        )

    def make_task(self, family: str, seed: int) -> tuple[HelpdeskMemoryWorld, Task]:
        return tasks.generate_task(family, seed)

    def validation_seeds(self, family: str, n: int) -> list[int]:
        return tasks.validation_seeds(family, n)

    def draw_training_seed(self, rng: np.random.Generator) -> int:
        return tasks.draw_training_seed(rng)

    def world_from_dict(self, d: dict[str, Any]) -> HelpdeskMemoryWorld:
        return HelpdeskMemoryWorld.from_dict(d)

    def perturb_hidden(self, world: Any, rng: np.random.Generator) -> HelpdeskMemoryWorld:
        """The help desk's hidden-value edits, on a copy that keeps the memory."""
        out = perturb_desk(HelpdeskMemoryWorld.from_dict(world.to_dict()), rng)
        assert isinstance(out, HelpdeskMemoryWorld)
        return out

    def expert(self) -> HelpdeskMemoryExpert:
        return HelpdeskMemoryExpert()

    def open_memory(self, config: Any) -> Any:
        """A store that Serve's agent-mode sessions share (:func:`.world.open_memory`)."""
        return open_memory(config)

    def attach_memory(self, world: Any, store: Any, episode: str, start_h: float) -> None:
        """Point a session's world at the shared store (:func:`.world.attach_memory`)."""
        attach_memory(world, store, episode, start_h)

    @functools.cache  # noqa: B019
    def quantiles(self) -> QuantileMap:
        desk = QuantileMap.from_json(HelpdeskDomain.data_dir / "quantiles.json")
        extra = QuantileMap(MEMORY_QUANTILES)
        out = QuantileMap({})
        out.xp, out.fp = {**desk.xp, **extra.xp}, {**desk.fp, **extra.fp}
        return out


domain = HelpdeskMemoryDomain()

__all__ = ["HelpdeskMemoryDomain", "HelpdeskMemoryWorld", "domain"]
