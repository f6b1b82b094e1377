"""The IT help-desk domain: employees, tickets and assets behind lookups; the second domain of the plug-in API.

``domain`` is the :class:`~agentic_ray.domains.protocol.Domain` the registry loads (``helpdesk``). Everything the
domain is lives in this package plus ``configs/skills/helpdesk.yaml``; nothing here is imported by generic code.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.domains.caller_errors import lookalike_entity
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.helpdesk import tasks
from agentic_ray.domains.helpdesk.expert import HelpdeskExpert
from agentic_ray.domains.helpdesk.rules import RULES
from agentic_ray.domains.helpdesk.schema import SCHEMA
from agentic_ray.domains.helpdesk.world import (
    HelpdeskWorld,
    entity_fields,
    entity_ids,
    perturb_desk,
    state_hash,
)
from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import DomainSchema, RuleFn, Task
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.skills.contracts import DomainContracts, domain_file, load_contracts

DATA = Path(__file__).resolve().parent / "data"


class HelpdeskDomain:
    """The help-desk domain (see :mod:`agentic_ray.domains.protocol` for the meaning of each member)."""

    name = "helpdesk"
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

    def handler(self, skill: str) -> tasks.Handler:
        """The tool handler the contract names (``handler: module:function``)."""
        module, _, fn = (self.contracts().by_name()[skill].handler or "").partition(":")
        return getattr(importlib.import_module(module), fn)  # type: ignore[no-any-return]

    def make_task(self, family: str, seed: int) -> tuple[HelpdeskWorld, Task]:
        return tasks.generate_task(family, seed, self.handler)

    def validation_seeds(self, family: str, n: int) -> list[int]:
        return tasks.validation_seeds(family, n)

    def draw_training_seed(self, rng: np.random.Generator) -> int:
        return tasks.draw_training_seed(rng)

    def world_from_dict(self, d: dict[str, Any]) -> HelpdeskWorld:
        return HelpdeskWorld.from_dict(d)

    def entity_ids(self, world: Any, entity_type: str) -> list[str]:
        return entity_ids(world, entity_type)

    def entity_fields(self, world: Any, entity_type: str, entity_id: str) -> dict[str, Any] | None:
        return entity_fields(world, entity_type, entity_id)

    def step_world(self, world: Any, rng: np.random.Generator, task: Task) -> None:
        world.drift(rng)

    def tool_health(self, world: Any) -> dict[str, tuple[float, float, float]]:
        return {k: (h.latency_ms, h.latency_std_ms, h.failure_rate) for k, h in world.tool_health.items()}

    def goal_feasible(self, world: Any, task: Task, goal: Goal, done: set[str]) -> bool:
        return tasks.goal_feasible(world, task, goal)

    def final_check(self, world: Any, task: Task) -> bool:
        return task.end != "world_state" or state_hash(world) == task.extra["gold_state"]

    def hard_rules(self, knowledge: Knowledge, skills: Sequence[str]) -> dict[str, str]:
        """No password reset for a caller who is not verified in this session, or whose account is disabled."""
        ids = knowledge.ids("employee")
        f = knowledge.fields("employee", ids[0]) if ids else {}
        if f.get("status") == "disabled":
            return {
                "reset_password": "hard: the account is disabled (no password reset; tier 2 re-enables it)"
            }
        if not f.get("verified"):
            return {"reset_password": "hard: the caller is not verified (no password reset)"}
        return {}

    def fallback_rules(self) -> dict[str, RuleFn]:
        return dict(RULES)

    def expert(self) -> HelpdeskExpert:
        return HelpdeskExpert()

    reward_context_keys = ("verified", "tenure_years", "mfa_enrolled", "password_resets")

    def reward_context(self, world: Any) -> dict[str, float]:
        """The caller's facts; no customer level or complaint rate, so the layers that read those are off here."""
        e = world.caller
        return {
            "verified": float(e.verified),
            "tenure_years": float(e.tenure_years),
            "mfa_enrolled": float(e.mfa_enrolled),
            "password_resets": float(e.password_resets),
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
        """A look-alike employee, ticket or asset id (each re-resolved by a lookup: the caller by email or badge,
        their assets and tickets by listing them). No stale reads (help-desk tools do not check what the caller
        read) and no parameter above a limit (no help-desk contract sets a ``max_from`` bound)."""
        c = self.contracts().by_name().get(skill)
        if c is None or cause not in ("wrong_entity", "tool_error"):
            return None
        new = lookalike_entity(c, params, task.relevant, lambda t: entity_ids(world, t), rng)
        return new if cause == "wrong_entity" or new is None else dict(params)

    def caller_error_setup(self, world: Any, task: Task, cause: str, rng: np.random.Generator) -> Task | None:
        """``wrong_entity`` and the ``tool_error`` control (on the same calls), for a task whose goals name an
        entity (see :meth:`caller_error`)."""
        names = any(k in tasks.ENTITY_ARGS for g in task.goals for k in g.args)
        return task if cause in ("wrong_entity", "tool_error") and names else None

    def perturb_hidden(self, world: Any, rng: np.random.Generator) -> HelpdeskWorld:
        """Two to four of: an employee's department, MFA enrolment or tenure; a ticket's priority or age; an
        asset's warranty days, cost or status (ids, names, emails, badges, categories and kinds unchanged: requests
        state a ticket's category and an asset's kind)."""
        return perturb_desk(HelpdeskWorld.from_dict(world.to_dict()), rng)

    @functools.cache  # noqa: B019
    def quantiles(self) -> QuantileMap:
        return QuantileMap.from_json(self.data_dir / "quantiles.json")


domain = HelpdeskDomain()

__all__ = ["HelpdeskDomain", "HelpdeskWorld", "domain"]
