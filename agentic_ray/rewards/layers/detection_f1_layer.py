"""Detection F1 (seed 000's perception layer "F1 for detection"), dense: a value on each detection call's step.

Reads the domain's per-call detection outcomes (:mod:`agentic_ray.rewards.call_outcomes`): each call's reported
boxes are matched to the true ones (PASCAL-VOC, same class, IoU at least ``iou_min``) and scored
``F1 = 2·tp / (2·tp + fp + fn)``. A call reporting nothing where there is nothing scores 1. Values are potential
differences per item, so a repeated call earns only what it improves; with ``baseline: default`` an item's
potential starts at the F1 of the skill's default arguments (see
:mod:`~agentic_ray.rewards.layers.call_outcome_layer`).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentic_ray.keys import CONTEXT_DETECTION_CALLS
from agentic_ray.rewards.call_outcomes import DetectionOutcome, detection_outcomes
from agentic_ray.rewards.detection_functional import f1_score, match_detections
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.call_outcome_layer import Baseline, CallOutcomeLayer


def detection_f1(o: DetectionOutcome, iou_min: float = 0.5) -> float:
    """F1 of one call's reported boxes against the truth."""
    pb, pc, ps, tb, tc = o.tensors()
    return f1_score(*match_detections(pb, pc, ps, tb, tc, iou_min))


class DetectionF1Layer(CallOutcomeLayer):
    """Detection F1, reward stream, step-level.

    Args:
        iou_min: the IoU a reported box needs with a true box of its class to count as found.
        baseline: where a part's potential starts: ``"none"`` (0) or ``"default"`` (the defaults' F1).
    """

    name = "detection_f1"
    version = "1"
    context_inputs = (CONTEXT_DETECTION_CALLS,)
    has_reference = True

    def __init__(self, iou_min: float = 0.5, baseline: Baseline = "none") -> None:
        super().__init__(baseline)
        if not 0.0 < iou_min <= 1.0:
            raise ValueError(f"iou_min must be in (0, 1], got {iou_min}")
        self.iou_min = float(iou_min)

    def outcomes(self, record: EpisodeRecord) -> Sequence[DetectionOutcome] | None:
        return detection_outcomes(record)

    def metric(self, outcome: DetectionOutcome) -> float:
        return detection_f1(outcome, self.iou_min)

    def reference(self, outcome: DetectionOutcome) -> float:
        return detection_f1(outcome.at_defaults(), self.iou_min)
