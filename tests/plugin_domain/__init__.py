"""A third-party domain for the plug-in API's tests (issue 26): a small retail customer-service tool set.

It is written as a package outside agentic-ray would write it: it imports nothing of ``agentic_ray`` beyond
``domains.protocol``, ``skills.contracts`` and ``domains.knowledge`` (a test checks that), ships its contracts
(``skills.yaml``) and data files (``data/``) next to its code, and is registered by the test that needs it
(``tests/helpers/plugin_domain.py``), with no edit to the project. What it exercises:

* membership preconditions (``belongs_to:``) through a list of nested objects, an id-keyed map and a plain id, and a
  precondition over several entity parameters (``refund_item``, ``return_items`` with a list member,
  ``cancel_order``);
* outputs keyed by id (payment methods and orders as ``entity_map``) and nested entity objects with a declared
  ``id_field`` (an order's items, ``item_id``);
* domain options (:class:`~tests.plugin_domain.tasks.RetailOptions`: world size and a refund judging regime);
* no caller-error hooks: the injected caller errors are the generic, contract-derived ones (a wrong entity, a
  stale order, a refund above the item's price);
* an explicit end: ``no_change`` has no goal and ends with ``close_case``;
* strings copied from revealed fields and a fact with two values: ``ship_like_other`` copies the address another
  order's lookup revealed (``source: order.address``), ``tracking_answer`` answers with a revealed tracking number,
  ``two_emails`` gives two emails of which the lookup's ``email`` argument picks one (``max_values: 2``);
* the generic ``ask_customer`` skill (``ask_customer:`` in ``skills.yaml``, answered by
  :meth:`~tests.plugin_domain.world.RetailWorld.answer_customer`): ``expedite_order`` needs the customer's yes
  before the charge (a precondition) and a no changes what the task needs (goals conditional on the answer);
  ``refund_choice`` asks where the refund goes;
* a scripted expert that respects the masks (its demonstrations pass the mask check).

Families are builders in :data:`~tests.plugin_domain.tasks.BUILDERS`, so further API points add a family, a
skill in ``skills.yaml`` and a branch of the expert.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import DomainSchema, Goal, QuantileMap, RuleFn, Task
from agentic_ray.skills.contracts import DomainContracts, load_contracts
from tests.plugin_domain import tasks
from tests.plugin_domain.expert import RetailExpert
from tests.plugin_domain.schema import SCHEMA
from tests.plugin_domain.tasks import RetailOptions
from tests.plugin_domain.world import QUESTIONS, RetailWorld, entity_fields, entity_ids

HERE = Path(__file__).resolve().parent
NAME = "retail_plugin"


class RetailDomain:
    """The plug-in retail domain (see :mod:`agentic_ray.domains.protocol` for each member)."""

    name = NAME
    families = tasks.FAMILIES
    schema: DomainSchema = SCHEMA
    data_dir = HERE / "data"
    contracts_path = HERE / "skills.yaml"
    options_model = RetailOptions

    @functools.cache  # noqa: B019 - one instance per process; contracts are immutable
    def contracts(self) -> DomainContracts:
        dc = load_contracts(self.contracts_path)
        dc.check_rules(self.fallback_rules())
        return dc

    def make_task(
        self, family: str, seed: int, options: RetailOptions | None = None
    ) -> tuple[RetailWorld, Task]:
        return tasks.generate_task(family, seed, options or RetailOptions())

    def validation_seeds(self, family: str, n: int) -> list[int]:
        return tasks.validation_seeds(family, n)

    def draw_training_seed(self, rng: np.random.Generator) -> int:
        return tasks.draw_training_seed(rng)

    def world_from_dict(self, d: dict[str, Any]) -> RetailWorld:
        return RetailWorld.from_dict(d)

    def entity_ids(self, world: Any, entity_type: str) -> list[str]:
        return entity_ids(world, entity_type)

    def entity_fields(self, world: Any, entity_type: str, entity_id: str) -> dict[str, Any] | None:
        return entity_fields(world, entity_type, entity_id)

    def step_world(self, world: Any, rng: np.random.Generator, task: Task) -> None:
        """No background change: only the tools (and injected caller errors) change this world."""

    def tool_health(self, world: Any) -> dict[str, tuple[float, float, float]]:
        return {}

    def goal_feasible(self, world: Any, task: Task, goal: Goal, done: set[str]) -> bool:
        return tasks.goal_feasible(world, goal)

    def final_check(self, world: Any, task: Task) -> bool:
        return task.end != "world_state" or tasks.final_state_ok(world, task)

    def hard_rules(self, knowledge: Knowledge, skills: Sequence[str]) -> dict[str, str]:
        return {}

    def fallback_rules(self) -> dict[str, RuleFn]:
        return {}

    def expert(self) -> RetailExpert:
        return RetailExpert()

    # Whether the customer is gold: no layer reads it, so the layers that read customer facts (loyalty level,
    # complaint rate) are off for this domain, with one warning each.
    reward_context_keys: tuple[str, ...] = ("gold_tier",)

    def reward_context(self, world: Any) -> dict[str, float]:
        return {"gold_tier": float(world.customer.tier == "gold")}

    def perturb_hidden(self, world: Any, rng: np.random.Generator) -> RetailWorld:
        """The customer's tier, the payment methods' balances, one item's price, the orders' addresses and tracking
        numbers, and the customer's answers to come (ids, statuses, the email and the categories a request names stay
        as they are)."""
        w = RetailWorld.from_dict(world.to_dict())
        c = w.customer
        c.tier = "basic" if c.tier == "gold" else "gold"
        for pm in c.payment_methods:
            pm.balance = round(pm.balance + float(rng.uniform(5, 50)), 2)
        items = [i for o in c.orders for i in o.items]
        if items:
            it = items[int(rng.integers(len(items)))]
            it.price = round(it.price + float(rng.uniform(1, 20)), 2)
        for o in c.orders:
            o.address, o.tracking = "9" + o.address, o.tracking[::-1]
        for key in w.answers:  # the customer's unasked answers (ask_customer)
            w.answers[key] = next(a for a in QUESTIONS[key.split(":")[0]] if a != w.answers[key])
        return w

    @functools.cache  # noqa: B019
    def quantiles(self) -> QuantileMap:
        return QuantileMap.from_json(self.data_dir / "quantiles.json")

    def handler(self, skill: str) -> Any:
        """The tool handler a contract names (for tests that call a tool directly)."""
        module, _, fn = (self.contracts().by_name()[skill].handler or "").partition(":")
        return getattr(importlib.import_module(module), fn)


domain = RetailDomain()

__all__ = ["NAME", "RetailDomain", "RetailOptions", "domain"]
