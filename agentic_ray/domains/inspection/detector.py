"""The crack/scratch detector behind the ``detect`` skill: a small CenterNet-style CNN, frozen in ``data/``.

The network (:class:`CrackNet`, about 50k parameters) maps a 64x64 image to a 16x16 grid (stride 4) with, per
cell, a heatmap logit per class (crack, scratch), the log box size, the sub-cell offset of the centre and, for cracks,
the severity. :meth:`Detector.candidates` decodes the heatmap's local maxima into at most :data:`TOP_K` scored
boxes; :meth:`Detector.postprocess` applies the skill's continuous parameters, which trade precision against
recall: a confidence threshold, a class filter, non-maximum suppression at an IoU threshold and a cap on the number
of detections.

:meth:`Detector.postprocess` refuses parameters outside :data:`PARAM_BOUNDS` with ``ValueError``: this is the
detector seed 000 saw crash on a confidence of 1.2. The gateway clips every value into the contract's bounds (the
same bounds, tested) before the handler runs, so in the agent's loop an out-of-bounds value never gets here.

Weights are trained at build time by :mod:`.build_models` and loaded with the version and SHA-256 recorded in
``data/detector.json``; a file whose digest differs from the record is refused.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agentic_ray.domains.inspection.images import DEFECT_CLASSES, IMAGE_SIZE
from agentic_ray.rewards.detection_functional import batched_nms

DATA = Path(__file__).resolve().parent / "data"
WEIGHTS = DATA / "detector.pt"
RECORD = DATA / "detector.json"

STRIDE = 4
GRID = IMAGE_SIZE // STRIDE
TOP_K = 20
"""Heatmap peaks decoded per image (before the skill's parameters apply)."""
HEADS = len(DEFECT_CLASSES) + 2 + 2 + 1
"""Output channels: one heatmap per class, box size (w, h), centre offset (dx, dy), severity."""

PARAM_BOUNDS: dict[str, tuple[float, float]] = {
    "confidence_threshold": (0.3, 0.9),
    "iou_threshold": (0.1, 0.9),
    "max_detections": (1, 10),
}
"""What the detector accepts; the ``detect`` contract declares the same bounds (a test checks it)."""
CLASS_FILTERS: tuple[str, ...] = ("all", *DEFECT_CLASSES)
DEFAULT_PARAMS: dict[str, Any] = {
    "confidence_threshold": 0.5,
    "iou_threshold": 0.5,
    "max_detections": 5,
    "class_filter": "all",
}
"""The ``detect`` contract's defaults (a test checks they agree): the conventional operating point. The build
records F1 at other thresholds in ``detector.json``."""


class CrackNet(nn.Module):
    """The detector network: ``(B, 1, 64, 64)`` pixels in [0, 1] -> ``(B, HEADS, 16, 16)`` raw head outputs."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        w = width
        self.body = nn.Sequential(
            nn.Conv2d(1, w // 2, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(w // 2),
            nn.ReLU(),
            nn.Conv2d(w // 2, w, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(),
            nn.Conv2d(w, w, 3, padding=1, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(),
            nn.Conv2d(w, w, 3, padding=2, dilation=2, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(),
            nn.Conv2d(w, w, 3, padding=1, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(),
        )
        self.head = nn.Conv2d(w, HEADS, 1)
        assert self.head.bias is not None
        with torch.no_grad():  # CenterNet's prior: heatmaps start near 0.1 so the focal loss starts sane
            self.head.bias[: len(DEFECT_CLASSES)] = -2.19

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.head(self.body((pixels - 0.5) / 0.25))


@dataclass(frozen=True)
class Candidates:
    """Decoded heatmap peaks of one image, best first (at most :data:`TOP_K`).

    Attributes:
        boxes: ``(N, 4)`` float32 pixel boxes.
        classes: ``(N,)`` int64 indices into :data:`DEFECT_CLASSES`.
        scores: ``(N,)`` float32 in (0, 1).
        severities: ``(N,)`` float32 in [0, 1] (meaningful for cracks).
    """

    boxes: torch.Tensor
    classes: torch.Tensor
    scores: torch.Tensor
    severities: torch.Tensor


def decode(out: torch.Tensor, top_k: int = TOP_K) -> list[Candidates]:
    """Raw head outputs ``(B, HEADS, 16, 16)`` -> per-image :class:`Candidates` (3x3 local maxima of the heatmaps,
    the ``top_k`` best over both classes)."""
    c = len(DEFECT_CLASSES)
    heat = torch.sigmoid(out[:, :c])
    peaks = heat * (heat == torch.nn.functional.max_pool2d(heat, 3, stride=1, padding=1))
    b = out.shape[0]
    scores, idx = peaks.reshape(b, -1).topk(top_k)
    cls = idx // (GRID * GRID)
    cell = idx % (GRID * GRID)
    gy, gx = (cell // GRID).float(), (cell % GRID).float()
    res = []
    for i in range(b):
        o = out[i, :, :, :].reshape(HEADS, -1)[:, cell[i]]
        w = torch.exp(o[c].clamp(-2.0, 3.0)) * STRIDE  # sizes are regressed as log(size / stride)
        h = torch.exp(o[c + 1].clamp(-2.0, 3.0)) * STRIDE
        cx = (gx[i] + o[c + 2].clamp(0, 1)) * STRIDE
        cy = (gy[i] + o[c + 3].clamp(0, 1)) * STRIDE
        boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=1).clamp(0, IMAGE_SIZE)
        keep = scores[i] > 0
        res.append(
            Candidates(
                boxes[keep].float(),
                cls[i][keep].long(),
                scores[i][keep].float(),
                o[c + 4].clamp(0, 1)[keep].float(),
            )
        )
    return res


@dataclass(frozen=True)
class Detection:
    """One reported defect."""

    cls: str
    box: tuple[float, float, float, float]
    score: float
    severity: float


def check_params(
    confidence_threshold: float, iou_threshold: float, max_detections: int, class_filter: str
) -> None:
    """Raises ``ValueError`` for a parameter outside :data:`PARAM_BOUNDS` or an unknown class filter."""
    for name, v in (
        ("confidence_threshold", confidence_threshold),
        ("iou_threshold", iou_threshold),
        ("max_detections", max_detections),
    ):
        lo, hi = PARAM_BOUNDS[name]
        if not (isinstance(v, int | float) and lo <= v <= hi):
            raise ValueError(f"detector: {name}={v!r} outside [{lo}, {hi}]")
    if class_filter not in CLASS_FILTERS:
        raise ValueError(f"detector: class_filter {class_filter!r} not in {CLASS_FILTERS}")


def postprocess(
    cands: Candidates,
    confidence_threshold: float,
    iou_threshold: float,
    max_detections: int,
    class_filter: str,
) -> list[Detection]:
    """The skill's parameters applied to the candidates: score >= threshold, class filter, class-wise NMS, then
    the best ``max_detections``.

    Raises:
        ValueError: a parameter out of bounds (see :func:`check_params`).
    """
    check_params(confidence_threshold, iou_threshold, max_detections, class_filter)
    keep = cands.scores >= confidence_threshold
    if class_filter != "all":
        keep &= cands.classes == DEFECT_CLASSES.index(class_filter)
    idx = torch.nonzero(keep).flatten()
    kept = batched_nms(cands.boxes[idx], cands.scores[idx], cands.classes[idx], iou_threshold)
    idx = idx[kept][: int(max_detections)]
    return [
        Detection(
            DEFECT_CLASSES[int(cands.classes[i])],
            tuple(round(float(v), 2) for v in cands.boxes[i]),  # type: ignore[arg-type]
            round(float(cands.scores[i]), 4),
            round(float(cands.severities[i]), 4),
        )
        for i in idx.tolist()
    ]


def file_digest(path: Path) -> str:
    """SHA-256 of a file, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Detector:
    """The frozen detector: the network plus its record (version, digest, how it was trained and measured).

    Raises:
        FileNotFoundError: no weights (run ``python -m agentic_ray.domains.inspection.build_models``).
        ValueError: the weights' digest differs from the record.
    """

    def __init__(self, weights: Path = WEIGHTS, record: Path = RECORD) -> None:
        self.record: dict[str, Any] = json.loads(record.read_text())
        digest = file_digest(weights)
        if digest != self.record["sha256"]:
            raise ValueError(f"{weights}: SHA-256 {digest} differs from the record's {self.record['sha256']}")
        self.net = CrackNet(int(self.record["width"]))
        self.net.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        self.net.eval()
        self.version: str = f"{self.record['version']}@{digest[:12]}"

    def candidates(self, pixels: np.ndarray) -> Candidates:
        """The decoded peaks of one ``(64, 64)`` image."""
        return self.candidates_batch(np.asarray(pixels)[None])[0]

    @torch.inference_mode()
    def candidates_batch(self, pixels: np.ndarray) -> list[Candidates]:
        """The decoded peaks of ``(B, 64, 64)`` images, computed on one thread (see :func:`one_thread`)."""
        with one_thread():
            return decode(self.net(torch.as_tensor(pixels, dtype=torch.float32)[:, None]))


_THREADS = threading.Lock()


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block (restored after).

    A forward pass of this network is a few MFLOP: on the shared 2-CPU box two threads took 160-580 ms per image
    and one thread 2-60 ms (measured, 10 calls each), because the second thread waits for a core."""
    with _THREADS:
        n = torch.get_num_threads()
        if n != 1:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if n != 1:
                torch.set_num_threads(n)


@functools.cache
def detector() -> Detector:
    """The shipped detector, loaded once per process."""
    return Detector()
