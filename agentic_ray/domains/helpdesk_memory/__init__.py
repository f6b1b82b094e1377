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
  fields' (:func:`~agentic_ray.memory.memory_domain.memory_quantiles`).

The memory parts are generic (:mod:`agentic_ray.memory.memory_domain`, :mod:`~agentic_ray.memory.memory_world`,
:mod:`~agentic_ray.memory.memory_expert`); the shop with a memory (``ecommerce_memory``) is built the same way.

A separate domain rather than new help-desk families: the help desk's skill head, feature widths, shipped goal
parser and recorded checkpoints stay as they are. Its contracts are the help desk's file plus the generated
memory contracts, so ``contracts_path`` names the help desk's file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from agentic_ray.domains.helpdesk import HelpdeskDomain
from agentic_ray.domains.helpdesk.schema import SCHEMA as HELPDESK_SCHEMA
from agentic_ray.domains.helpdesk_memory import tasks
from agentic_ray.domains.helpdesk_memory.expert import HelpdeskMemoryExpert
from agentic_ray.domains.helpdesk_memory.world import MEMORY_TYPES, HelpdeskMemoryWorld
from agentic_ray.domains.protocol import DomainSchema
from agentic_ray.memory.memory_domain import MemoryDomain, memory_schema

# ticket_said_earlier: verify, reset, up to three stolen devices, read, set the priority
SCHEMA = memory_schema(HELPDESK_SCHEMA, MEMORY_TYPES, max_goals=7)


class HelpdeskMemoryDomain(MemoryDomain, HelpdeskDomain):
    """The help desk with a memory (see the module docstring)."""

    name = "helpdesk_memory"
    families = tasks.FAMILIES
    schema: DomainSchema = SCHEMA
    data_dir = (
        Path(__file__).resolve().parent / "data"
    )  # its prototypes (memory.search among them), its vectors
    task_module: ClassVar[Any] = tasks
    world_class = HelpdeskMemoryWorld
    identify_skills = ("lookup_employee_by_email", "lookup_employee_by_badge")
    base_contracts = "helpdesk.yaml"
    base_quantiles = HelpdeskDomain.data_dir / "quantiles.json"

    def expert(self) -> HelpdeskMemoryExpert:
        return HelpdeskMemoryExpert()


domain = HelpdeskMemoryDomain()

__all__ = ["HelpdeskMemoryDomain", "HelpdeskMemoryWorld", "domain"]
