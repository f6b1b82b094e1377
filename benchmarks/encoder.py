"""CPU cost of the state encoders + heads: parameters, serving latency, batch forward and train step.

Prints one JSON line ``{"benchmark": "encoder", ..., "gnn": {...}, "flat": {...}}`` with, per encoder:
``params``, ``forward_b1_ms`` (batch 1, eval, no grad: the serving path), ``forward_b1024_ms`` and
``train_step_b1024_ms`` (forward, actor-critic loss, backward, Adam step), and for the GNN ``graph_build_b1024_ms``
(building the batched graph indices from the padded arrays). Medians over repeats. Uses the e-commerce env's spec
when ``agentic_ray.envs.ecommerce`` exposes one, else ``ecommerce_like_specs()``.

Run from the repository root: ``python benchmarks/encoder.py [--threads 2]``. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_learner import actor_critic_loss, make_batch

from agentic_ray.models import (
    AAACModel,
    AAACModelConfig,
    BatchedHeteroGraph,
    HeteroGNNEncoder,
    PackedActionLayout,
    benchmark_specs,
)


def median_ms(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return round(statistics.median(times), 3)


def bench_encoder(
    encoder: Literal["gnn", "flat"], batch: dict[str, Any], spec: Any, layout: Any, repeats: int
) -> dict[str, Any]:
    torch.manual_seed(0)
    model = AAACModel(spec, layout, AAACModelConfig(encoder=encoder, device="cpu"))
    packed = PackedActionLayout.from_action_layout(layout)
    obs = batch["obs"]
    obs1 = {k: v[:1] for k, v in obs.items()}

    def forward(o: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            return model.policy_logits(o, model.encode(o))["packed"]

    model.eval()
    out: dict[str, Any] = {
        "params": sum(p.numel() for p in model.parameters()),
        "forward_b1_ms": median_ms(lambda: forward(obs1), repeats=50, warmup=5),
        "forward_b1024_ms": median_ms(lambda: forward(obs), repeats=repeats),
    }
    if isinstance(model.encoder, HeteroGNNEncoder):
        layout_of_gnn = model.encoder.layout
        out["graph_build_b1024_ms"] = median_ms(
            lambda: BatchedHeteroGraph.from_padded(obs, layout_of_gnn), repeats=10
        )
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def train_step() -> None:
        opt.zero_grad(set_to_none=True)
        actor_critic_loss(model, packed, batch).backward()
        opt.step()

    out["train_step_b1024_ms"] = median_ms(train_step, repeats=repeats)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the batch-1024 measurements")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec, layout, source = benchmark_specs()
    torch.manual_seed(0)
    sampler = AAACModel(spec, layout, AAACModelConfig(device="cpu"))
    batch = make_batch(spec, layout, sampler, 1024)
    result: dict[str, Any] = {"benchmark": "encoder", "spec": source, "threads": args.threads, "batch": 1024}
    encoders: tuple[Literal["gnn", "flat"], ...] = ("gnn", "flat")
    for encoder in encoders:
        result[encoder] = bench_encoder(encoder, batch, spec, layout, args.repeats)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
