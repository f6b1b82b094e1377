"""The entity graph (typed relations, confirmation times, freshness) and the short-term window."""

from __future__ import annotations

import pytest

from agentic_ray.memory.entity_graph import BELONGS_TO, RETURNED_IN, USED_FOR, EntityGraph
from agentic_ray.memory.short_term_window import ShortTermWindow, Turn


def _graph() -> EntityGraph:
    g = EntityGraph()
    g.mention("c1", "customer", source="customer", at_h=0.0, turn=0)
    g.mention("o1", "order", source="customer", at_h=0.0, turn=0)
    g.mention("o2", "order", source="tool", at_h=1.0, turn=2, fields={"status": "shipped"})
    g.mention("a7", "address", source="customer", at_h=2.0, turn=3)
    g.mention("i3", "item", source="tool", at_h=2.0, turn=3)
    g.relate("o1", BELONGS_TO, "c1", at_h=1.0)
    g.relate("o2", BELONGS_TO, "c1", at_h=1.0)
    g.relate("a7", USED_FOR, "o1", at_h=2.0)
    g.relate("i3", RETURNED_IN, "o1", at_h=2.0)
    return g


def test_relations_are_typed_and_directed() -> None:
    g = _graph()
    assert g.related("c1", BELONGS_TO, incoming=True) == ["o1", "o2"]
    assert g.related("o1") == ["c1"]
    assert g.related("o1", incoming=True) == ["a7", "i3"]
    assert g.related("o1", USED_FOR, incoming=True) == ["a7"]
    assert g.related("o1", RETURNED_IN, incoming=True) == ["i3"]
    assert g.of_type("order") == ["o1", "o2"]  # o1 confirmed last (2 h, through a7 used_for o1)
    with pytest.raises(KeyError, match="never mentioned"):
        g.relate("o9", BELONGS_TO, "c1", at_h=0.0)
    with pytest.raises(ValueError, match="is a order"):
        g.mention("o1", "address", source="customer", at_h=0.0, turn=5)


def test_confirmation_times_and_freshness() -> None:
    g = _graph()
    assert g.node("o2")["fields"] == {"status": "shipped"} and g.node("o2")["sources"] == ["tool"]
    g.mention("o2", "order", source="customer", at_h=30.0, turn=9, fields={"total": 20.0})
    n = g.node("o2")
    assert n["last_confirmed_h"] == 30.0 and n["sources"] == ["customer", "tool"] and n["first_turn"] == 2
    assert n["fields"] == {"status": "shipped", "total": 20.0}
    assert g.freshness("o2", 40.0) == 1.0  # 10 h old
    assert g.freshness("o1", 50.0) == pytest.approx((72 - 48) / 48)  # confirmed at 2 h by the relation
    assert g.stale(80.0) == ["a7", "c1", "i3", "o1"]  # o2 was confirmed at 30 h
    g.confirm("c1", 79.0)
    assert "c1" not in g.stale(80.0)
    assert g.of_type("order") == ["o2", "o1"]
    g.relate("o1", BELONGS_TO, "c1", at_h=90.0)  # a tool confirmed the relation again: both ends are fresh
    assert g.node("o1")["last_confirmed_h"] == g.node("c1")["last_confirmed_h"] == 90.0
    assert g.g.edges["o1", "c1", BELONGS_TO]["last_confirmed_h"] == 90.0


def test_round_trip() -> None:
    g = _graph()
    back = EntityGraph.from_dict(g.to_dict())
    assert back.related("o1", incoming=True) == ["a7", "i3"] and back.node("a7") == g.node("a7")


def test_the_window_keeps_the_last_k_turns() -> None:
    w = ShortTermWindow(3)
    left = [w.add(Turn(i, "customer", f"t{i}", (f"e{i % 2}",))) for i in range(5)]
    assert [t.index for t in w.turns] == [2, 3, 4]
    assert [t.index if t else None for t in left] == [None, None, None, 0, 1]
    assert w.entities() == ["e1", "e0"] and w.seen == 5
    with pytest.raises(ValueError):
        w.add(Turn(4, "agent", "again"))
