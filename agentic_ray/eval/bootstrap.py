"""95% bootstrap intervals (pure functions over plain numbers): over seeds in the benchmarks, over pairs for CU,
over episodes (clusters of items) for per-item quality figures.

Both use ``scipy.stats.bootstrap`` with the percentile method. BCa (scipy's default) needs a jackknife
acceleration estimate that is noisy at 5 seeds and undefined (nan) when every sample is equal, e.g. five seeds
that all complete 100% of the tasks; the percentile interval is then the point itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import bootstrap

__all__ = ["bootstrap_mean_ci", "paired_difference_ci", "ratio_of_sums_ci"]

CONFIDENCE = 0.95
N_RESAMPLES = 10_000


def _interval(
    data: tuple[np.ndarray, ...], statistic, paired: bool, confidence: float, n_resamples: int, seed: int
):
    res = bootstrap(
        data,
        statistic,
        paired=paired,
        vectorized=True,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_mean_ci(
    values: Sequence[float], *, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values`` (e.g. one metric over seeds).

    Args:
        values: The samples (at least 2 for an interval).
        confidence: Coverage of the interval.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling, so a printed interval can be reproduced.

    Returns:
        ``(low, high)``, or None with fewer than 2 samples (one seed has no spread to resample).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return None
    return _interval((x,), lambda a, axis: np.mean(a, axis=axis), False, confidence, n_resamples, seed)


def _paired(a: Sequence[float], b: Sequence[float], what: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"{what} differ in length: {x.size} vs {y.size}")
    return x, y


def paired_difference_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``mean(a) − mean(b)`` over pairs ``(a[i], b[i])`` resampled together.

    Args:
        a: First member of each pair (e.g. the fix with the reflection input on, 1/0).
        b: Second member (the same failure with it off).
        confidence: Coverage of the interval.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        ``(low, high)``, or None with fewer than 2 pairs.

    Raises:
        ValueError: If ``a`` and ``b`` differ in length.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    if x.size < 2:
        return None

    def diff(p: np.ndarray, q: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(p, axis=axis) - np.mean(q, axis=axis)

    return _interval((x, y), diff, True, confidence, n_resamples, seed)


def ratio_of_sums_ci(
    sums: Sequence[float],
    counts: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``sum(sums) / sum(counts)``, resampling clusters ``(sums[i], counts[i])``.

    The cluster bootstrap of a per-item mean whose items come in groups, e.g. the F1 of every inspected part, where
    the parts of one episode share its detector parameters and are not independent: ``sums[i]`` is episode ``i``'s
    total over its items, ``counts[i]`` its number of items. Clusters without items add nothing to either sum and are
    left out of the resampling (so no resample divides by zero).

    Returns:
        ``(low, high)``, or None with fewer than 2 clusters that have items.

    Raises:
        ValueError: If ``sums`` and ``counts`` differ in length.
    """
    x, n = _paired(sums, counts, "sums and counts")
    keep = n > 0
    if int(keep.sum()) < 2:
        return None

    def ratio(p: np.ndarray, q: np.ndarray, axis: int) -> np.ndarray:
        return np.sum(p, axis=axis) / np.sum(q, axis=axis)

    return _interval((x[keep], n[keep]), ratio, True, confidence, n_resamples, seed)
