"""Pareto fronts and non-dominated ranks of trials on several validation metrics.

Written here rather than taken from Optuna: Optuna's front and rank helpers are private
(``optuna.study._multi_objective``) and work on ``FrozenTrial`` objects, while a sweep ranks plain metric rows,
including trials Tune ran without Optuna (grid search). A sweep has tens of trials, so the O(n²) pairwise check
is instant.

Semantics: ``a`` dominates ``b`` when ``a`` is at least as good on every objective and strictly better on one.
Equal points (duplicates) do not dominate each other, so all copies of a non-dominated point are on the front;
points tied on one objective are ordered by the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Mode = Literal["max", "min"]


def _oriented(point: Sequence[float], modes: Sequence[Mode]) -> list[float]:
    if len(point) != len(modes):
        raise ValueError(f"point {list(point)} has {len(point)} values for {len(modes)} objectives")
    return [float(v) if m == "max" else -float(v) for v, m in zip(point, modes, strict=True)]


def dominates(a: Sequence[float], b: Sequence[float], modes: Sequence[Mode]) -> bool:
    """Whether ``a`` Pareto-dominates ``b`` (``modes[i]``: whether objective ``i`` is maximised or minimised)."""
    oa, ob = _oriented(a, modes), _oriented(b, modes)
    return all(x >= y for x, y in zip(oa, ob, strict=True)) and any(
        x > y for x, y in zip(oa, ob, strict=True)
    )


def pareto_front(points: Sequence[Sequence[float]], modes: Sequence[Mode]) -> list[int]:
    """Indices (ascending) of the points no other point dominates."""
    return [i for i, p in enumerate(points) if not any(dominates(q, p, modes) for q in points)]


def nondominated_ranks(points: Sequence[Sequence[float]], modes: Sequence[Mode]) -> list[int]:
    """Front number of every point: 0 for the Pareto front, 1 for the front once front 0 is removed, and so on."""
    ranks = [-1] * len(points)
    left = list(range(len(points)))
    level = 0
    while left:
        front = [left[i] for i in pareto_front([points[j] for j in left], modes)]
        for i in front:
            ranks[i] = level
        left = [i for i in left if ranks[i] < 0]
        level += 1
    return ranks
