"""Bootstrap intervals against distributions that can be written down by hand."""

from __future__ import annotations

import pytest

from agentic_ray.eval.bootstrap import bootstrap_mean_ci, paired_difference_ci


def test_mean_interval_matches_the_exact_bootstrap_distribution():
    # Resampling [0, 0, 0, 0, 1] gives a mean of k/5 with k ~ Binomial(5, 0.2):
    # P(k=0) = 0.328, cumulative P(k<=1) = 0.737, P(k<=2) = 0.942, P(k<=3) = 0.993.
    # The 2.5% quantile is therefore 0 and the 97.5% quantile 3/5.
    assert bootstrap_mean_ci([0, 0, 0, 0, 1]) == pytest.approx((0.0, 0.6))


def test_mean_interval_edge_cases():
    assert bootstrap_mean_ci([0.3]) is None  # one seed: nothing to resample
    assert bootstrap_mean_ci([0.3, 0.3, 0.3]) == pytest.approx((0.3, 0.3))
    lo, hi = bootstrap_mean_ci([0.60, 0.65, 0.70, 0.72, 0.80])
    assert 0.60 <= lo < 0.694 < hi <= 0.80
    assert bootstrap_mean_ci([0.60, 0.65, 0.70, 0.72, 0.80]) == (lo, hi)  # seeded: reproducible


def test_paired_difference_resamples_pairs_together():
    # Every pair differs by exactly +1, so every resample's mean difference is 1 (unpaired resampling would not be).
    assert paired_difference_ci([1, 2, 3, 4], [0, 1, 2, 3]) == pytest.approx((1.0, 1.0))
    assert paired_difference_ci([1], [0]) is None
    with pytest.raises(ValueError, match="length"):
        paired_difference_ci([1, 2], [1])


def test_ratio_of_sums_resamples_clusters_not_items():
    from agentic_ray.eval.bootstrap import ratio_of_sums_ci

    # Ten episodes of 10 items each, half of them all right and half all wrong: 100 items, but only 10
    # independent clusters, so the interval is as wide as a mean over 10 samples, not over 100.
    sums, counts = [10.0] * 5 + [0.0] * 5, [10] * 10
    lo, hi = ratio_of_sums_ci(sums, counts)
    items = bootstrap_mean_ci([1.0] * 50 + [0.0] * 50)
    per_episode = bootstrap_mean_ci([1.0] * 5 + [0.0] * 5)
    assert items is not None and per_episode is not None
    assert (lo, hi) == pytest.approx(per_episode, abs=0.02)
    assert hi - lo > 2 * (items[1] - items[0])
    # The point estimate is the ratio of the sums: clusters of other sizes weigh by their items.
    lo, hi = ratio_of_sums_ci([3.0, 1.0, 0.0], [3, 1, 0])
    assert lo == hi == 1.0
    assert ratio_of_sums_ci([1.0, 0.0], [1, 0]) is None
    with pytest.raises(ValueError):
        ratio_of_sums_ci([1.0], [1, 2])
