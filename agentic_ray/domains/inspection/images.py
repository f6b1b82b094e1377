"""Synthetic, seeded 64x64 grayscale images of parts: cracks, look-alike scratches and a printed serial.

A part is a :class:`PartSpec` (plain numbers, JSON-safe, drawn by :func:`draw_part`); :func:`render` turns it into
pixels deterministically, so a world ships specs and renders images when a tool looks at them. What is drawn:

* the **part body**, a bright rounded plate with a smooth surface texture, on a dark background;
* **cracks**: branching dark polylines that wander (a random walk of the heading). Their ``severity`` in (0, 1]
  sets length, stroke width, darkness and the number of branches;
* **scratches** (the look-alikes): straight strokes of even width with a faint bright burr along one side. A
  strong scratch is darker than a faint crack, so intensity alone does not tell them apart;
* a **label** with the serial number printed in the 3x5 font of :mod:`.font`;
* the camera: ``contrast`` in [0.35, 1] scales every defect's darkness, and the sensor noise grows as contrast
  falls. An ``overexposed`` camera washes the whole frame out (the detect tool refuses such an image).

Each defect's ground-truth box is the bounding box of its drawn pixels (coverage above 0.25) with a margin of
:data:`BOX_MARGIN` pixels.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from agentic_ray.domains.inspection.font import SERIAL_BODY, render_text

IMAGE_SIZE = 64
DEFECT_CLASSES: tuple[str, ...] = ("crack", "scratch")
"""Detector classes, in head order."""
BODY = (4, 4, 60, 46)
"""``(x0, y0, x1, y1)`` of the part body (defects stay inside it)."""
LABEL = (5, 48, 59, 63)
"""``(x0, y0, x1, y1)`` of the label the serial is printed on."""
SERIAL_X, SERIAL_Y, SERIAL_SCALE = 8, 51, 2
"""Where the serial is printed: top-left corner of the first glyph and pixels per font pixel."""
CONTRAST_RANGE = (0.35, 1.0)
LABEL_INK, LABEL_PAPER = 0.12, 0.9


@dataclass(frozen=True)
class DefectSpec:
    """One defect: a crack (wandering, branching) or a scratch (straight), before rendering.

    Attributes:
        kind: ``crack`` or ``scratch``.
        x, y: start point (pixels).
        angle: initial heading (radians).
        length: stroke length (pixels).
        radius: stroke half-width (pixels).
        darkness: share of the surface brightness the stroke removes at contrast 1.
        severity: in (0, 1] for a crack, 0 for a scratch.
        seed: seed of the stroke's shape (random walk, branches).
    """

    kind: str
    x: float
    y: float
    angle: float
    length: float
    radius: float
    darkness: float
    severity: float
    seed: int


@dataclass(frozen=True)
class PartSpec:
    """Everything :func:`render` needs to draw a part.

    Attributes:
        seed: seed of the surface texture and sensor noise.
        contrast: the camera's contrast in [0.35, 1].
        serial: the serial printed on the label.
        defects: the defects.
        overexposed: the camera washed the frame out.
    """

    seed: int
    contrast: float
    serial: str
    defects: tuple[DefectSpec, ...]
    overexposed: bool = False

    @property
    def severity(self) -> float:
        """The part's true severity: its worst crack's, 0 without a crack."""
        return max((d.severity for d in self.defects if d.kind == "crack"), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartSpec:
        return cls(
            seed=int(d["seed"]),
            contrast=float(d["contrast"]),
            serial=str(d["serial"]),
            defects=tuple(DefectSpec(**x) for x in d["defects"]),
            overexposed=bool(d.get("overexposed", False)),
        )


@dataclass(frozen=True)
class RenderedPart:
    """A rendered part: pixels and the ground truth drawn into them.

    Attributes:
        pixels: ``(64, 64)`` float32 in [0, 1].
        boxes: ``(D, 4)`` float32 ``(x0, y0, x1, y1)`` pixel boxes, one per defect (exclusive upper corner).
        classes: ``(D,)`` int64 indices into :data:`DEFECT_CLASSES`.
        severities: ``(D,)`` float32.
    """

    pixels: np.ndarray
    boxes: np.ndarray
    classes: np.ndarray
    severities: np.ndarray


def crack_spec(rng: np.random.Generator, severity: float) -> DefectSpec:
    """A crack of the given severity at a random place in the body."""
    return DefectSpec(
        kind="crack",
        x=float(rng.uniform(BODY[0] + 10, BODY[2] - 10)),
        y=float(rng.uniform(BODY[1] + 8, BODY[3] - 8)),
        angle=float(rng.uniform(0, 2 * math.pi)),
        length=10.0 + 22.0 * severity,
        radius=0.55 + 0.6 * severity,
        darkness=0.45 + 0.4 * severity,
        severity=float(severity),
        seed=int(rng.integers(2**31)),
    )


def scratch_spec(rng: np.random.Generator) -> DefectSpec:
    """A scratch at a random place in the body."""
    return DefectSpec(
        kind="scratch",
        x=float(rng.uniform(BODY[0] + 8, BODY[2] - 8)),
        y=float(rng.uniform(BODY[1] + 6, BODY[3] - 6)),
        angle=float(rng.uniform(0, 2 * math.pi)),
        length=float(rng.uniform(12.0, 34.0)),
        radius=float(rng.uniform(0.5, 0.75)),
        darkness=float(rng.uniform(0.35, 0.65)),
        severity=0.0,
        seed=int(rng.integers(2**31)),
    )


def draw_part(
    rng: np.random.Generator,
    serial: str,
    severities: list[float],
    n_scratches: int,
    contrast: float | None = None,
    overexposed: bool = False,
) -> PartSpec:
    """A part spec with one crack per entry of ``severities`` and ``n_scratches`` scratches.

    Args:
        rng: the generator every random choice is drawn from.
        serial: the printed serial (body + check character).
        severities: crack severities in (0, 1].
        n_scratches: number of scratches.
        contrast: the camera contrast (drawn from :data:`CONTRAST_RANGE` when None).
        overexposed: a washed-out frame.
    """
    if len(serial) != SERIAL_BODY + 1:
        raise ValueError(f"a serial has {SERIAL_BODY + 1} characters, got {serial!r}")
    c = float(rng.uniform(*CONTRAST_RANGE)) if contrast is None else float(contrast)
    defects = [crack_spec(rng, float(s)) for s in severities] + [
        scratch_spec(rng) for _ in range(n_scratches)
    ]
    return PartSpec(int(rng.integers(2**31)), c, serial, tuple(defects), overexposed)


# ---------------------------------------------------------------------------------------------------- drawing
def _crack_paths(d: DefectSpec) -> list[tuple[np.ndarray, float]]:
    """The crack's main path and its branches as ``(points (n, 2), radius)``, sampled every half pixel."""
    r = np.random.default_rng(d.seed)

    def walk(x: float, y: float, a: float, length: float) -> np.ndarray:
        pts = []
        for _ in range(max(2, int(length / 0.5))):
            a += float(r.normal(0.0, 0.07))
            x, y = x + 0.5 * math.cos(a), y + 0.5 * math.sin(a)
            if not BODY[0] + 2 <= x <= BODY[2] - 2:  # bounce off the body's edge
                a = math.pi - a
                x = min(max(x, BODY[0] + 2), BODY[2] - 2)
            if not BODY[1] + 2 <= y <= BODY[3] - 2:
                a = -a
                y = min(max(y, BODY[1] + 2), BODY[3] - 2)
            pts.append((x, y))
        return np.asarray(pts, dtype=np.float64)

    main = walk(d.x, d.y, d.angle, d.length)
    paths = [(main, d.radius)]
    n_branches = 0 if d.severity < 0.35 else (1 if d.severity < 0.7 else 2)
    for _ in range(n_branches):
        i = int(r.integers(len(main) // 4, max(len(main) // 4 + 1, 3 * len(main) // 4)))
        heading = d.angle + float(r.choice([-1.0, 1.0])) * float(r.uniform(0.6, 1.2))
        b = walk(float(main[i, 0]), float(main[i, 1]), heading, d.length * float(r.uniform(0.3, 0.5)))
        paths.append((b, 0.7 * d.radius))
    return paths


def _scratch_path(d: DefectSpec) -> np.ndarray:
    n = max(2, int(d.length / 0.5))
    t = np.linspace(-0.5, 0.5, n) * d.length
    x = np.clip(d.x + t * math.cos(d.angle), BODY[0] + 2, BODY[2] - 2)
    y = np.clip(d.y + t * math.sin(d.angle), BODY[1] + 2, BODY[3] - 2)
    return np.stack([x, y], axis=1)


def _coverage(points: np.ndarray, radius: float) -> np.ndarray:
    """``(64, 64)`` anti-aliased coverage of a stroke of half-width ``radius`` through ``points``."""
    cov = np.zeros((IMAGE_SIZE, IMAGE_SIZE))
    x0 = max(0, int(points[:, 0].min() - radius - 2))
    x1 = min(IMAGE_SIZE, int(points[:, 0].max() + radius + 3))
    y0 = max(0, int(points[:, 1].min() - radius - 2))
    y1 = min(IMAGE_SIZE, int(points[:, 1].max() + radius + 3))
    yy, xx = np.mgrid[y0:y1, x0:x1]
    centres = np.stack([xx.ravel() + 0.5, yy.ravel() + 0.5], axis=1)
    dist, _ = cKDTree(points).query(centres, distance_upper_bound=radius + 1.0)
    cov[y0:y1, x0:x1] = np.clip(radius + 0.5 - dist, 0.0, 1.0).reshape(yy.shape)
    return cov


def _smooth_texture(rng: np.random.Generator) -> np.ndarray:
    """Low-frequency surface texture: an 8x8 random grid, upsampled bilinearly to 64x64."""
    grid = rng.normal(0.0, 1.0, (9, 9))
    t = np.linspace(0.0, 8.0, IMAGE_SIZE, endpoint=False)
    i = np.floor(t).astype(int)
    f = t - i
    rows = grid[i] * (1 - f)[:, None] + grid[i + 1] * f[:, None]
    return rows[:, i] * (1 - f)[None, :] + rows[:, i + 1] * f[None, :]


BOX_MARGIN = 2
"""Pixels a ground-truth box extends beyond its defect on each side, as an annotator draws it: a thin horizontal
stroke's tight box is 2 px tall, and one pixel of error would halve its IoU."""


def _box(cov: np.ndarray) -> tuple[float, float, float, float]:
    ys, xs = np.nonzero(cov > 0.25)
    if len(xs) == 0:
        return (0.0, 0.0, 0.0, 0.0)
    m = BOX_MARGIN
    return (
        float(max(xs.min() - m, 0)),
        float(max(ys.min() - m, 0)),
        float(min(xs.max() + 1 + m, IMAGE_SIZE)),
        float(min(ys.max() + 1 + m, IMAGE_SIZE)),
    )


def _body_mask() -> np.ndarray:
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE] + 0.5
    bx0, by0, bx1, by1 = BODY
    corner = 6.0
    dx = np.maximum(np.maximum(bx0 + corner - xx, xx - (bx1 - corner)), 0.0)
    dy = np.maximum(np.maximum(by0 + corner - yy, yy - (by1 - corner)), 0.0)
    return (np.hypot(dx, dy) <= corner) & (xx >= bx0) & (xx <= bx1) & (yy >= by0) & (yy <= by1)


_BODY_MASK = _body_mask()


def render(spec: PartSpec) -> RenderedPart:
    """Draw a part (deterministic in ``spec``).

    Returns:
        The pixels and the ground truth (see :class:`RenderedPart`).
    """
    rng = np.random.default_rng(spec.seed)
    img = np.full((IMAGE_SIZE, IMAGE_SIZE), 0.12)
    body = _BODY_MASK
    surface = 0.62 + 0.035 * _smooth_texture(rng)
    img[body] = surface[body]
    boxes, classes, sev = [], [], []
    for d in spec.defects:
        if d.kind == "crack":
            cov = np.zeros_like(img)
            for pts, rad in _crack_paths(d):
                cov = np.maximum(cov, _coverage(pts, rad))
            # darkness varies along a crack (a real one opens and closes)
            vary = 0.8 + 0.2 * _smooth_texture(np.random.default_rng(d.seed + 1)).clip(-1, 1)
            img = img * (1.0 - spec.contrast * d.darkness * vary * cov)
        else:
            pts = _scratch_path(d)
            cov = _coverage(pts, d.radius)
            nx, ny = -math.sin(d.angle), math.cos(d.angle)  # the burr runs along one side
            burr = _coverage(pts + 1.4 * np.array([nx, ny]), 0.45)
            img = img * (1.0 - spec.contrast * d.darkness * cov) + spec.contrast * 0.12 * burr * (1 - cov)
        boxes.append(_box(cov))
        classes.append(DEFECT_CLASSES.index(d.kind))
        sev.append(d.severity)
    lx0, ly0, lx1, ly1 = LABEL
    img[ly0:ly1, lx0:lx1] = LABEL_PAPER
    render_text(img, spec.serial, SERIAL_X, SERIAL_Y, SERIAL_SCALE, LABEL_INK)
    img = _blur3(img)
    noise = 0.02 + 0.05 * (1.0 - spec.contrast)
    img = img + rng.normal(0.0, noise, img.shape)
    if spec.overexposed:
        img = 0.82 + 0.2 * img
    return RenderedPart(
        pixels=np.clip(img, 0.0, 1.0).astype(np.float32),
        boxes=np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
        classes=np.asarray(classes, dtype=np.int64),
        severities=np.asarray(sev, dtype=np.float32),
    )


def _blur3(img: np.ndarray) -> np.ndarray:
    """A light 3x3 binomial blur (the optics), edges replicated."""
    p = np.pad(img, 1, mode="edge")
    k = (p[:-2] + 2 * p[1:-1] + p[2:]) / 4.0
    return (k[:, :-2] + 2 * k[:, 1:-1] + k[:, 2:]) / 4.0


def to_uint8(pixels: np.ndarray) -> np.ndarray:
    """``[0, 1]`` floats as uint8 (what a camera file holds)."""
    return np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8)
