"""Industrial visual inspection (seed 000's third agent): synthetic part images, a real frozen detector with
continuous parameters, OCR of printed serials, a SQLite inspection database, top-k ranking and a human handoff.

``domain`` is the :class:`~agentic_ray.domains.protocol.Domain` the registry loads (``inspection``). Everything the
domain is lives in this package plus ``configs/skills/inspection.yaml``; the detector and the model-based reward's
quality scorer are trained by ``python -m agentic_ray.domains.inspection.build_models`` and shipped in ``data/``.
The reward context holds each detection and ranking call's outcome beside the truth
(:mod:`agentic_ray.rewards.call_outcomes`), for the IoU, F1, NDCG and detection-quality layers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from agentic_ray.domains.caller_errors import lookalike_entity
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.inspection import tasks
from agentic_ray.domains.inspection.expert import InspectionExpert
from agentic_ray.domains.inspection.rules import RULES
from agentic_ray.domains.inspection.schema import SCHEMA
from agentic_ray.domains.inspection.world import InspectionWorld, entity_fields, entity_ids, perturb_parts
from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import DomainSchema, RuleFn, Task
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.keys import CONTEXT_DETECTION_CALLS, CONTEXT_RANKING_CALLS, CONTEXT_RECORD_CALLS
from agentic_ray.skills.contracts import DomainContracts, domain_file, load_contracts

DATA = Path(__file__).resolve().parent / "data"


class InspectionOptions(BaseModel):
    """Options of the inspection domain (``env.domain_options``)."""

    model_config = ConfigDict(extra="forbid")

    ocr_garble_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of OCR replies garbled inside a valid JSON shell (seed 000's injected tool error).",
    )


class InspectionDomain:
    """The inspection domain (see :mod:`agentic_ray.domains.protocol` for the meaning of each member)."""

    name = "inspection"
    families = tasks.FAMILIES
    schema: DomainSchema = SCHEMA
    data_dir = DATA
    options_model = InspectionOptions
    reward_context_keys: tuple[str, ...] = (
        CONTEXT_DETECTION_CALLS,
        CONTEXT_RANKING_CALLS,
        CONTEXT_RECORD_CALLS,
    )

    @property
    def contracts_path(self) -> Path:
        return domain_file(self.name)

    @functools.cache  # noqa: B019 - one instance per process; contracts are immutable
    def contracts(self) -> DomainContracts:
        dc = load_contracts(self.contracts_path)
        dc.check_rules(RULES)
        return dc

    def make_task(self, family: str, seed: int, options: Any = None) -> tuple[InspectionWorld, Task]:
        opts = (
            options
            if isinstance(options, InspectionOptions)
            else InspectionOptions.model_validate(options or {})
        )
        return tasks.generate_task(family, seed, opts.ocr_garble_rate)

    def validation_seeds(self, family: str, n: int) -> list[int]:
        return tasks.validation_seeds(family, n)

    def draw_training_seed(self, rng: np.random.Generator) -> int:
        return tasks.draw_training_seed(rng)

    def world_from_dict(self, d: dict[str, Any]) -> InspectionWorld:
        return InspectionWorld.from_dict(d)

    def entity_ids(self, world: Any, entity_type: str) -> list[str]:
        return entity_ids(world, entity_type)

    def entity_fields(self, world: Any, entity_type: str, entity_id: str) -> dict[str, Any] | None:
        return entity_fields(world, entity_type, entity_id)

    def step_world(self, world: Any, rng: np.random.Generator, task: Task) -> None:
        world.drift(rng)

    def tool_health(self, world: Any) -> dict[str, tuple[float, float, float]]:
        return {k: (h.latency_ms, h.latency_std_ms, h.failure_rate) for k, h in world.tool_health.items()}

    def goal_feasible(self, world: Any, task: Task, goal: Goal, done: set[str]) -> bool:
        return True  # nothing at an inspection station closes a goal for good

    def final_check(self, world: Any, task: Task) -> bool:
        return tasks.final_check(world, task)

    def hard_rules(self, knowledge: Knowledge, skills: Sequence[str]) -> dict[str, str]:
        """No ranking before two parts were inspected; no finding before a part was inspected or read."""
        parts = [knowledge.fields("part", p) for p in knowledge.ids("part")]
        inspected = sum(1 for f in parts if "n_cracks" in f)
        read = any("checksum_ok" in f for f in parts)
        out = {}
        if inspected < 2:
            out["rank_topk"] = "hard: fewer than two parts inspected (nothing to rank)"
        if not inspected and not read:
            out["db_update"] = "hard: no part inspected or read (no finding to record)"
        return out

    def fallback_rules(self) -> dict[str, RuleFn]:
        return dict(RULES)

    def expert(self) -> InspectionExpert:
        return InspectionExpert()

    def reward_context(self, world: Any) -> dict[str, Any]:
        """Each detection, ranking and record call's outcome beside the truth (ground truth: reward layers only)."""
        return {
            CONTEXT_DETECTION_CALLS: [dict(c) for c in world.detection_calls],
            CONTEXT_RANKING_CALLS: [dict(c) for c in world.ranking_calls],
            CONTEXT_RECORD_CALLS: [dict(c) for c in world.record_calls],
        }

    def context(self, world: Any) -> dict[str, Any]:
        """The reward layers' input (``EpisodeRecord.context``): :meth:`reward_context`."""
        return self.reward_context(world)

    def caller_error(
        self,
        world: Any,
        task: Task,
        skill: str,
        params: dict[str, Any],
        cause: str,
        rng: np.random.Generator,
    ) -> dict[str, Any] | None:
        """A look-alike part id (re-resolved by listing the line again), and the ``tool_error`` control. No stale
        reads (nothing a lookup reveals changes) and no parameter above a limit (no ``max_from`` bound)."""
        c = self.contracts().by_name().get(skill)
        if c is None or cause not in ("wrong_entity", "tool_error"):
            return None
        new = lookalike_entity(c, params, task.relevant, lambda t: entity_ids(world, t), rng)
        return new if cause == "wrong_entity" or new is None else dict(params)

    def caller_error_setup(self, world: Any, task: Task, cause: str, rng: np.random.Generator) -> Task | None:
        """``wrong_entity`` for tasks that list their line (the listing re-resolves a part), and the control."""
        if cause == "tool_error":
            return task
        return task if cause == "wrong_entity" and task.family not in tasks.MENTIONED else None

    def perturb_hidden(self, world: Any, rng: np.random.Generator) -> InspectionWorld:
        """Two to four hidden changes (see :func:`~agentic_ray.domains.inspection.world.perturb_parts`)."""
        return perturb_parts(world, rng)

    @functools.cache  # noqa: B019
    def quantiles(self) -> QuantileMap:
        return QuantileMap.from_json(self.data_dir / "quantiles.json")


domain = InspectionDomain()

__all__ = ["InspectionDomain", "InspectionOptions", "InspectionWorld", "domain"]
