"""Reward-layer weights as points of a bounded simplex: every searcher's sample is a valid weight vector.

The weights ``w`` of ``k`` layers satisfy ``Σ w = total`` and ``lo ≤ w ≤ hi`` (e.g. "execution ≥ 0.4", seed 000).
Three ways in:

* :func:`weights_from_unit_cube`: ``k − 1`` numbers in ``[0, 1]`` (what Optuna or random search samples) →
  weights. Stick-breaking with ``Beta(1, k−1−i)`` sticks maps the uniform cube onto the uniform simplex, the
  lower bounds are an affine shift, and the upper bounds a one-pass water-filling (the excess over ``hi`` goes
  to the other layers in proportion to their room), so no sample is ever rejected.
* :func:`unit_cube_from_weights`: the inverse (for weights inside the upper bounds), so a known point such as
  the experiment's default weights can be handed to a searcher as a starting point.
* :func:`simplex_grid`: every lattice point ``w = n·step`` that meets the bounds (the seeds' grid search).

Pure functions on plain floats; no Ray.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

#: Slack for float sums and bounds (weights are printed with 4 decimals; this is far below).
EPS = 1e-9


def check_bounds(lo: Sequence[float], hi: Sequence[float], total: float) -> None:
    """Raise ``ValueError`` unless a weight vector with ``lo ≤ w ≤ hi`` and ``Σ w = total`` exists."""
    if len(lo) != len(hi) or not lo:
        raise ValueError("lo and hi must have the same, non-zero length")
    if total <= 0:
        raise ValueError(f"total must be > 0, got {total}")
    for i, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if a < 0 or b < a:
            raise ValueError(f"bounds of weight {i}: need 0 <= lo <= hi, got lo={a}, hi={b}")
    if sum(lo) > total + EPS:
        raise ValueError(f"lower bounds sum to {sum(lo):.4f} > total {total}")
    if sum(hi) < total - EPS:
        raise ValueError(f"upper bounds sum to {sum(hi):.4f} < total {total}")


def weights_from_unit_cube(
    u: Sequence[float], lo: Sequence[float], hi: Sequence[float], total: float = 1.0
) -> list[float]:
    """Map ``u ∈ [0, 1]^(k−1)`` to weights with ``Σ w = total`` and ``lo ≤ w ≤ hi``.

    Args:
        u: ``k − 1`` coordinates in ``[0, 1]`` (values outside are clipped).
        lo: ``k`` lower bounds.
        hi: ``k`` upper bounds.
        total: The sum of the weights.

    Returns:
        ``k`` weights. Uniform ``u`` gives weights uniform on the simplex when no upper bound binds.
    """
    check_bounds(lo, hi, total)
    k = len(lo)
    if len(u) != k - 1:
        raise ValueError(f"need {k - 1} unit-cube coordinates for {k} weights, got {len(u)}")
    free = total - sum(lo)
    s, rest = [], 1.0
    for i, ui in enumerate(u):
        v = 1.0 - min(1.0, max(0.0, float(ui))) ** (1.0 / (k - 1 - i))  # Beta(1, k−1−i) stick
        s.append(v * rest)
        rest -= v * rest
    s.append(max(0.0, rest))
    w = [a + free * si for a, si in zip(lo, s, strict=True)]
    return _cap(w, hi)


def _cap(w: list[float], hi: Sequence[float]) -> list[float]:
    """Clip at ``hi`` and hand the excess to the unclipped weights in proportion to their room (``hi − w``).

    One pass suffices: the room left is ``Σhi − Σw ≥ excess`` whenever ``Σhi ≥ total``, so no weight is pushed
    past its own bound, and weights only grow, so the lower bounds still hold.
    """
    excess = sum(max(0.0, x - h) for x, h in zip(w, hi, strict=True))
    if excess <= 0:
        return w
    room = [0.0 if x >= h else h - x for x, h in zip(w, hi, strict=True)]
    total_room = sum(room)
    return [
        min(x, h) + (excess * r / total_room if total_room > 0 else 0.0)
        for x, h, r in zip(w, hi, room, strict=True)
    ]


def unit_cube_from_weights(w: Sequence[float], lo: Sequence[float], total: float = 1.0) -> list[float]:
    """The ``u`` that :func:`weights_from_unit_cube` maps to ``w`` (exact when no upper bound binds at ``w``).

    Raises:
        ValueError: ``w`` does not sum to ``total`` or is below a lower bound.
    """
    if len(w) != len(lo):
        raise ValueError(f"{len(w)} weights for {len(lo)} bounds")
    if abs(sum(w) - total) > 1e-6:
        raise ValueError(f"weights sum to {sum(w):.6f}, not {total}")
    if any(x < a - EPS for x, a in zip(w, lo, strict=True)):
        raise ValueError(f"weights {list(w)} are below their lower bounds {list(lo)}")
    k, free = len(w), total - sum(lo)
    if free <= EPS:
        return [0.0] * (k - 1)
    s = [(x - a) / free for x, a in zip(w, lo, strict=True)]
    u, rest = [], 1.0
    for i in range(k - 1):
        v = min(1.0, max(0.0, s[i] / rest)) if rest > EPS else 0.0
        u.append((1.0 - v) ** (k - 1 - i))
        rest -= s[i]
    return u


def simplex_grid(
    step: float, lo: Sequence[float], hi: Sequence[float], total: float = 1.0
) -> list[list[float]]:
    """All weight vectors with every weight a multiple of ``step``, ``Σ w = total`` and ``lo ≤ w ≤ hi``.

    Raises:
        ValueError: ``total`` is not a multiple of ``step``, or no lattice point meets the bounds.
    """
    check_bounds(lo, hi, total)
    n = round(total / step)
    if n <= 0 or abs(n * step - total) > 1e-6:
        raise ValueError(f"total {total} is not a multiple of grid step {step}")
    lo_n = [math.ceil(a / step - 1e-6) for a in lo]
    hi_n = [math.floor(b / step + 1e-6) for b in hi]
    points = []
    for head in itertools.product(*(range(a, b + 1) for a, b in zip(lo_n[:-1], hi_n[:-1], strict=True))):
        last = n - sum(head)
        if lo_n[-1] <= last <= hi_n[-1]:
            points.append([round(c * step, 10) for c in (*head, last)])
    if not points:
        raise ValueError(
            f"no point of the grid with step {step} meets the bounds lo={list(lo)}, hi={list(hi)}"
        )
    return points
