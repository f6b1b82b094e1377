"""Box IoU, NMS, detection matching, F1, localisation IoU and NDCG against plain Python-loop references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from agentic_ray.rewards.detection_functional import (
    batched_nms,
    box_iou,
    f1_score,
    localisation_iou,
    match_detections,
    ndcg,
    nms,
)


def _iou_ref(a: list[float], b: list[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _boxes(rng: np.random.Generator, n: int) -> torch.Tensor:
    xy = rng.uniform(0, 50, (n, 2))
    wh = rng.uniform(1, 20, (n, 2))
    return torch.tensor(np.concatenate([xy, xy + wh], axis=1), dtype=torch.float32)


def _nms_ref(boxes: list[list[float]], scores: list[float], thr: float) -> list[int]:
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    keep: list[int] = []
    for i in order:
        if all(_iou_ref(boxes[i], boxes[j]) <= thr for j in keep):
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", range(5))
def test_box_iou_matches_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = _boxes(rng, 7), _boxes(rng, 5)
    got = box_iou(a, b)
    ref = [[_iou_ref(x, y) for y in b.tolist()] for x in a.tolist()]
    np.testing.assert_allclose(got.numpy(), np.array(ref), atol=1e-6)
    assert float(box_iou(a[:1], a[:1])) == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("thr", [0.2, 0.5])
def test_nms_matches_the_loop(seed: int, thr: float) -> None:
    rng = np.random.default_rng(seed)
    boxes = _boxes(rng, 12)
    scores = torch.tensor(rng.uniform(0, 1, 12), dtype=torch.float32)
    got = nms(boxes, scores, thr).tolist()
    assert got == _nms_ref(boxes.tolist(), scores.tolist(), thr)


def test_batched_nms_keeps_overlapping_boxes_of_other_classes() -> None:
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 10, 10]], dtype=torch.float32)
    scores = torch.tensor([0.9, 0.8, 0.7])
    classes = torch.tensor([0, 0, 1])
    assert batched_nms(boxes, scores, classes, 0.5).tolist() == [0, 2]
    assert nms(boxes, scores, 0.5).tolist() == [0]


def _match_ref(pb, pc, ps, tb, tc, iou_min):
    order = sorted(range(len(ps)), key=lambda i: (-ps[i], i))
    taken: set[int] = set()
    tp = 0
    for i in order:
        best, bj = -1.0, -1
        for j in range(len(tb)):
            if j in taken or pc[i] != tc[j]:
                continue
            v = _iou_ref(pb[i], tb[j])
            if v > best:
                best, bj = v, j
        if bj >= 0 and best >= iou_min:
            taken.add(bj)
            tp += 1
    return tp, len(pb) - tp, len(tb) - tp


@pytest.mark.parametrize("seed", range(8))
def test_matching_matches_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tb = _boxes(rng, 4)
    pb = torch.cat([tb[:3] + torch.tensor(rng.normal(0, 2, (3, 4)), dtype=torch.float32), _boxes(rng, 3)])
    pc = torch.tensor(rng.integers(0, 2, 6))
    tc = torch.tensor(rng.integers(0, 2, 4))
    ps = torch.tensor(rng.uniform(0, 1, 6), dtype=torch.float32)
    got = match_detections(pb, pc, ps, tb, tc, 0.5)
    assert tuple(got) == _match_ref(pb.tolist(), pc.tolist(), ps.tolist(), tb.tolist(), tc.tolist(), 0.5)
    assert got.tp + got.fn == 4 and got.tp + got.fp == 6


def test_f1_edge_cases() -> None:
    assert f1_score(0, 0, 0) == 1.0
    assert f1_score(0, 3, 0) == 0.0
    assert f1_score(2, 1, 1) == pytest.approx(4 / 6)


def _loc_ref(pb, pc, tb, tc) -> float:
    """Best one-to-one assignment by brute force over every injective map of true boxes to predictions."""
    m = len(tb)
    best = 0.0
    slots = list(range(len(pb))) + [None] * m
    for perm in itertools.permutations(slots, m):
        used = [p for p in perm if p is not None]
        if len(set(used)) != len(used):
            continue
        total = sum(
            _iou_ref(pb[p], tb[j]) if p is not None and pc[p] == tc[j] else 0.0 for j, p in enumerate(perm)
        )
        best = max(best, total)
    return best / m


@pytest.mark.parametrize("seed", range(6))
def test_localisation_iou_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tb = _boxes(rng, 3)
    pb = torch.cat([tb[:2] + torch.tensor(rng.normal(0, 3, (2, 4)), dtype=torch.float32), _boxes(rng, 2)])
    pc, tc = torch.tensor(rng.integers(0, 2, 4)), torch.tensor(rng.integers(0, 2, 3))
    got = localisation_iou(pb, pc, tb, tc)
    assert got == pytest.approx(_loc_ref(pb.tolist(), pc.tolist(), tb.tolist(), tc.tolist()), abs=1e-6)
    assert math.isnan(localisation_iou(pb, pc, tb[:0], tc[:0]))
    assert localisation_iou(pb[:0], pc[:0], tb, tc) == 0.0


def _ndcg_ref(ranked: list[str], rel: dict[str, float], k: int) -> float:
    dcg = sum(rel.get(x, 0.0) / math.log2(i + 2) for i, x in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(v / math.log2(i + 2) for i, v in enumerate(ideal))
    return dcg / idcg if idcg > 0 else math.nan


@pytest.mark.parametrize("seed", range(6))
def test_ndcg_matches_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    items = [f"p{i}" for i in range(6)]
    rel = {x: float(v) for x, v in zip(items, rng.uniform(0, 1, 6) * (rng.random(6) < 0.7), strict=True)}
    ranked = list(rng.permutation(items))[:3]
    assert ndcg(ranked, rel) == pytest.approx(_ndcg_ref(ranked, rel, 3))
    ideal = sorted(items, key=lambda x: -rel[x])[:3]
    assert ndcg(ideal, rel) == pytest.approx(1.0)
    assert math.isnan(ndcg(ranked, dict.fromkeys(items, 0.0)))
