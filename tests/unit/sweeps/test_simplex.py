"""The simplex parameterisation of reward-layer weights: every sample is valid and meets its bounds."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_ray.sweeps.simplex import (
    check_bounds,
    simplex_grid,
    unit_cube_from_weights,
    weights_from_unit_cube,
)

TOL = 1e-9


@st.composite
def bounded_simplex(draw):
    """A feasible (lo, hi, total) for k layers, plus a unit-cube point."""
    k = draw(st.integers(2, 6))
    total = draw(st.sampled_from([1.0, 0.8, 0.55, 2.0]))
    lo_share = draw(st.lists(st.floats(0, 1), min_size=k, max_size=k))
    scale = draw(st.floats(0, 0.95))
    lo = [total * scale * s / max(1.0, sum(lo_share)) for s in lo_share]
    # Upper bounds above the lower ones, and loose enough to sum to at least the total.
    slack = draw(st.lists(st.floats(0, 1), min_size=k, max_size=k))
    hi = [a + (total - sum(lo)) * s for a, s in zip(lo, slack, strict=True)]
    if sum(hi) < total:  # make it feasible by raising the last bound
        hi[-1] += total - sum(hi)
    u = draw(st.lists(st.floats(0, 1), min_size=k - 1, max_size=k - 1))
    return lo, hi, total, u


@settings(max_examples=400, deadline=None)
@given(bounded_simplex())
def test_every_unit_cube_point_gives_valid_weights_within_their_bounds(case) -> None:
    lo, hi, total, u = case
    w = weights_from_unit_cube(u, lo, hi, total)
    assert len(w) == len(lo)
    assert abs(sum(w) - total) < 1e-7
    for x, a, b in zip(w, lo, hi, strict=True):
        assert a - TOL <= x <= b + 1e-7, (w, lo, hi)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 6), st.data())
def test_execution_at_least_04_always_holds(k, data) -> None:
    lo = [0.4] + [0.0] * (k - 1)  # seed 000: execution >= 0.4
    hi = [1.0] * k
    u = data.draw(st.lists(st.floats(0, 1), min_size=k - 1, max_size=k - 1))
    w = weights_from_unit_cube(u, lo, hi, 1.0)
    assert w[0] >= 0.4 - TOL and abs(sum(w) - 1.0) < 1e-9 and min(w) >= -TOL


@settings(max_examples=300, deadline=None)
@given(bounded_simplex())
def test_inverse_round_trips_points_inside_the_upper_bounds(case) -> None:
    lo, _hi, total, u = case
    loose = [total] * len(lo)  # no upper bound binds
    w = weights_from_unit_cube(u, lo, loose, total)
    back = weights_from_unit_cube(unit_cube_from_weights(w, lo, total), lo, loose, total)
    assert back == pytest.approx(w, abs=1e-7)


def test_quickstart_default_weights_are_reproduced_exactly() -> None:
    lo, hi, total = [0.4, 0, 0, 0], [0.8, 0.3, 0.3, 0.3], 0.8
    default = [0.4, 0.15, 0.15, 0.1]
    u = unit_cube_from_weights(default, lo, total)
    assert all(0 <= x <= 1 for x in u)
    assert weights_from_unit_cube(u, lo, hi, total) == pytest.approx(default, abs=1e-12)


def test_uniform_corners_reach_the_vertices() -> None:
    lo, hi = [0.4, 0.0, 0.0], [1.0, 1.0, 1.0]
    assert weights_from_unit_cube([0.0, 0.0], lo, hi) == pytest.approx([1.0, 0.0, 0.0])  # all free mass first
    assert weights_from_unit_cube([1.0, 1.0], lo, hi) == pytest.approx([0.4, 0.0, 0.6])  # all of it last


def test_grid_is_every_lattice_point_within_the_bounds() -> None:
    lo, hi = [0.4, 0.0, 0.0, 0.0], [0.8, 0.8, 0.8, 0.8]
    grid = simplex_grid(0.2, lo, hi, 0.8)
    brute = [
        [round(0.2 * c, 10) for c in combo]
        for combo in itertools.product(range(5), repeat=4)
        if sum(combo) == 4 and combo[0] >= 2
    ]
    assert sorted(map(tuple, grid)) == sorted(map(tuple, brute)) and len(grid) == 10
    for p in grid:
        assert abs(sum(p) - 0.8) < 1e-9 and p[0] >= 0.4


def test_grid_respects_upper_bounds_and_rejects_an_inexact_step() -> None:
    grid = simplex_grid(0.1, [0.4, 0, 0], [0.6, 0.3, 0.3], 1.0)
    assert grid and all(p[0] <= 0.6 + TOL and max(p[1:]) <= 0.3 + TOL for p in grid)
    with pytest.raises(ValueError, match="multiple"):
        simplex_grid(0.3, [0, 0], [1, 1], 1.0)


@pytest.mark.parametrize(
    ("lo", "hi", "total", "match"),
    [
        ([0.6, 0.6], [1, 1], 1.0, "lower bounds"),
        ([0, 0], [0.3, 0.3], 1.0, "upper bounds"),
        ([0.5, 0], [0.4, 1], 1.0, "lo <= hi"),
        ([0, 0], [1, 1], 0.0, "total"),
    ],
)
def test_infeasible_bounds_are_errors(lo, hi, total, match) -> None:
    with pytest.raises(ValueError, match=match):
        check_bounds(lo, hi, total)


def test_wrong_number_of_coordinates_is_an_error() -> None:
    with pytest.raises(ValueError, match="coordinates"):
        weights_from_unit_cube([0.5, 0.5], [0, 0], [1, 1], 1.0)
