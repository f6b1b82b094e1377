"""Pure maths of object detection and ranking: box IoU, non-maximum suppression, detection matching, F1,
localisation IoU and NDCG.

Used by the detection and ranking reward layers (:mod:`agentic_ray.rewards.layers`) and by any detector a domain
ships. Hand-written in torch rather than taken from torchvision (``torchvision.ops.box_iou`` / ``nms``): no
torchvision build matches the pinned torch 2.13 CPU wheel, so it cannot be installed beside it. The functions are
small and each has a Python-loop reference test (``tests/unit/rewards/test_detection_functional.py``).

Boxes are ``(x0, y0, x1, y1)`` with ``x1 > x0``, ``y1 > y0`` (the upper corner exclusive, as pixel boxes are).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

__all__ = [
    "DetectionCounts",
    "batched_nms",
    "box_iou",
    "class_iou",
    "f1_score",
    "localisation_by_iou",
    "localisation_iou",
    "match_by_iou",
    "match_detections",
    "ndcg",
    "nms",
]


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise intersection over union.

    Args:
        a: ``(N, 4)`` boxes.
        b: ``(M, 4)`` boxes.

    Returns:
        ``(N, M)`` IoU in [0, 1] (0 where both boxes are empty).
    """
    area_a = (a[:, 2] - a[:, 0]).clamp(min=0) * (a[:, 3] - a[:, 1]).clamp(min=0)
    area_b = (b[:, 2] - b[:, 0]).clamp(min=0) * (b[:, 3] - b[:, 1]).clamp(min=0)
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return torch.where(union > 0, inter / union.clamp(min=1e-12), torch.zeros_like(inter))


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression: keep the best box, drop every box overlapping it by more than
    ``iou_threshold``, repeat.

    Args:
        boxes: ``(N, 4)``.
        scores: ``(N,)``.
        iou_threshold: a box whose IoU with a kept, better box is above this is suppressed.

    Returns:
        ``(K,)`` int64 indices of the kept boxes, best score first (ties: lower index first).
    """
    if boxes.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    order = torch.argsort(scores, descending=True, stable=True)
    iou = box_iou(boxes[order], boxes[order])
    n = len(order)
    alive = torch.ones(n, dtype=torch.bool)
    keep = []
    for i in range(n):  # N is the peak count of one image (tens): the loop is cheaper than tensor tricks
        if not alive[i]:
            continue
        keep.append(i)
        alive &= ~(iou[i] > iou_threshold)
        alive[i] = False
    return order[torch.tensor(keep, dtype=torch.long)]


def batched_nms(
    boxes: torch.Tensor, scores: torch.Tensor, classes: torch.Tensor, iou_threshold: float
) -> torch.Tensor:
    """:func:`nms` within each class (boxes of different classes never suppress each other).

    Returns:
        ``(K,)`` indices of the kept boxes, best score first.
    """
    if boxes.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    # Shift each class's boxes far apart, so that boxes of two classes never overlap.
    offset = classes.to(boxes.dtype)[:, None] * (boxes.max() - boxes.min() + 1.0)
    return nms(boxes + offset, scores, iou_threshold)


class DetectionCounts(NamedTuple):
    """True positives, false positives and false negatives of one image."""

    tp: int
    fp: int
    fn: int


def match_detections(
    pred_boxes: torch.Tensor,
    pred_classes: torch.Tensor,
    pred_scores: torch.Tensor,
    true_boxes: torch.Tensor,
    true_classes: torch.Tensor,
    iou_min: float = 0.5,
) -> DetectionCounts:
    """PASCAL-VOC matching: predictions in descending score order each take the unmatched true box of their class
    with the highest IoU, if that IoU is at least ``iou_min`` (a true positive); otherwise they are false positives.
    Unmatched true boxes are false negatives.

    Args:
        pred_boxes, pred_classes, pred_scores: ``(N, 4)``, ``(N,)``, ``(N,)``.
        true_boxes, true_classes: ``(M, 4)``, ``(M,)``.
        iou_min: the IoU a match needs.

    Returns:
        ``(tp, fp, fn)``.
    """
    n, m = len(pred_boxes), len(true_boxes)
    if n == 0 or m == 0:
        return DetectionCounts(0, n, m)
    iou = class_iou(pred_boxes, pred_classes, true_boxes, true_classes)
    order = torch.argsort(pred_scores, descending=True, stable=True)
    return match_by_iou(iou[order].numpy(), iou_min)


def class_iou(
    pred_boxes: torch.Tensor, pred_classes: torch.Tensor, true_boxes: torch.Tensor, true_classes: torch.Tensor
) -> torch.Tensor:
    """``(N, M)`` IoU of predictions and true boxes, -1 where their classes differ."""
    iou = box_iou(pred_boxes, true_boxes)
    return torch.where(pred_classes[:, None] == true_classes[None, :], iou, torch.full_like(iou, -1.0))


def match_by_iou(iou: np.ndarray, iou_min: float = 0.5) -> DetectionCounts:
    """The matching of :func:`match_detections` on a precomputed ``(N, M)`` :func:`class_iou` whose rows are
    already in descending score order (so the top ``n`` predictions at any threshold are its first ``n`` rows)."""
    n, m = iou.shape
    taken = np.zeros(m, dtype=bool)
    tp = 0
    for i in range(n):
        cand = np.where(taken, -1.0, iou[i])
        j = int(np.argmax(cand)) if m else 0
        if m and cand[j] >= iou_min:
            taken[j] = True
            tp += 1
    return DetectionCounts(tp, n - tp, m - tp)


def f1_score(tp: int, fp: int, fn: int) -> float:
    """``2·tp / (2·tp + fp + fn)``; 1.0 when there was nothing to find and nothing was reported."""
    denom = 2 * tp + fp + fn
    return 1.0 if denom == 0 else 2.0 * tp / denom


def localisation_iou(
    pred_boxes: torch.Tensor, pred_classes: torch.Tensor, true_boxes: torch.Tensor, true_classes: torch.Tensor
) -> float:
    """How well the true boxes are localised: the one-to-one, same-class assignment of predictions to true boxes
    that maximises the total IoU (Hungarian, :func:`scipy.optimize.linear_sum_assignment`), averaged over the
    true boxes (a true box left without a prediction counts 0).

    Returns:
        the mean IoU in [0, 1], or NaN when there is no true box (nothing to localise).
    """
    if len(true_boxes) == 0:
        return math.nan
    return localisation_by_iou(class_iou(pred_boxes, pred_classes, true_boxes, true_classes).numpy())


def localisation_by_iou(iou: np.ndarray) -> float:
    """:func:`localisation_iou` on a precomputed ``(N, M)`` :func:`class_iou` (NaN when ``M == 0``)."""
    m = iou.shape[1]
    if m == 0:
        return math.nan
    if iou.shape[0] == 0:
        return 0.0
    gain = np.clip(iou, 0.0, None)
    rows, cols = linear_sum_assignment(gain, maximize=True)
    return float(gain[rows, cols].sum()) / m


def ndcg(ranked: Sequence[str], relevance: Mapping[str, float], k: int | None = None) -> float:
    """Normalised discounted cumulative gain of a ranking, with linear gains.

    ``DCG@k = Σ_{i<k} rel(ranked[i]) / log2(i + 2)``, divided by the DCG of the ideal order of all items in
    ``relevance``.

    Args:
        ranked: item ids, best first (items missing from ``relevance`` have relevance 0).
        relevance: the true relevance of every candidate item (non-negative).
        k: the cut-off (default: ``len(ranked)``).

    Returns:
        NDCG@k in [0, 1], or NaN when no candidate is relevant (no ranking is better than another).
    """
    k = len(ranked) if k is None else k
    gains = np.array([float(relevance.get(x, 0.0)) for x in ranked[:k]])
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.sort(np.array([float(v) for v in relevance.values()]))[::-1][:k]
    idcg = float((ideal * disc[: len(ideal)]).sum())
    if idcg <= 0.0:
        return math.nan
    return float((gains * disc[: len(gains)]).sum()) / idcg
