"""Localisation IoU (seed 000's perception layer "IoU for localisation"), dense: a value on each detection call.

Reads the domain's per-call detection outcomes (:mod:`agentic_ray.rewards.call_outcomes`): the reported boxes are
assigned one-to-one to the true boxes of their class so as to maximise the total IoU (Hungarian), and the call
scores the mean IoU over the true boxes (a true box left without a report counts 0). A call on an item with no
true box has nothing to localise and scores nothing. Values are potential differences per item; with ``baseline:
default`` an item's potential starts at the IoU of the skill's default arguments (see
:mod:`~agentic_ray.rewards.layers.call_outcome_layer`).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentic_ray.keys import CONTEXT_DETECTION_CALLS
from agentic_ray.rewards.call_outcomes import DetectionOutcome, detection_outcomes
from agentic_ray.rewards.detection_functional import localisation_iou
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.call_outcome_layer import CallOutcomeLayer


def call_iou(o: DetectionOutcome) -> float:
    """Mean IoU of one call's true boxes with their assigned reports (NaN without a true box)."""
    pb, pc, _ps, tb, tc = o.tensors()
    return localisation_iou(pb, pc, tb, tc)


class LocalisationIoULayer(CallOutcomeLayer):
    """Localisation IoU, reward stream, step-level.

    Args:
        baseline: where a part's potential starts: ``"none"`` (0) or ``"default"`` (the defaults' IoU).
    """

    name = "localisation_iou"
    version = "1"
    context_inputs = (CONTEXT_DETECTION_CALLS,)
    has_reference = True

    def outcomes(self, record: EpisodeRecord) -> Sequence[DetectionOutcome] | None:
        return detection_outcomes(record)

    def metric(self, outcome: DetectionOutcome) -> float:
        return call_iou(outcome)

    def reference(self, outcome: DetectionOutcome) -> float:
        return call_iou(outcome.at_defaults())
