"""The cheap power-of-two draws equal NumPy's ``integers`` draw for draw and leave the generator where it would; the
tool-health draws equal the ``gauss`` calls they replace."""

from __future__ import annotations

import math
import random

import numpy as np

from agentic_ray.domains.draws import bits62, bits63, small_ints
from agentic_ray.domains.ecommerce.world import BASE_TOOL_HEALTH
from agentic_ray.domains.tool_health import draw_health_values


def test_bits_equal_integers_interleaved_with_other_draws() -> None:
    for seed in (0, 1, 12345):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        for i in range(3000):
            assert bits63(a) == int(b.integers(2**63))
            assert bits62(a) == int(b.integers(1 << 62))
            if i % 3 == 0:  # other draws in between, 32-bit ones too (their buffered half must line up)
                assert int(a.integers(10)) == int(b.integers(10))
                assert a.random() == b.random()
                assert int(a.integers(2**31)) == int(b.integers(2**31))
        assert a.bit_generator.state == b.bit_generator.state


def test_other_bit_generators_take_integers() -> None:
    a = np.random.Generator(np.random.MT19937(5))
    b = np.random.Generator(np.random.MT19937(5))
    assert [bits63(a) for _ in range(50)] == [int(b.integers(2**63)) for _ in range(50)]


def test_small_ints_equal_integers_interleaved_with_odd_32_bit_draws() -> None:
    for seed in range(20):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        for i in range(300):
            lo, hi = (1, 10) if i % 2 else (0, 3 + i)  # e-commerce's restock range, and others
            assert small_ints(a, lo, hi, 8) == b.integers(lo, hi, size=8).tolist()
            if i % 3 == 0:  # one 32-bit draw: the bit generator keeps the other half for the next
                assert int(a.integers(7)) == int(b.integers(7))
            assert a.random() == b.random()
        assert a.bit_generator.state == b.bit_generator.state
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    assert small_ints(a, 5, 6, 4) == b.integers(5, 6, size=4).tolist()  # one value: no draw
    assert small_ints(a, 0, 2**32, 3) == b.integers(0, 2**32, size=3).tolist()


def _health_as_written(
    r: random.Random, base: dict[str, tuple[float, float, float]]
) -> list[tuple[float, ...]]:
    return [
        (mean * math.exp(r.gauss(0.0, 0.15)), std, min(0.5, rate * math.exp(r.gauss(0.0, 0.5))))
        for mean, std, rate in base.values()
    ]


def test_health_values_equal_the_gauss_calls_and_leave_the_generator_where_they_would() -> None:
    base = {**BASE_TOOL_HEALTH, "hot": (10.0, 1.0, 0.45)}  # a rate whose draws pass the 0.5 cap
    capped = 0
    for seed in range(300):
        a, b = random.Random(seed), random.Random(seed)
        if seed % 3 == 1:  # a spare normal held from an earlier gauss call: the pairs fall differently
            assert a.gauss() == b.gauss()
        got, want = draw_health_values(a, base), _health_as_written(b, base)
        assert [tuple(map(repr, x)) for x in got] == [tuple(map(repr, x)) for x in want]  # -0.0 and nan too
        assert a.getstate() == b.getstate() and a.gauss_next == b.gauss_next
        capped += got[-1][2] == 0.5
    assert capped > 0, "no failure rate reached the cap: the clamp was not exercised"
