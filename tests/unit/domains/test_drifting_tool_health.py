"""A world's tool health drifted lazily (:class:`DriftingToolHealth`, issue 32) reads, bit for bit, what a drift
applied at every tick leaves, and draws the same numbers from the env's RNG: a world read after every tick (each
tick applied at once, the table drawn at once) against one read only at the end, past ``PENDING_MAX`` ticks."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np
import pytest

from agentic_ray.domains.ecommerce.world import ShopWorld
from agentic_ray.domains.ecommerce.world import make_world as make_shop
from agentic_ray.domains.helpdesk.world import HelpdeskWorld
from agentic_ray.domains.helpdesk.world import make_world as make_desk
from agentic_ray.domains.tool_health import PENDING_MAX, DriftingToolHealth


def _values(world: ShopWorld | HelpdeskWorld) -> list[tuple[str, float, float, float, float, float]]:
    return [
        (k, h.latency_ms, h.latency_std_ms, h.failure_rate, h.base_latency_ms, h.base_failure_rate)
        for k, h in world.tool_health.items()
    ]


def _drift(world: ShopWorld | HelpdeskWorld, rng: np.random.Generator) -> None:
    if isinstance(world, ShopWorld):
        world.drift(rng, frozenset(), frozenset())
    else:
        world.drift(rng)


@pytest.mark.parametrize("make", [make_shop, make_desk], ids=["ecommerce", "helpdesk"])
def test_a_table_read_late_equals_one_read_at_every_tick(make) -> None:  # type: ignore[no-untyped-def]
    ticks = PENDING_MAX + 37  # the kept ticks are applied unread once, then kept again
    for seed in range(3):
        eager, lazy = make(np.random.default_rng(seed)), make(np.random.default_rng(seed))
        rng_eager, rng_lazy = np.random.default_rng(100 + seed), np.random.default_rng(100 + seed)
        seen = _values(eager)  # the table drawn at once
        for _ in range(ticks):
            _drift(eager, rng_eager)
            _drift(lazy, rng_lazy)
            seen = _values(eager)  # every tick applied at once
        assert lazy.tool_health._pending, "the lazy world kept its last ticks"  # type: ignore[attr-defined]
        assert _values(lazy) == seen
        assert rng_lazy.bit_generator.state == rng_eager.bit_generator.state  # the same draws
        assert pickle.loads(pickle.dumps(lazy)).to_dict() == eager.to_dict()


def test_a_drifted_world_is_the_one_the_eager_drift_left() -> None:
    """Pinned from main at 2235fbe (every tick applied at once, the e-commerce table drawn in make_world): the
    world's ``to_dict`` after 300 ticks, tool health included."""
    got = []
    for make in (make_shop, make_desk):
        w, rng = make(np.random.default_rng(7)), np.random.default_rng(8)
        for _ in range(300):
            _drift(w, rng)
        got.append(hashlib.sha256(json.dumps(w.to_dict(), sort_keys=True).encode()).hexdigest()[:16])
    assert got == ["829370399059cc17", "717076d662ffd322"]


def test_a_world_round_trips_with_its_drifted_health() -> None:
    w = make_shop(np.random.default_rng(5))
    rng = np.random.default_rng(0)
    for _ in range(3):
        w.drift(rng)
    d = w.to_dict()
    assert isinstance(d["tool_health"], dict) and d["tool_health"]["order.get"]["latency_ms"] > 0
    w2 = ShopWorld.from_dict(d)
    assert isinstance(w2.tool_health, DriftingToolHealth) and w2.to_dict() == d
    with pytest.raises(ValueError):
        DriftingToolHealth(draw=dict)  # a lazy draw needs its size
