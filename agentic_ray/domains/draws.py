"""Cheap exact forms of the power-of-two integer draws the env and the worlds make on a NumPy ``Generator``.

``rng.integers(2**63)`` and ``rng.integers(1 << 62)`` cost ~4.5 us a call (argument checks, a 0-d array), and the
env makes one per step (the trace id) and a few per reset (the episode id, each world's seed). For a range of
``2**b`` NumPy's bounded draw is Lemire's method on one 64-bit output of the bit generator with a rejection
threshold of ``(2**64 - 2**b) % 2**b == 0``, so it never rejects and returns that output's top ``b`` bits: the same
value as ``bit_generator.random_raw() >> (64 - b)`` (~0.7 us), from the same single 64-bit draw, which leaves the
generator in the same state (the 64-bit path does not touch the bit generator's buffered 32-bit half). That holds
for ``PCG64`` (``default_rng``'s), whose raw output is its 64-bit output; any other bit generator takes
``integers``.

:func:`small_ints` is ``rng.integers(lo, hi, size=n).tolist()`` for a small range: NumPy draws each value by
Lemire's method on the bit generator's 32-bit output (which hands out the two halves of one 64-bit output in turn,
the spare half kept in the bit generator), and its wrapper costs ~9 us for 8 values (argument checks, ``np.prod``
of the size: 1.6% of env time on e-commerce, whose drift draws 8 restock amounts a step); the same method on the
same 32-bit outputs, called through the bit generator's ``ctypes`` interface, is ~4 us.

``tests/unit/domains/test_draws.py`` checks each equality draw for draw, interleaved with other draws.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bits62", "bits63", "small_ints"]


def bits63(rng: np.random.Generator) -> int:
    """``int(rng.integers(2**63))``, exactly (see the module docstring)."""
    bg = rng.bit_generator
    return int(bg.random_raw()) >> 1 if type(bg) is np.random.PCG64 else int(rng.integers(2**63))


def bits62(rng: np.random.Generator) -> int:
    """``int(rng.integers(1 << 62))``, exactly (see the module docstring)."""
    bg = rng.bit_generator
    return int(bg.random_raw()) >> 2 if type(bg) is np.random.PCG64 else int(rng.integers(1 << 62))


def small_ints(rng: np.random.Generator, lo: int, hi: int, n: int) -> list[int]:
    """``rng.integers(lo, hi, size=n).tolist()``, exactly, for ``1 < hi - lo < 2**32`` on ``PCG64`` (anything
    else takes ``integers``): per value NumPy's bounded 32-bit Lemire draw (see the module docstring)."""
    r = hi - lo - 1  # NumPy's inclusive range
    bg = rng.bit_generator
    if type(bg) is not np.random.PCG64 or not 0 < r < 0xFFFFFFFF:
        return [int(x) for x in rng.integers(lo, hi, size=n)]
    c = bg.ctypes
    nxt, st = c.next_uint32, c.state
    ex = r + 1
    out = []
    for _ in range(n):
        m = nxt(st) * ex
        if (m & 0xFFFFFFFF) < ex:  # the rejection zone's edge: rarely entered (p < ex / 2**32)
            threshold = (0xFFFFFFFF - r) % ex
            while (m & 0xFFFFFFFF) < threshold:
                m = nxt(st) * ex
        out.append(lo + (m >> 32))
    return out
