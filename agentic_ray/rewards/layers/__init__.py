"""Reward layers, one per file, and the registry that builds them from configuration."""

from __future__ import annotations

from typing import Any

from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream
from agentic_ray.rewards.layers.detection_f1_layer import DetectionF1Layer
from agentic_ray.rewards.layers.detection_quality_layer import DetectionQualityLayer
from agentic_ray.rewards.layers.efficiency_layer import EfficiencyLayer
from agentic_ray.rewards.layers.execution_layer import ExecutionLayer
from agentic_ray.rewards.layers.llm_judge_layer import LLMJudgeLayer
from agentic_ray.rewards.layers.localisation_iou_layer import LocalisationIoULayer
from agentic_ray.rewards.layers.long_term_value_layer import LongTermValueLayer
from agentic_ray.rewards.layers.memory_layer import MemoryLayer
from agentic_ray.rewards.layers.plan_validity_layer import PlanValidityLayer
from agentic_ray.rewards.layers.ranking_ndcg_layer import RankingNDCGLayer
from agentic_ray.rewards.layers.record_credit_layer import RecordCreditLayer
from agentic_ray.rewards.layers.risk_layer import RiskLayer
from agentic_ray.rewards.layers.task_outcome_layer import TaskOutcomeLayer
from agentic_ray.rewards.layers.user_experience_layer import UserExperienceLayer

LAYER_CLASSES: dict[str, type[RewardLayer]] = {
    cls.name: cls
    for cls in (
        ExecutionLayer,
        EfficiencyLayer,
        RiskLayer,
        PlanValidityLayer,
        UserExperienceLayer,
        LongTermValueLayer,
        LLMJudgeLayer,
        LocalisationIoULayer,
        DetectionF1Layer,
        RankingNDCGLayer,
        RecordCreditLayer,
        DetectionQualityLayer,
        MemoryLayer,
        TaskOutcomeLayer,
    )
}


def build_layer(name: str, params: dict[str, Any] | None = None) -> RewardLayer:
    """Instantiate the layer registered as ``name`` with constructor ``params``.

    Raises:
        KeyError: unknown layer name.
    """
    if name not in LAYER_CLASSES:
        raise KeyError(f"unknown reward layer {name!r}; known: {sorted(LAYER_CLASSES)}")
    return LAYER_CLASSES[name](**(params or {}))


__all__ = [
    "LAYER_CLASSES",
    "CostClass",
    "DetectionF1Layer",
    "DetectionQualityLayer",
    "EfficiencyLayer",
    "ExecutionLayer",
    "Granularity",
    "LLMJudgeLayer",
    "LocalisationIoULayer",
    "LongTermValueLayer",
    "MemoryLayer",
    "PlanValidityLayer",
    "RankingNDCGLayer",
    "RecordCreditLayer",
    "RewardLayer",
    "RiskLayer",
    "Stream",
    "TaskOutcomeLayer",
    "UserExperienceLayer",
    "build_layer",
]
