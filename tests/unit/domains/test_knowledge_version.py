"""Knowledge's version moves exactly when what is known changes (the observation and mask caches key on it)."""

from __future__ import annotations

from agentic_ray.domains.knowledge import Knowledge


def test_version_moves_only_on_a_change() -> None:
    k = Knowledge(["order", "user"])
    k.reveal("order", "O1", {"status": "paid", "total": 10.0})
    v, ev = k.version, k.entity_version[("order", "O1")]
    k.reveal("order", "O1", {"status": "paid"})  # a re-read that reveals nothing new
    k.reveal("order", "O1")
    k.reveal("order", "O1", {"total": 10.0})
    assert (k.version, k.entity_version[("order", "O1")]) == (v, ev)
    for fields in ({"total": 10}, {"total": 11.0}, {"items": ["A"]}, {"items": ["A", "B"]}):
        before = k.version  # an equal value of another type, another value, a new field, a longer list
        k.reveal("order", "O1", fields)
        assert k.version == k.entity_version[("order", "O1")] == before + 1
        assert k.fields("order", "O1")[next(iter(fields))] == next(iter(fields.values()))
    before = k.version
    k.reveal("user", "U1")  # a new entity
    assert k.version == before + 1 and k.ids("user") == ["U1"]


def test_mentioning_a_known_entity_moves_its_version() -> None:
    k = Knowledge(["user"])
    k.reveal("user", "U1", {"level": 2})
    before = k.version
    k.mention("user", "U1")  # its row's "mentioned" flag changes
    assert k.version == k.entity_version[("user", "U1")] == before + 1
    k.mention("user", "U1")
    assert k.version == before + 1
