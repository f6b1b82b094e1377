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
