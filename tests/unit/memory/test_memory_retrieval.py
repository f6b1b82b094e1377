"""Retrieval with real embeddings: the right entity among distractors, and the same store through a Qdrant server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord, MemoryStore
from agentic_ray.text import SentenceEmbedder

CUSTOMER_FACTS = [
    ("o-1001", "order", "My order o-1001 was the blue kettle, please send it to the locker at the station"),
    ("o-1002", "order", "Order o-1002 is the phone case I bought last spring"),
    ("a-7", "address", "My usual delivery address is 12 Harbour Road, flat 3"),
    ("a-8", "address", "I used to live at 40 Mill Lane before I moved"),
    ("p-55", "product", "I returned the wireless headphones because the left ear was broken"),
]


def _fill(store: MemoryStore) -> None:
    recs = [
        MemoryRecord("alice", "ep1", text, (MemoryEntity(eid, typ),), turn=i, at_h=float(i))
        for i, (eid, typ, text) in enumerate(CUSTOMER_FACTS)
    ]
    # another customer says nearly the same things about other entities: never to be returned for alice
    recs += [
        MemoryRecord("bob", "ep9", text.replace("o-100", "o-900"), (MemoryEntity(eid + "-bob", typ),), turn=i)
        for i, (eid, typ, text) in enumerate(CUSTOMER_FACTS)
    ]
    store.write(recs)


QUERIES = [
    ("which locker should the kettle go to", "o-1001"),
    ("the phone case order", "o-1002"),
    ("where do I deliver now", "a-7"),
    ("the headphones that were sent back", "p-55"),
]


def _check(store: MemoryStore) -> None:
    for query, want in QUERIES:
        hits = store.search(query, "alice", limit=5)
        assert hits[0].record.entities[0].id == want, (query, [h.record.text for h in hits])
        assert all(h.record.customer == "alice" for h in hits)
    by_entity = store.search("address", "alice", entity_id="a-8")
    assert [h.record.entities[0].id for h in by_entity] == ["a-8"]


def test_the_right_entity_comes_first_among_distractors(tmp_path: Path, embedder: SentenceEmbedder) -> None:
    store = MemoryStore(MemoryConfig(path=str(tmp_path / "q")), embedder=embedder)
    _fill(store)
    _check(store)
    store.close()


@pytest.mark.skipif(
    not os.environ.get("QDRANT_URL"), reason="QDRANT_URL is not set: no Qdrant server to test against"
)
def test_server_mode_through_the_same_code(embedder: SentenceEmbedder) -> None:
    import uuid

    cfg = MemoryConfig(url=os.environ["QDRANT_URL"], collection=f"agentic_ray_test_{uuid.uuid4().hex[:8]}")
    store = MemoryStore(cfg, embedder=embedder)
    try:
        _fill(store)
        assert store.count("alice") == len(CUSTOMER_FACTS) and store.count("bob", "ep9") == len(
            CUSTOMER_FACTS
        )
        _check(store)
    finally:
        store.client.delete_collection(cfg.collection)
        store.close()
