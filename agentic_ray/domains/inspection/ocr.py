"""Reading a part's serial from its image: template matching against the label's bitmap font.

The label sits at a fixed place on every part image (:data:`~agentic_ray.domains.inspection.images.SERIAL_X` ...),
as on a fixtured inspection station, so each character cell is known; each cell is compared with every glyph of
:mod:`.font` (scaled like the print) by normalised cross-correlation, and the best glyph wins. The confidence is
the worst cell's margin between its best and second-best glyph.

:func:`garble` is the injected fault seed 000 describes: the reply keeps its JSON shell and types (a string is
still a string), but characters of the serial are replaced by unreadable ones, so only the serial's check
character (or a low confidence) gives it away.
"""

from __future__ import annotations

import functools
import random

import numpy as np

from agentic_ray.domains.inspection.font import ALPHABET, GLYPH_H, GLYPH_W, SERIAL_BODY, glyph
from agentic_ray.domains.inspection.images import SERIAL_SCALE, SERIAL_X, SERIAL_Y

GARBLE_CHARS = "?#%*~"
"""What a garbled read puts in place of characters (none is in the serial alphabet)."""


@functools.cache
def _templates() -> np.ndarray:
    """``(32, 5·s·3·s)`` zero-mean, unit-norm glyph templates at the print scale."""
    s = SERIAL_SCALE
    t = np.stack([np.kron(glyph(c), np.ones((s, s), dtype=np.float32)).ravel() for c in ALPHABET])
    t = t - t.mean(axis=1, keepdims=True)
    return t / np.linalg.norm(t, axis=1, keepdims=True)


def read_serial(pixels: np.ndarray) -> tuple[str, float]:
    """The serial printed on a part image.

    Args:
        pixels: ``(64, 64)`` float image.

    Returns:
        ``(text, confidence)``: one character of :data:`~agentic_ray.domains.inspection.font.ALPHABET` per cell,
        and the smallest best-vs-second correlation margin over the cells (0: a coin toss, up to 2).
    """
    s = SERIAL_SCALE
    h, w = GLYPH_H * s, GLYPH_W * s
    cells = []
    for i in range(SERIAL_BODY + 1):
        x0 = SERIAL_X + i * (GLYPH_W + 1) * s
        ink = 1.0 - pixels[SERIAL_Y : SERIAL_Y + h, x0 : x0 + w]  # dark print = high
        cells.append(ink.ravel())
    x = np.stack(cells).astype(np.float32)
    x = x - x.mean(axis=1, keepdims=True)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-6)
    corr = x @ _templates().T  # (cells, glyphs)
    best = np.argsort(-corr, axis=1)[:, :2]
    text = "".join(ALPHABET[int(j)] for j in best[:, 0])
    rows = np.arange(len(cells))
    margin = float((corr[rows, best[:, 0]] - corr[rows, best[:, 1]]).min())
    return text, margin


def garble(text: str, rng: random.Random) -> str:
    """``text`` with one to three characters replaced by :data:`GARBLE_CHARS` (same length, still a string)."""
    chars = list(text)
    for i in rng.sample(range(len(chars)), rng.randint(1, min(3, len(chars)))):
        chars[i] = rng.choice(GARBLE_CHARS)
    return "".join(chars)
