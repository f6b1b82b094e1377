"""CPU speed of the two GNN message-passing layers: the hand-written fused one and PyG's HeteroConv(GATv2Conv).

Prints one JSON line ``{"benchmark": "gnn_layer", ...}``: for each implementation (``fused`` =
``GatedHeteroAttentionLayer``, ``pyg`` = ``PyGGATv2HeteroLayer``) the parameter count of the whole
``HeteroGNNEncoder`` and of its message-passing layers, and, at ``torch.set_num_threads(1)`` (``--threads``) and
batch 1 and 1,024, the median ms of

* ``forward_ms``: the encoder in eval mode under ``no_grad`` (graph indices built from the padded arrays, input
  projections, the layers, the readout), the serving / env-runner path;
* ``forward_backward_ms``: the same in train mode plus the backward of a loss on the state and node embeddings,
  the learner path;

each also as ``*_cpu_ms`` (process CPU time, less sensitive to other jobs on a shared machine), and
``pyg_over_fused``, the median of the paired per-repeat ratios of each (> 1: PyG is slower). The two implementations
run alternately (order flipped every repeat) on the same observations, with the model sizes of
``AAACModelConfig``'s defaults (``--size default``) or of the quickstart (``--size small``,
``benchmarks/encoder.py``'s ``SMALL_CONFIGS``). Observations (``--obs``): ``expert`` (default) = the steps of the
domain's scripted expert on ``AgentTaskEnv`` (the graphs training sees: partial information, few revealed
entities), ``random`` = ``random_observation`` of the spec (uniform node and edge counts, denser). Timings are
wall-clock on whatever machine runs this: on a shared one other jobs add noise, so compare the ratios of one run.

Run from the repository root: ``python benchmarks/gnn_layer.py [--domain ecommerce] [--obs expert|random] [--size
default|small] [--repeats 5] [--batches 1 1024]``. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from encoder import SMALL_CONFIGS, expert_batch

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]
from specs import benchmark_specs

from agentic_ray.graph_spec import random_observation
from agentic_ray.models.aaac_model import AAACModelConfig
from agentic_ray.models.hetero_gnn_encoder import HeteroGNNEncoder
from agentic_ray.models.obs_batching import stack_observations

IMPLEMENTATIONS = ("fused", "pyg")


def encoder_config(size: str) -> dict[str, Any]:
    """The GNN sizes of ``AAACModelConfig``'s defaults (``default``) or of the quickstart (``small``)."""
    overrides = {k: v for k, v in SMALL_CONFIGS["gnn"].items() if k != "encoder"} if size == "small" else {}
    config = AAACModelConfig(**overrides)
    return {
        "hidden_dim": config.hidden_dim,
        "num_layers": config.num_layers,
        "num_heads": config.num_heads,
        "ffn_mult": config.ffn_mult,
        "add_reverse_relations": config.add_reverse_relations,
    }


def observations(domain: str, kind: str, batch_size: int) -> tuple[Any, dict[str, torch.Tensor], str]:
    """``(graph_spec, obs, spec_source)``: ``batch_size`` expert-episode or random observations of the domain."""
    if kind == "expert":
        spec, _, obs, _ = expert_batch(batch_size, domain)
        return spec, obs, f"agentic_ray/{domain}-v1"
    spec, layout, source = benchmark_specs(domain)
    rng = np.random.default_rng(0)
    return (
        spec,
        stack_observations([random_observation(spec, layout, rng) for _ in range(batch_size)]),
        source,
    )


def mean_real(obs: dict[str, torch.Tensor], keys: list[str]) -> float:
    """Mean per row of the summed masks ``keys`` (real nodes or real edges per observation)."""
    return round(float(sum((obs[k] > 0).sum() for k in keys)) / len(obs[keys[0]]), 1)


def step_functions(
    encoders: dict[str, HeteroGNNEncoder], obs: dict[str, torch.Tensor]
) -> dict[str, dict[str, Callable[[], None]]]:
    """``{mode: {implementation: fn}}`` for mode ``forward_ms`` and ``forward_backward_ms``."""

    def forward(enc: HeteroGNNEncoder) -> Callable[[], None]:
        def fn() -> None:
            enc.eval()
            with torch.no_grad():
                enc(obs)

        return fn

    def forward_backward(enc: HeteroGNNEncoder) -> Callable[[], None]:
        def fn() -> None:
            enc.train()
            for p in enc.parameters():
                p.grad = None
            out = enc(obs)
            loss = out.state.square().mean() + sum(n.square().mean() for n in out.nodes.values())
            loss.backward()

        return fn

    return {
        "forward_ms": {k: forward(e) for k, e in encoders.items()},
        "forward_backward_ms": {k: forward_backward(e) for k, e in encoders.items()},
    }


