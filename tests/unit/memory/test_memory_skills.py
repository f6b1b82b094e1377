"""memory.search and memory.write as skills through the real executor gateway: typed outputs reveal entities."""

from __future__ import annotations

import pytest

from agentic_ray.domains.knowledge import Knowledge, reveal_result
from agentic_ray.memory.entity_graph import USED_FOR
from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_session import MemorySession
from agentic_ray.memory.memory_skills import SEARCH, WRITE, memory_handlers, memory_skill_contracts
from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord, MemoryStore
from agentic_ray.skills.backends import PythonBackend
from agentic_ray.skills.contracts import DomainContracts
from agentic_ray.skills.executor import SimClock, ToolExecutor
from agentic_ray.text import SentenceEmbedder

TYPES = ["order", "address"]


@pytest.fixture()
def gateway(embedder: SentenceEmbedder):
    store = MemoryStore(MemoryConfig(), embedder=embedder)
    # an earlier conversation of the same customer, and another customer's look-alike
    store.write(
        [
            MemoryRecord(
                "alice",
                "ep0",
                "Please always deliver to the parcel locker at Central Station",
                (MemoryEntity("a-locker", "address", {"kind": "locker"}),),
                at_h=0.0,
            ),
            MemoryRecord(
                "alice",
                "ep0",
                "Order o-17 was the red kettle",
                (MemoryEntity("o-17", "order", {"status": "delivered", "secret": "x"}),),
                at_h=0.0,
            ),
            MemoryRecord(
                "bob",
                "ep5",
                "Please always deliver to the parcel locker at Central Station",
                (MemoryEntity("a-bob", "address", {"kind": "locker"}),),
                at_h=0.0,
            ),
        ]
    )
    session = MemorySession(store, customer="alice", episode="ep1", now_h=30.0, turn=4)
    session.graph.mention("o-17", "order", source="tool", at_h=0.0, turn=0)
    session.graph.mention("a-home", "address", source="customer", at_h=0.0, turn=0, fields={"kind": "home"})
    session.graph.relate("a-home", USED_FOR, "o-17", at_h=0.0)
    contracts = DomainContracts(
        domain="memory_demo",
        node_types=TYPES,
        skills=memory_skill_contracts(TYPES, query_source="request.text", note_source="request.text"),
    )
    backend = PythonBackend(memory_handlers(lambda world: session, TYPES), measure_wall=False)
    ex = ToolExecutor(contracts, backend, clock=SimClock())
    yield ex, session
    store.close()


def test_a_query_reveals_the_customer_s_remembered_entity(gateway) -> None:
    ex, _session = gateway
    res = ex.call(SEARCH, {"query": "the same locker as last time"}, intent_id="i1")
    assert res.ok, res.message
    assert [h["id"] for h in res.payload["address_hits"]] == ["a-locker"]  # never bob's look-alike
    assert res.payload["address_hits"][0]["memory_age_h"] == 30.0  # said at 0 h, now 30 h
    k = Knowledge(TYPES)
    touched = reveal_result(k, ex.contracts[SEARCH], res.params, res.payload)
    assert ("address", "a-locker") in touched and ("order", "o-17") in touched  # a lookup's reveal, unchanged
    assert k.fields("address", "a-locker")["memory_score"] == res.payload["address_hits"][0]["memory_score"]
    assert [r["skill"] for r in ex.audit.rows()] == [SEARCH]  # audited like any call


def test_a_pointer_recalls_its_memories_and_related_entities(gateway) -> None:
    ex, _session = gateway
    res = ex.call(SEARCH, {"order_id": "o-17"}, intent_id="i2")
    assert res.ok, res.message
    assert res.payload["texts"] == ["Order o-17 was the red kettle"]
    assert [h["id"] for h in res.payload["order_hits"]] == ["o-17"]
    assert [h["id"] for h in res.payload["address_hits"]] == ["a-home"]  # used_for o-17, from the graph
    assert res.payload["order_hits"][0]["memory_age_h"] == 30.0
    bad = ex.call(SEARCH, {}, intent_id="i3")
    assert not bad.ok and bad.error_code == "INVALID_INPUT"
    two = ex.call(SEARCH, {"order_id": "o-17", "address_id": "a-home"}, intent_id="i3")
    assert not two.ok and two.error_code == "INVALID_INPUT"


def test_a_write_is_stored_in_the_episode_and_found_later(gateway) -> None:
    ex, session = gateway
    res = ex.call(
        WRITE, {"note": "Customer prefers a phone call before delivery", "order_id": "o-99"}, intent_id="i4"
    )
    assert res.ok, res.message
    assert session.store.count("alice", "ep1") == 1
    assert session.graph.node("o-99")["last_confirmed_h"] == 30.0 and session.graph.node("o-99")[
        "sources"
    ] == ["agent"]
    found = ex.call(SEARCH, {"query": "call them before delivering"}, intent_id="i5")
    assert found.ok, (found.error_code, found.message)
    assert found.payload["texts"][0] == "Customer prefers a phone call before delivery"
    assert found.payload["order_hits"][0]["id"] == "o-99"


def test_declared_recalled_fields_are_revealed_for_the_entities_whose_memories_state_them(gateway) -> None:
    """``recalled_fields``: a search reveals the fields memory holds about a recalled entity where the domain
    declares them (here an address's ``kind``), in ``<type>_recalled``, only for the entities whose memories state
    them (a-home's kind comes from the graph, o-17 declares none); undeclared fields (o-17's ``secret``) stay out."""
    _ex, session = gateway
    fields = {"address": {"kind": "string"}}
    contracts = DomainContracts(
        domain="memory_demo",
        node_types=TYPES,
        skills=memory_skill_contracts(
            TYPES, query_source="request.text", note_source="request.text", recalled_fields=fields
        ),
    )
    handlers = memory_handlers(lambda world: session, TYPES, recalled_fields={"address": ["kind"]})
    ex = ToolExecutor(contracts, PythonBackend(handlers, measure_wall=False), clock=SimClock())
    res = ex.call(SEARCH, {"query": "the same locker as last time"}, intent_id="r1")
    assert res.ok, res.message
    assert res.payload["address_recalled"] == [{"id": "a-locker", "kind": "locker"}]
    k = Knowledge(TYPES)
    reveal_result(k, ex.contracts[SEARCH], res.params, res.payload)
    assert k.fields("address", "a-locker")["kind"] == "locker" and "secret" not in k.fields("order", "o-17")
    res = ex.call(
        SEARCH, {"order_id": "o-17"}, intent_id="r2"
    )  # the graph's related address carries its kind
    assert [r["id"] for r in res.payload["address_recalled"]] == [
        "a-home"
    ] and "order_recalled" not in res.payload
    assert "address_recalled" not in gateway[0].contracts[SEARCH].output.fields  # only where declared
