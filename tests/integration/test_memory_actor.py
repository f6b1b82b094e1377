"""Several Ray workers share one embedded store through the actor that owns its folder."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from agentic_ray.memory.memory_actor import memory_actor
from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_store import MemoryRecord


def test_workers_write_and_read_through_one_owner(ray_session, tmp_path: Path) -> None:
    ray = ray_session
    cfg = MemoryConfig(path=str(tmp_path / "store"))
    owner = memory_actor(cfg, name="memory_test_owner")

    @ray.remote(num_cpus=0)
    def worker(customer: str, seed: int) -> list[str]:
        store = memory_actor(
            cfg, name="memory_test_owner"
        )  # found, not created: one process holds the folder
        rng = np.random.default_rng(seed)
        vecs = rng.normal(size=(4, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        recs = [MemoryRecord(customer, "ep", f"{customer} fact {i}") for i in range(4)]
        ids = ray.get(store.write_vectors.remote(recs, vecs))
        hit = ray.get(store.search_vector.remote(vecs[2], customer, limit=1))[0]
        assert hit.id == ids[2]
        return ids

    ids = ray.get([worker.remote("ann", 1), worker.remote("ben", 2)])
    assert ray.get(owner.count.remote()) == 8
    assert ray.get(owner.count.remote("ben")) == 4 and set(ids[1]) == {
        r.id for r in (MemoryRecord("ben", "ep", f"ben fact {i}") for i in range(4))
    }
    t0 = time.perf_counter()
    for _ in range(20):
        ray.get(owner.count.remote("ann", "ep"))
    hop_ms = (time.perf_counter() - t0) / 20 * 1000
    print(f"actor round trip (count): {hop_ms:.2f} ms")
    ray.get(owner.close.remote())
    ray.kill(owner)


def test_a_session_over_the_actor_runs_the_memory_skills(ray_session, tmp_path: Path) -> None:
    """The gateway's memory skills on a worker's view of the actor-owned store (texts embedded in the worker)."""
    from agentic_ray.memory.memory_actor import RemoteMemoryStore
    from agentic_ray.memory.memory_session import MemorySession
    from agentic_ray.memory.memory_skills import SEARCH, WRITE, memory_handlers, memory_skill_contracts
    from agentic_ray.skills.backends import PythonBackend
    from agentic_ray.skills.contracts import DomainContracts
    from agentic_ray.skills.executor import SimClock, ToolExecutor

    ray = ray_session
    owner = memory_actor(MemoryConfig(path=str(tmp_path / "store")))
    earlier = MemorySession(RemoteMemoryStore(owner), customer="cara", episode="ep0")
    earlier.write("Leave parcels with the neighbour at number 14", [])
    session = MemorySession(RemoteMemoryStore(owner), customer="cara", episode="ep1", now_h=50.0)
    types = ["order"]
    contracts = DomainContracts(
        domain="memory_demo",
        skills=memory_skill_contracts(types, query_source="request.text", note_source="request.text"),
    )
    ex = ToolExecutor(contracts, PythonBackend(memory_handlers(lambda w: session, types)), clock=SimClock())
    wrote = ex.call(WRITE, {"note": "Order o-3 is the green scarf", "order_id": "o-3"}, intent_id="i")
    assert wrote.ok, wrote.message
    found = ex.call(SEARCH, {"query": "who takes my parcels"}, intent_id="i")
    assert found.ok and found.payload["texts"][0] == "Leave parcels with the neighbour at number 14"
    scarf = ex.call(SEARCH, {"query": "the scarf"}, intent_id="i")
    assert (
        scarf.payload["order_hits"][0]["id"] == "o-3"
        and scarf.payload["order_hits"][0]["memory_age_h"] == 0.0
    )
    assert ray.get(owner.count.remote("cara")) == 2 and ray.get(owner.count.remote("cara", "ep1")) == 1
    ray.get(owner.close.remote())
    ray.kill(owner)