def time_alternating(
    fns: dict[str, Callable[[], None]], repeats: int, warmup: int = 1
) -> dict[str, dict[str, list[float]]]:
    """Wall and process-CPU ms of each function per repeat, the order flipped every repeat, after ``warmup``
    calls each. CPU time is what the process itself spent (all its threads), so other jobs on a shared machine
    inflate it far less than wall time."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    names = list(fns)
    out: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in names}
    for i in range(repeats):
        for name in names if i % 2 == 0 else names[::-1]:
            t, c = time.perf_counter(), time.process_time()
            fns[name]()
            out[name]["wall"].append(1e3 * (time.perf_counter() - t))
            out[name]["cpu"].append(1e3 * (time.process_time() - c))
    return out


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median of the per-repeat ratios ``a / b``."""
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="ecommerce", help="whose graph spec to use")
    parser.add_argument("--obs", choices=["expert", "random"], default="expert", help="observations to time")
    parser.add_argument("--size", choices=["default", "small"], default="default", help="model sizes")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 1024], help="batch sizes")
    parser.add_argument("--repeats", type=int, default=5, help="repeats at batch sizes > 1 (>= 5)")
    parser.add_argument("--repeats-b1", type=int, default=50, help="repeats at batch 1")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1],
        help="torch CPU thread counts (more than 1 on a loaded machine times OpenMP spin-waits, not the layers)",
    )
    args = parser.parse_args()
    if min(args.repeats, args.repeats_b1) < 5:
        parser.error("medians need >= 5 repeats")
    spec, obs, source = observations(args.domain, args.obs, max(args.batches))
    batches = {b: {k: v[:b] for k, v in obs.items()} for b in args.batches}
    config = encoder_config(args.size)
    encoders = {}
    for impl in IMPLEMENTATIONS:
        torch.manual_seed(0)
        encoders[impl] = HeteroGNNEncoder(spec, gnn_layer=impl, **config)
    result: dict[str, Any] = {
        "benchmark": "gnn_layer",
        "warning": (
            "wall-clock on a shared machine: other jobs may be running (see load_avg_start/end and cpus); "
            "compare the paired ratios within this run, not absolute ms across runs"
        ),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "spec": source,
        "relations": len(encoders["fused"].layout.relations),
        "config": config,
        "observations": args.obs,
        "size": args.size,
        "nodes_per_obs": mean_real(obs, [f"{nt}_mask" for nt in spec.node_types]),
        "edges_per_obs": mean_real(obs, [f"{r.key}_mask" for r in spec.relations]),
        "params": {k: sum(p.numel() for p in e.parameters()) for k, e in encoders.items()},
        "layer_params": {k: sum(p.numel() for p in e.layers.parameters()) for k, e in encoders.items()},
    }
    for threads in args.threads:
        torch.set_num_threads(threads)
        for batch, batch_obs in batches.items():
            repeats = args.repeats_b1 if batch == 1 else args.repeats
            cell: dict[str, Any] = {impl: {} for impl in IMPLEMENTATIONS}
            cell["pyg_over_fused"] = {}
            for mode, fns in step_functions(encoders, batch_obs).items():
                times = time_alternating(fns, repeats)
                cpu_mode = mode.replace("_ms", "_cpu_ms")
                for impl in IMPLEMENTATIONS:
                    cell[impl][mode] = round(statistics.median(times[impl]["wall"]), 2)
                    cell[impl][cpu_mode] = round(statistics.median(times[impl]["cpu"]), 2)
                cell["pyg_over_fused"][mode] = paired_ratio(times["pyg"]["wall"], times["fused"]["wall"])
                cell["pyg_over_fused"][cpu_mode] = paired_ratio(times["pyg"]["cpu"], times["fused"]["cpu"])
            result[f"threads{threads}_b{batch}"] = cell
            print(json.dumps({f"threads{threads}_b{batch}": cell}), file=sys.stderr, flush=True)  # progress
    result["repeats"] = {f"b{b}": args.repeats_b1 if b == 1 else args.repeats for b in args.batches}
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    publish("gnn_layer", [result])


if __name__ == "__main__":
    main()
