"""A small frozen CNN that scores the quality of a set of detections on an image, without ground truth.

Seed 000's model-based reward agent: beside the rules, a small frozen CNN scores detection quality. The network
reads the image plus one channel per class in which the reported boxes are painted (1 inside a box of that class,
0 elsewhere) and predicts the F1 the detections would score against the truth. A domain trains it at build time on
its own images (its detector's outputs at many parameter settings, labelled with their true F1) and ships the
weights with a JSON record (version, SHA-256, classes, image size, measured error); the reward layer
(:class:`~agentic_ray.rewards.layers.detection_quality_layer.DetectionQualityLayer`) loads the record it is
configured with, so this module names no domain.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["DetectionQualityModel", "DetectionQualityNet", "box_channels"]


class DetectionQualityNet(nn.Module):
    """``(B, 1 + C, S, S)`` (image in [0, 1], then one box channel per class) -> ``(B,)`` logit of the quality."""

    def __init__(self, num_classes: int, width: int = 16) -> None:
        super().__init__()
        w = width
        self.net = nn.Sequential(
            nn.Conv2d(1 + num_classes, w, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(2 * w, 2 * w, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * w, 2 * w, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(2 * w, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([(x[:, :1] - 0.5) / 0.25, x[:, 1:]], dim=1)
        return self.net(x).squeeze(-1)


def box_channels(boxes: np.ndarray, classes: np.ndarray, num_classes: int, size: int) -> np.ndarray:
    """Paint boxes into per-class masks.

    Args:
        boxes: ``(N, 4)`` pixel boxes ``(x0, y0, x1, y1)``.
        classes: ``(N,)`` class indices.
        num_classes: ``C``.
        size: image side ``S``.

    Returns:
        ``(C, S, S)`` float32, 1 inside a box of that class.
    """
    out = np.zeros((num_classes, size, size), dtype=np.float32)
    for (x0, y0, x1, y1), c in zip(
        np.asarray(boxes).reshape(-1, 4), np.asarray(classes).reshape(-1), strict=True
    ):
        if not 0 <= int(c) < num_classes:
            continue
        xa, ya = max(0, int(np.floor(x0))), max(0, int(np.floor(y0)))
        xb, yb = min(size, int(np.ceil(x1))), min(size, int(np.ceil(y1)))
        out[int(c), ya:yb, xa:xb] = 1.0
    return out


class DetectionQualityModel:
    """The frozen scorer and its record.

    Args:
        record_path: the JSON record; the weights file it names sits beside it.

    Raises:
        ValueError: the weights' SHA-256 differs from the record's.
    """

    def __init__(self, record_path: str | Path) -> None:
        record_path = Path(record_path)
        self.record: dict[str, Any] = json.loads(record_path.read_text())
        weights = record_path.parent / self.record["file"]
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        if digest != self.record["sha256"]:
            raise ValueError(f"{weights}: SHA-256 {digest} differs from the record's {self.record['sha256']}")
        self.num_classes = int(self.record["num_classes"])
        self.image_size = int(self.record["image_size"])
        self.net = DetectionQualityNet(self.num_classes, int(self.record["width"]))
        self.net.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        self.net.eval()
        self.version = str(self.record["version"])
        self.digest = digest[:12]

    @torch.inference_mode()
    def score(self, images: np.ndarray, boxes: list[np.ndarray], classes: list[np.ndarray]) -> np.ndarray:
        """Predicted quality of each image's detections.

        Args:
            images: ``(B, S, S)`` in [0, 1].
            boxes: per image, ``(N_i, 4)`` reported boxes.
            classes: per image, ``(N_i,)`` their classes.

        Returns:
            ``(B,)`` float32 in [0, 1].
        """
        if len(images) == 0:
            return np.zeros(0, dtype=np.float32)
        chans = np.stack(
            [
                box_channels(b, c, self.num_classes, self.image_size)
                for b, c in zip(boxes, classes, strict=True)
            ]
        )
        x = np.concatenate([np.asarray(images, dtype=np.float32)[:, None], chans], axis=1)
        return torch.sigmoid(self.net(torch.as_tensor(x))).numpy().astype(np.float32)
