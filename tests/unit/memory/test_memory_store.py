"""The long-term store on a real embedded Qdrant (a tmp folder): namespaces, reopening, determinism, retrieval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord, MemoryStore, memory_id

DIM = 384


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _records(n: int, customers: int = 3, episodes: int = 2) -> list[MemoryRecord]:
    return [
        MemoryRecord(
            customer=f"c{i % customers}",
            episode=f"e{i % episodes}",
            text=f"memory {i}",
            entities=(MemoryEntity(f"o{i}", "order"),),
            turn=i,
            at_h=float(i),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("exact_index", [True, False])
def test_filters_by_customer_and_episode(tmp_path: Path, exact_index: bool) -> None:
    store = MemoryStore(MemoryConfig(path=str(tmp_path / "q"), exact_index=exact_index))
    recs = _records(24)
    vecs = _unit(np.random.default_rng(0), 24)
    store.write_vectors(recs, vecs)
    assert store.count() == 24 and store.count("c1") == 8 and store.count("c1", "e0") == 4
    for q in range(24):
        hits = store.search_vector(vecs[q], "c1", "e0", limit=10)
        assert len(hits) == 4
        assert {(h.record.customer, h.record.episode) for h in hits} == {("c1", "e0")}
        if recs[q].customer == "c1" and recs[q].episode == "e0":
            assert hits[0].id == recs[q].id and hits[0].score == pytest.approx(1.0, abs=1e-5)
    only = store.search_vector(vecs[5], "c2", entity_id="o5", limit=5)
    assert [h.record.text for h in only] == ["memory 5"]
    assert [r.text for r in store.records("c0", "e1")] == ["memory 3", "memory 9", "memory 15", "memory 21"]
    store.close()


def test_the_exact_index_returns_what_qdrant_returns() -> None:
    recs = _records(120, customers=4, episodes=5)
    vecs = _unit(np.random.default_rng(1), 120)
    queries = _unit(np.random.default_rng(2), 6)
    results = {}
    for exact in (True, False):
        store = MemoryStore(
            MemoryConfig(exact_index=exact)
        )  # in memory: a path pays ~11 ms of fsync per point
        store.write_vectors(recs, vecs)
        results[exact] = [
            [(h.id, round(h.score, 4)) for h in store.search_vector(q, c, e, limit=5)]
            for q in queries
            for c, e in (("c1", None), ("c2", "e3"), (None, None))
        ]
        store.close()
    assert results[True] == results[False]


def test_a_reopened_store_keeps_its_points(tmp_path: Path) -> None:
    path = str(tmp_path / "q")
    recs = _records(10)
    vecs = _unit(np.random.default_rng(3), 10)
    store = MemoryStore(MemoryConfig(path=path))
    store.write_vectors(recs, vecs)
    store.close()  # local mode allows one client per folder
    again = MemoryStore(MemoryConfig(path=path))
    assert again.count() == 10
    hit = again.search_vector(vecs[7], "c1", limit=1)[0]
    assert hit.id == recs[7].id and hit.record == recs[7]
    keyed = MemoryRecord("c1", "e1", "the same words", key="fact-7")  # a key, not the text, names the memory
    again.write_vectors([keyed], vecs[:1])
    back = next(r for r in again.records("c1", "e1") if r.text == "the same words")
    assert back == keyed and back.id == again.search_vector(vecs[0], "c1", "e1", limit=1)[0].id
    again.close()


def test_the_same_writes_give_the_same_memory(tmp_path: Path) -> None:
    recs = _records(30)
    vecs = _unit(np.random.default_rng(4), 30)
    q = _unit(np.random.default_rng(5), 1)[0]
    snaps = []
    for run in range(2):
        store = MemoryStore(MemoryConfig(path=str(tmp_path / f"run{run}")))
        ids = store.write_vectors(recs, vecs)
        store.write_vectors(recs[:5], vecs[:5])  # writing a memory again replaces it
        snaps.append((ids, [h.id for h in store.search_vector(q, "c0", limit=8)], store.records(None)))
        assert store.count() == 30
        store.close()
    assert snaps[0] == snaps[1]
    assert snaps[0][0][0] == memory_id("c0", "e0", "memory 0")
    assert memory_id("c0", "e0", "x") != memory_id("c0", "e1", "x") != memory_id("c1", "e0", "x")


def test_config_refuses_two_locations() -> None:
    with pytest.raises(ValueError, match="not both"):
        MemoryConfig(path="/tmp/x", url="http://localhost:6333")
