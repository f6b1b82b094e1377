"""The shop with a memory (issue 27): e-commerce tasks in which the customer refers to an earlier conversation, or
to what they said earlier in this one.

``domain`` is the :class:`~agentic_ray.domains.protocol.Domain` the registry loads (``ecommerce_memory``). It is the
e-commerce domain (same world, tools, contracts, rules and expert) plus:

* the memory skills ``memory.search`` / ``memory.write`` (:func:`~agentic_ray.memory.memory_domain.
  memory_contracts`, appended after the e-commerce skills, allowed once the customer is identified: memory is read
  in the customer's namespace), handled on the world's memory session (:mod:`agentic_ray.memory.memory_world`);
* two order and product fields memory reveals (``memory_score``, ``memory_age_h``), so the observation shows which
  recalled order the customer's words match best and how long ago it was last talked about, and one field memory
  holds about an earlier order (``delivered_to``: where it went, the profile address or the parcel locker);
* room for six orders (the e-commerce schema has four): a customer who names three look-alike orders, one with a
  wrong item, and an older order that memory recalls;
* the task families of :mod:`.tasks` (``order_from_last_time``: the order the customer talked about last time;
  ``order_said_earlier``: an order named at the start of the conversation and needed after the short-term window
  dropped it; ``same_place_as_last_time``: an address preference, "the same place as my last parcel"), whose key
  facts feed the memory reward and Entity Recall@5 / forgetting;
* the optional memory hooks ``open_memory`` / ``attach_memory``: Serve's agent-mode sessions then share one
  long-term store, so a returning customer's facts are there in the next session;
* its own ``data/``: action prototypes mined from its expert (``python -m agentic_ray.envs.prototypes
  ecommerce_memory``) and the vectors of its sentences (``python -m agentic_ray.memory.memory_world ecommerce_memory``);
  feature quantiles are the e-commerce domain's plus the memory fields'.

A separate domain rather than new e-commerce families: the e-commerce skill head, feature widths, shipped goal
parser and recorded checkpoints stay as they are. Its contracts are the e-commerce file plus the generated memory
contracts, so ``contracts_path`` names the e-commerce file. The memory parts are the generic ones the help desk
with a memory uses (:mod:`agentic_ray.memory.memory_domain`, :mod:`~agentic_ray.memory.memory_world`,
:mod:`~agentic_ray.memory.memory_expert`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from agentic_ray.domains.ecommerce import EcommerceDomain
from agentic_ray.domains.ecommerce.schema import SCHEMA as ECOMMERCE_SCHEMA
from agentic_ray.domains.ecommerce_memory import tasks
from agentic_ray.domains.ecommerce_memory.expert import ShopMemoryExpert
from agentic_ray.domains.ecommerce_memory.world import MEMORY_TYPES, ShopMemoryWorld
from agentic_ray.domains.protocol import DomainSchema, FieldSpec
from agentic_ray.memory.memory_domain import MemoryDomain, memory_schema

MAX_ORDERS = 6
"""Orders one task may reveal (order_said_earlier: three named, the wrong item's, the older one memory recalls)."""

RECALLED_PLACE = FieldSpec(tasks.DELIVERED_TO, "category", tuple(tasks.PLACES))
"""Where an earlier order was delivered, as memory holds it (same_place_as_last_time)."""

SCHEMA = memory_schema(
    dataclasses.replace(
        ECOMMERCE_SCHEMA,
        entity_types=tuple(
            dataclasses.replace(et, max_nodes=MAX_ORDERS, fields=(*et.fields, RECALLED_PLACE))
            if et.name == "order"
            else et
            for et in ECOMMERCE_SCHEMA.entity_types
        ),
        links=tuple(
            dataclasses.replace(lk, max_edges=MAX_ORDERS)
            if "order" in (lk.src, lk.dst) and lk.dst != "product"
            else lk
            for lk in ECOMMERCE_SCHEMA.links
        ),
    ),
    MEMORY_TYPES,
)


class EcommerceMemoryDomain(MemoryDomain, EcommerceDomain):
    """The shop with a memory (see the module docstring)."""

    name = "ecommerce_memory"
    families = tasks.FAMILIES
    schema: DomainSchema = SCHEMA
    data_dir = (
        Path(__file__).resolve().parent / "data"
    )  # its prototypes (memory.search among them), its vectors
    task_module: ClassVar[Any] = tasks
    world_class = ShopMemoryWorld
    identify_skills = ("user.find", "lookup_customer_by_name")
    base_contracts = "ecommerce.yaml"
    base_quantiles = EcommerceDomain.data_dir / "quantiles.json"

    def expert(self) -> ShopMemoryExpert:
        return ShopMemoryExpert()


domain = EcommerceMemoryDomain()

__all__ = ["EcommerceMemoryDomain", "ShopMemoryWorld", "domain"]
