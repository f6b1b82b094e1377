"""Cheap exact forms of the power-of-two integer draws the env and the worlds make on a NumPy ``Generator``.

``rng.integers(2**63)`` and ``rng.integers(1 << 62)`` cost ~4.5 us a call (argument checks, a 0-d array), and the
env makes one per step (the trace id) and a few per reset (the episode id, each world's seed). For a range of
``2**b`` NumPy's bounded draw is Lemire's method on one 64-bit output of the bit generator with a rejection
threshold of ``(2**64 - 2**b) % 2**b == 0``, so it never rejects and returns that output's top ``b`` bits: the same
value as ``bit_generator.random_raw() >> (64 - b)`` (~0.7 us), from the same single 64-bit draw, which leaves the
generator in the same state (the 64-bit path does not touch the bit generator's buffered 32-bit half). That holds
for ``PCG64`` (``default_rng``'s), whose raw output is its 64-bit output; any other bit generator takes
``integers``.
``tests/unit/domains/test_draws.py`` checks the equality draw for draw, interleaved with other draws.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bits62", "bits63"]


def bits63(rng: np.random.Generator) -> int:
    """``int(rng.integers(2**63))``, exactly (see the module docstring)."""
    bg = rng.bit_generator
    return int(bg.random_raw()) >> 1 if type(bg) is np.random.PCG64 else int(rng.integers(2**63))


def bits62(rng: np.random.Generator) -> int:
    """``int(rng.integers(1 << 62))``, exactly (see the module docstring)."""
    bg = rng.bit_generator
    return int(bg.random_raw()) >> 2 if type(bg) is np.random.PCG64 else int(rng.integers(1 << 62))
