"""A 3x5 bitmap font for the serial numbers printed on parts, and the serials' check character.

A serial is five characters of :data:`ALPHABET` (32 characters: the digits and the capitals without I, O, Q and
Z, which read as 1, 0 and 2 on a worn label) followed by one check character, so that a misread or garbled serial
is detectable: :func:`check_char` is a weighted sum modulo 32 with the odd weights 1, 3, 5, 7, 9. Odd weights are
units modulo 32, so any single substitution changes the sum; a swap of two neighbours changes it unless their
indices differ by 16. :func:`render_text` draws a string with the font into a pixel array; the OCR tool reads it back
by template matching against :func:`glyph`.
"""

from __future__ import annotations

import numpy as np

ALPHABET = "0123456789ABCDEFGHJKLMNPRSTUVWXY"
"""The 32 characters a serial may contain."""

GLYPH_W, GLYPH_H = 3, 5
SERIAL_BODY = 5
"""Characters of a serial before its check character."""

_ROWS: dict[str, tuple[str, str, str, str, str]] = {
    "0": ("111", "101", "101", "101", "111"),
    "1": ("010", "110", "010", "010", "111"),
    "2": ("111", "001", "111", "100", "111"),
    "3": ("111", "001", "111", "001", "111"),
    "4": ("101", "101", "111", "001", "001"),
    "5": ("111", "100", "111", "001", "111"),
    "6": ("111", "100", "111", "101", "111"),
    "7": ("111", "001", "001", "001", "001"),
    "8": ("111", "101", "111", "101", "111"),
    "9": ("111", "101", "111", "001", "111"),
    "A": ("010", "101", "111", "101", "101"),
    "B": ("110", "101", "110", "101", "110"),
    "C": ("011", "100", "100", "100", "011"),
    "D": ("110", "101", "101", "101", "110"),
    "E": ("111", "100", "110", "100", "111"),
    "F": ("111", "100", "110", "100", "100"),
    "G": ("011", "100", "101", "101", "011"),
    "H": ("101", "101", "111", "101", "101"),
    "J": ("001", "001", "001", "101", "010"),
    "K": ("101", "101", "110", "101", "101"),
    "L": ("100", "100", "100", "100", "111"),
    "M": ("101", "111", "111", "101", "101"),
    "N": ("110", "101", "101", "101", "101"),
    "P": ("110", "101", "110", "100", "100"),
    "R": ("110", "101", "110", "101", "101"),
    "S": ("011", "100", "010", "001", "110"),
    "T": ("111", "010", "010", "010", "010"),
    "U": ("101", "101", "101", "101", "111"),
    "V": ("101", "101", "101", "101", "010"),
    "W": ("101", "101", "111", "111", "101"),
    "X": ("101", "101", "010", "101", "101"),
    "Y": ("101", "101", "010", "010", "010"),
}


def glyph(ch: str) -> np.ndarray:
    """The ``(5, 3)`` 0/1 float32 bitmap of one character of :data:`ALPHABET`.

    Raises:
        KeyError: a character the font does not have.
    """
    return np.array([[c == "1" for c in row] for row in _ROWS[ch]], dtype=np.float32)


def check_char(body: str) -> str:
    """The check character of a serial body: ``ALPHABET[Σ (2i+1)·index(c_i) mod 32]``.

    Raises:
        ValueError: a character outside :data:`ALPHABET`.
    """
    total = 0
    for i, c in enumerate(body):
        j = ALPHABET.find(c)
        if j < 0:
            raise ValueError(f"{c!r} is not a serial character")
        total += (2 * i + 1) * j
    return ALPHABET[total % len(ALPHABET)]


def checksum_ok(serial: str) -> bool:
    """Whether a serial (body + check character) is well formed and its check character matches."""
    if len(serial) != SERIAL_BODY + 1 or any(c not in ALPHABET for c in serial):
        return False
    return check_char(serial[:-1]) == serial[-1]


def make_serial(rng: np.random.Generator) -> str:
    """A random, well-formed serial."""
    body = "".join(ALPHABET[int(i)] for i in rng.integers(0, len(ALPHABET), SERIAL_BODY))
    return body + check_char(body)


def render_text(
    canvas: np.ndarray, text: str, x: int, y: int, scale: int, ink: float, spacing: int = 1
) -> list[tuple[int, int, int, int]]:
    """Draw ``text`` into ``canvas`` (in place): glyph pixels become ``ink``.

    Args:
        canvas: ``(H, W)`` float array.
        text: characters of :data:`ALPHABET`.
        x, y: top-left corner of the first glyph.
        scale: pixels per font pixel.
        ink: the value of a glyph pixel.
        spacing: font pixels between glyphs.

    Returns:
        The ``(x0, y0, x1, y1)`` cell of each character (``x1``/``y1`` exclusive), where the OCR reads it.
    """
    cells = []
    for i, ch in enumerate(text):
        x0 = x + i * (GLYPH_W + spacing) * scale
        g = np.kron(glyph(ch), np.ones((scale, scale), dtype=np.float32))
        region = canvas[y : y + GLYPH_H * scale, x0 : x0 + GLYPH_W * scale]
        region[g > 0] = ink
        cells.append((x0, y, x0 + GLYPH_W * scale, y + GLYPH_H * scale))
    return cells
