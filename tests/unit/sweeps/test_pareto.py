"""Pareto fronts and non-dominated ranks on hand-made points: ties, duplicates, mixed directions."""

from __future__ import annotations

import pytest

from agentic_ray.sweeps.pareto import dominates, nondominated_ranks, pareto_front

MAX_MIN = ["max", "min"]  # completion up, high-risk share down


def test_dominance_needs_one_strict_improvement() -> None:
    assert dominates([0.9, 0.1], [0.8, 0.1], MAX_MIN)
    assert dominates([0.9, 0.05], [0.9, 0.1], MAX_MIN)
    assert not dominates([0.9, 0.1], [0.9, 0.1], MAX_MIN)  # equal points do not dominate each other
    assert not dominates([0.9, 0.2], [0.8, 0.1], MAX_MIN)  # a trade-off
    assert not dominates([0.8, 0.1], [0.9, 0.1], MAX_MIN)


def test_front_of_a_trade_off_curve_with_dominated_points() -> None:
    points = [
        [0.90, 0.20],  # 0: front (best completion)
        [0.80, 0.05],  # 1: front
        [0.85, 0.10],  # 2: front
        [0.80, 0.10],  # 3: dominated by 1 and 2
        [0.70, 0.30],  # 4: dominated by everything above
        [0.60, 0.00],  # 5: front (lowest risk)
    ]
    assert pareto_front(points, MAX_MIN) == [0, 1, 2, 5]
    assert nondominated_ranks(points, MAX_MIN) == [0, 0, 0, 1, 2, 0]


def test_duplicates_are_all_on_the_front_and_ties_are_split_by_the_other_objective() -> None:
    points = [
        [0.925, 0.0],  # 0 and 1: the same point twice (e.g. the default and a grid point equal to it)
        [0.925, 0.0],
        [0.925, 0.1],  # 2: tied on completion, worse on risk -> dominated
        [0.900, 0.0],  # 3: tied on risk, worse on completion -> dominated
    ]
    assert pareto_front(points, MAX_MIN) == [0, 1]
    assert nondominated_ranks(points, MAX_MIN) == [0, 0, 1, 1]


def test_all_tied_points_form_one_front() -> None:
    points = [[0.5, 0.0]] * 4
    assert pareto_front(points, MAX_MIN) == [0, 1, 2, 3]
    assert nondominated_ranks(points, MAX_MIN) == [0, 0, 0, 0]


def test_three_objectives_and_directions() -> None:
    modes = ["max", "min", "min"]  # completion, high-risk share, SPT
    points = [[0.9, 0.1, 5.0], [0.9, 0.1, 4.5], [0.8, 0.0, 6.0]]
    assert pareto_front(points, modes) == [1, 2]
    assert pareto_front(points, ["min", "max", "max"]) == [0, 2]  # reversed directions, reversed answer


def test_empty_and_single_point() -> None:
    assert pareto_front([], MAX_MIN) == []
    assert nondominated_ranks([], MAX_MIN) == []
    assert pareto_front([[0.1, 0.9]], MAX_MIN) == [0]


def test_point_of_the_wrong_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="objectives"):
        pareto_front([[0.1, 0.2, 0.3]], MAX_MIN)
