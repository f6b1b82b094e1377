"""The cheap power-of-two draws equal NumPy's ``integers`` draw for draw and leave the generator where it would."""

from __future__ import annotations

import numpy as np

from agentic_ray.domains.draws import bits62, bits63, small_ints


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
