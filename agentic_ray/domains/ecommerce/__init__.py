"""The e-commerce customer-service domain (seed 002): a simulated shop, its tools, tasks, schema and expert.

``domain`` is the :class:`~agentic_ray.domains.protocol.Domain` the registry loads (entry point
``agentic_ray.domains: ecommerce``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.domains.ecommerce import caller_errors, tasks
from agentic_ray.domains.ecommerce.expert import EcommerceExpert
from agentic_ray.domains.ecommerce.rules import RULES
from agentic_ray.domains.ecommerce.schema import SCHEMA
from agentic_ray.domains.ecommerce.world import ShopWorld, entity_fields, entity_ids, perturb_shop
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import DomainSchema, RuleFn, Task
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.skills.contracts import DomainContracts, domain_file, load_contracts

DATA = Path(__file__).resolve().parent / "data"


class EcommerceDomain:
    """The e-commerce domain (see :mod:`agentic_ray.domains.protocol` for the meaning of each member)."""

    name = "ecommerce"
    families = tasks.FAMILIES
    schema: DomainSchema = SCHEMA
    data_dir = DATA

    @property
    def contracts_path(self) -> Path:
        return domain_file(self.name)

    @functools.cache  # noqa: B019 - one instance per process; contracts are immutable
    def contracts(self) -> DomainContracts:
        dc = load_contracts(self.contracts_path)
        dc.check_rules(RULES)
        return dc

    def make_task(self, family: str, seed: int) -> tuple[ShopWorld, Task]:
        return tasks.generate_task(family, seed)

    def validation_seeds(self, family: str, n: int) -> list[int]:
        return tasks.validation_seeds(family, n)

    def draw_training_seed(self, rng: np.random.Generator) -> int:
        return tasks.draw_training_seed(rng)

    def world_from_dict(self, d: dict[str, Any]) -> ShopWorld:
        return ShopWorld.from_dict(d)

    def entity_ids(self, world: Any, entity_type: str) -> list[str]:
        return entity_ids(world, entity_type)

    def entity_fields(self, world: Any, entity_type: str, entity_id: str) -> dict[str, Any] | None:
        return entity_fields(world, entity_type, entity_id)

    def step_world(self, world: Any, rng: np.random.Generator, task: Task) -> None:
        world.drift(
            rng,
            frozenset(task.extra.get("protected_skus", ())),
            frozenset(task.extra.get("frozen_skus", ())),
        )

    def tool_health(self, world: Any) -> dict[str, tuple[float, float, float]]:
        return {k: (h.latency_ms, h.latency_std_ms, h.failure_rate) for k, h in world.tool_health.items()}

    def goal_feasible(self, world: Any, task: Task, goal: Goal, done: set[str]) -> bool:
        return tasks.goal_feasible(world, task, goal, done)

    def final_check(self, world: Any, task: Task) -> bool:
        return True  # every e-commerce task ends on its goal DAG

    def hard_rules(self, knowledge: Knowledge, skills: Sequence[str]) -> dict[str, str]:
        users = knowledge.ids("user")
        verified = bool(users) and bool(knowledge.fields("user", users[0]).get("verified"))
        if "order.update_address" in skills and not verified:
            return {"order.update_address": "hard: the user is not verified (no address change)"}
        return {}

    def fallback_rules(self) -> dict[str, RuleFn]:
        return dict(RULES)

    def expert(self) -> EcommerceExpert:
        return EcommerceExpert()

    reward_context_keys = ("customer_level", "customer_complaint_rate", "customer_verified")

    def reward_context(self, world: Any) -> dict[str, float]:
        """The customer's loyalty level (1-5), historical complaint rate and session verification, under the names
        the user-experience layer and the long-term-value model read them by."""
        u = world.user
        return {
            "customer_level": float(u.level),
            "customer_complaint_rate": float(u.complaint_rate),
            "customer_verified": float(u.verified),
        }

    def caller_error(
        self,
        world: Any,
        task: Task,
        skill: str,
        params: dict[str, Any],
        cause: str,
        rng: np.random.Generator,
    ) -> dict[str, Any] | None:
        return caller_errors.caller_error(self.contracts(), world, task, skill, params, cause, rng)

    def caller_error_setup(self, world: Any, task: Task, cause: str, rng: np.random.Generator) -> Task | None:
        return caller_errors.caller_error_setup(world, task, cause, rng)

    def perturb_hidden(self, world: Any, rng: np.random.Generator) -> ShopWorld:
        """Two to four of: an order's total, status or tracking; the customer's level, complaint rate or balance;
        a product's price or stock (ids, contact facts, addresses and categories unchanged: a request states an
        item's category, a goal hint)."""
        return perturb_shop(ShopWorld.from_dict(world.to_dict()), rng)

    @functools.cache  # noqa: B019
    def quantiles(self) -> QuantileMap:
        return QuantileMap.from_json(self.data_dir / "quantiles.json")


domain = EcommerceDomain()

__all__ = ["EcommerceDomain", "ShopWorld", "domain"]
