"""Per task family, ``detect``'s parameters with the best mean crack F1 over the parts of training tasks.

Two users: the benchmark's ``best_family_params`` policy (what adapting ``detect`` to the request alone gains), and
the expert, whose per-part choice breaks F1 ties toward its family's best threshold (:mod:`.expert`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from agentic_ray.domains.inspection import detector as det

__all__ = ["EXPERT_PRIOR_GRID", "SELECT_GRID", "family_detect_params", "family_thresholds"]

SELECT_GRID: tuple[dict[str, Any], ...] = tuple(
    {"confidence_threshold": t, "iou_threshold": iou, "max_detections": m, "class_filter": cf}
    for t in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
    for iou in (0.3, 0.5)
    for m in (5, 10)
    for cf in ("all", "crack")
)
"""The benchmark's grid: threshold × NMS overlap × max detections × class filter."""

EXPERT_PRIOR_GRID: tuple[dict[str, Any], ...] = tuple(
    {"confidence_threshold": t, "iou_threshold": 0.3, "max_detections": 10, "class_filter": "all"}
    for t in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
)
"""The expert's prior varies the threshold only (the other parameters at the expert's usual choice): 8 points
instead of 64; measured 3.2 s per process against 11.6 s for the full grid (2-CPU box, under load)."""
EXPERT_PRIOR_TASKS = 20


def family_detect_params(
    tasks_per_family: int, seed: int = 0, grid: tuple[dict[str, Any], ...] = SELECT_GRID
) -> dict[str, dict[str, Any]]:
    """Per family, the grid point of ``detect``'s parameters with the best mean crack F1 over the parts of
    ``tasks_per_family`` training tasks (never validation tasks; ties: the point nearest the contract's default
    threshold, then the first). The same F1 as the benchmark's (the tool's crack outcome, matched at IoU >= 0.5);
    frames the camera spoiled are skipped, as the tool skips them. Each entry also holds ``train_f1`` and
    ``train_parts``."""
    import torch

    from agentic_ray.domains import get_domain
    from agentic_ray.domains.inspection.images import DEFECT_CLASSES
    from agentic_ray.domains.inspection.tasks import SPECS
    from agentic_ray.domains.inspection.tools import EXPOSURE_LIMIT
    from agentic_ray.rewards.detection_functional import f1_score, match_detections

    crack = DEFECT_CLASSES.index("crack")
    d = get_domain("inspection")
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, Any]] = {}
    for fam in d.families:
        sums, n = np.zeros(len(grid)), 0
        for _ in range(tasks_per_family):
            world, task = d.make_task(fam, d.draw_training_seed(rng))
            for pid in task.extra[SPECS]:
                r = world.rendered(pid)
                if float(r.pixels.mean()) > EXPOSURE_LIMIT:
                    continue
                tb = torch.as_tensor(r.boxes[r.classes == crack], dtype=torch.float32).reshape(-1, 4)
                tc = torch.zeros(len(tb), dtype=torch.long)
                cands = world.candidates(pid)
                for j, p in enumerate(grid):
                    found = [x for x in det.postprocess(cands, **p) if x.cls == "crack"]
                    pb = torch.tensor([x.box for x in found], dtype=torch.float32).reshape(-1, 4)
                    ps = torch.tensor([x.score for x in found], dtype=torch.float32)
                    sums[j] += f1_score(
                        *match_detections(pb, torch.zeros(len(pb), dtype=torch.long), ps, tb, tc)
                    )
                n += 1
        if n:
            default_t = float(det.DEFAULT_PARAMS["confidence_threshold"])
            j = max(
                range(len(grid)),
                key=lambda k: (
                    round(float(sums[k] / n), 9),
                    -abs(grid[k]["confidence_threshold"] - default_t),
                    -k,
                ),
            )
            out[fam] = {**grid[j], "train_f1": round(float(sums[j] / n), 4), "train_parts": n}
    return out


@functools.cache
def family_thresholds() -> dict[str, float]:
    """Per family, the confidence threshold with the best mean crack F1 over :data:`EXPERT_PRIOR_TASKS` training
    tasks (:data:`EXPERT_PRIOR_GRID`); computed once per process."""
    params = family_detect_params(EXPERT_PRIOR_TASKS, seed=0, grid=EXPERT_PRIOR_GRID)
    return {f: float(p["confidence_threshold"]) for f, p in params.items()}
