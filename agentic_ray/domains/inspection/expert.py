"""The scripted inspection expert: solves every task from the episode view in optimal steps (faults off).

It acts under the agent's partial information (it names only parts the request or the listing revealed) and runs
the most urgent ready goal. Two things it reads beyond that, as an expert may: the goals' ground truth (which parts
to record, and how) and, for ``detect``, the parts' specs in ``Task.extra``: it renders the part and picks the
detector parameters that score the best crack F1 on it (:func:`oracle_detect_params`, a grid over threshold, NMS
overlap and class filter; ties go to the better localisation, then to the threshold nearest its family's prior). So
its detections are the best the frozen detector can give, the reference level of the benchmark.

The prior is the threshold with the best mean crack F1 over the family's training tasks
(:func:`~agentic_ray.domains.inspection.family_params.family_thresholds`). Most parts' F1 is flat over a range of
thresholds, and which choices were ties is hidden from a learner. With ties going to the contract's default (0.5),
the expert's mean threshold was 0.46-0.5 in every family and imitation learned about that (trained 0.42-0.48),
where the F1-best setting of a cracked line is 0.35 (``best_family_params``; all three as
``benchmarks/inspection.py`` printed them before this change). The expert's own F1 is the same either way, as only
ties move.

Fixes: a serial read whose check character fails (a garbled reply) is read again before anything else; after a
``wrong_entity`` failure the line is listed again (the listing re-resolves part ids); a masked skill it needs sends
the session to a human inspector.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from agentic_ray.domains.inspection import detector as det
from agentic_ray.domains.inspection.family_params import family_thresholds
from agentic_ray.domains.inspection.images import DEFECT_CLASSES, PartSpec, render
from agentic_ray.domains.inspection.tasks import SPECS
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.rewards.detection_functional import class_iou, f1_score, localisation_by_iou, match_by_iou

DEFAULT_THRESHOLD = float(det.DEFAULT_PARAMS["confidence_threshold"])
THRESHOLDS = tuple(round(float(t), 2) for t in np.arange(0.3, 0.901, 0.05))
CRACK = DEFECT_CLASSES.index("crack")


@functools.lru_cache(maxsize=4096)
def _oracle(spec_key: str, prior: float) -> tuple[tuple[str, Any], ...]:
    import json

    spec = PartSpec.from_dict(json.loads(spec_key))
    r = render(spec)
    cands = det.detector().candidates(r.pixels)
    tb = torch.as_tensor(r.boxes[r.classes == CRACK]).reshape(-1, 4)
    tc = torch.zeros(len(tb), dtype=torch.long)
    best: tuple[float, float, float] | None = None
    choice: dict[str, Any] = {}
    for cf in ("all", "crack"):
        for iou in (0.3, 0.5):
            # Greedy NMS keeps, among the boxes above a threshold, exactly the boxes it keeps among all boxes that
            # are above it (a box is only suppressed by better ones), so one pass serves every threshold.
            kept = [d for d in det.postprocess(cands, THRESHOLDS[0], iou, 10, cf) if d.cls == "crack"]
            pb = torch.tensor([d.box for d in kept], dtype=torch.float32).reshape(-1, 4)
            table = class_iou(pb, torch.zeros(len(pb), dtype=torch.long), tb, tc).numpy()  # rows by score
            scores = np.array([d.score for d in kept])
            for t in THRESHOLDS:
                top = table[: int((scores >= t).sum())]
                f1 = f1_score(*match_by_iou(top))
                loc = localisation_by_iou(top)
                key = (f1, 0.0 if np.isnan(loc) else loc, -abs(t - prior))
                if best is None or key > best:
                    best = key
                    choice = {
                        "confidence_threshold": t,
                        "iou_threshold": iou,
                        "max_detections": 10,
                        "class_filter": cf,
                    }
    return tuple(choice.items())


def oracle_detect_params(spec: dict[str, Any], prior: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    """The detector parameters that score the best crack F1 on this part (ground truth; the expert's choice), ties
    going to the better localisation, then to the threshold nearest ``prior``."""
    import json

    return dict(_oracle(json.dumps(spec, sort_keys=True), prior))


class InspectionExpert:
    """Optimal scripted policy for the inspection families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        """The next call as ``(skill, params)``."""
        k, task = view.knowledge, view.task
        step = self._fix(view)
        if step is None:
            ready = [i for i in range(len(task.goals)) if view.ready[i]]
            if not ready:
                return self._handoff(view, "complex")
            g = task.goals[min(ready, key=lambda j: (-task.goals[j].priority, j))]
            named = [g.args["part_id"]] if "part_id" in g.args else list(g.args.get("part_ids", []))
            if any(not k.knows("part", p) for p in named):
                step = self._listing(view)
                if step is None:
                    return self._handoff(view, "complex")
            elif g.skill == "detect":
                spec = task.extra[SPECS][g.args["part_id"]]
                prior = family_thresholds().get(task.family, DEFAULT_THRESHOLD)
                step = "detect", {"part_id": g.args["part_id"], **oracle_detect_params(spec, prior)}
            else:
                step = g.skill, dict(g.args)
        return step if view.allowed(step[0]) else self._handoff(view, "tool_failure")

    def _fix(self, view: EpisodeView) -> tuple[str, dict[str, Any]] | None:
        k, last = view.knowledge, view.last
        for pid in k.ids("part"):
            if k.fields("part", pid).get("checksum_ok") is False:
                return "ocr_extract", {"part_id": pid}
        if last is not None and last.code != "OK" and last.root_cause == "wrong_entity":
            return self._listing(view)
        return None

    @staticmethod
    def _listing(view: EpisodeView) -> tuple[str, dict[str, Any]] | None:
        line = view.task.request.facts.get("line")
        return ("line.list_parts", {"line": line}) if line else None

    @staticmethod
    def _handoff(view: EpisodeView, reason: str) -> tuple[str, dict[str, Any]]:
        return "inspector.handoff", {"reason": reason}
