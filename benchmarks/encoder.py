"""CPU cost of the state encoders + heads: parameters, serving latency, batch forward and train step.

Prints one JSON line ``{"benchmark": "encoder", ..., "gnn": {...}, "flat": {...}}`` with, per encoder:
``params``, ``forward_b1_ms`` (batch 1, eval, no grad, ``--threads``: the training path's forward),
``forward_b1_1thread`` (batch 1, 1 thread, the same observation through the training path and through the
inference path that evaluation and Serve act with, :mod:`agentic_ray.models.inference_policy`, timed alternately:
``training_ms``, ``inference_ms`` and their paired ratio ``inference_over_training``; and the inference
forward's matrix products alone, replayed at their shapes: ``matmuls``, ``macs_m``, ``matmul_floor_ms``, a floor
under ``inference_ms`` that fusing the other operations cannot go below, :func:`matmul_floor`), ``forward_b1024_ms`` and
``train_step_b1024_ms`` (forward, actor-critic loss, backward, Adam step), and for the GNN ``graph_build_b1024_ms``
(building the batched graph indices from the padded arrays). Medians over repeats. Uses the e-commerce env's spec
the e-commerce env's own (``benchmarks/specs.py``).

``--small`` instead times the quickstart-sized models (:data:`SMALL_CONFIGS`) on REAL env observations (the
scripted expert's episodes of ``AgentTaskEnv``): one behaviour-cloning train step (``encode`` + policy heads +
``logp`` + backward + Adam) at ``--batch`` (256), reported as samples/s of wall time and of process CPU time (the
latter is robust to other processes on a shared machine), and for the GNN with compacted edges on vs off,
interleaved step by step (``compact_speedup`` = paired wall-time ratio).

Run from the repository root: ``python benchmarks/encoder.py [--threads 2] [--small] [--forward-only]``
(``--forward-only``: only the batch-1 forwards). Not part of the test run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from gpu_learner import actor_critic_loss, make_batch

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.models import (
    AAACModel,
    AAACModelConfig,
    BatchedHeteroGraph,
    HeteroGNNEncoder,
    PackedActionLayout,
    stack_observations,
)
from agentic_ray.models.inference_policy import InferencePolicy
from agentic_ray.models.skill_argument_functional import skill_argument_logp
from benchmarks.specs import benchmark_specs

SMALL_CONFIGS: dict[str, dict[str, Any]] = {
    "gnn": {"encoder": "gnn", "hidden_dim": 32, "num_layers": 2, "num_heads": 2, "ffn_mult": 1},
    "flat": {"encoder": "flat", "hidden_dim": 64, "flat_hidden_dim": 256, "flat_layers": 2},
}
"""Recommended quickstart model sizes (2 CPUs, minutes of imitation + RL + reflection)."""


def median_ms(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return round(statistics.median(times), 3)


def forward_b1_1thread(model: AAACModel, obs1: dict[str, torch.Tensor], repeats: int = 100) -> dict[str, Any]:
    """Batch-1 forward at 1 thread through the training path and the inference path, timed alternately (after a
    warm-up of each): medians and the median of the paired ratios (robust to load that comes and goes)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    fast = InferencePolicy.for_model(model) if InferencePolicy.supports(model) else None

    def training() -> torch.Tensor:
        return model.policy_logits(obs1, model.encode(obs1))["packed"]

    def inference() -> torch.Tensor:
        assert fast is not None
        return fast(obs1).packed

    try:
        with torch.inference_mode():
            if fast is None:
                return {"training_ms": median_ms(training, repeats, warmup=10), "inference": "not covered"}
            for _ in range(10):
                training(), inference()
            pairs = []
            for i in range(repeats):
                order = (training, inference) if i % 2 == 0 else (inference, training)
                t = {}
                for fn in order:
                    t0 = time.perf_counter()
                    fn()
                    t[fn] = 1e3 * (time.perf_counter() - t0)
                pairs.append((t[training], t[inference]))
    finally:
        torch.set_num_threads(threads)
    return {
        "training_ms": round(statistics.median(p[0] for p in pairs), 3),
        "inference_ms": round(statistics.median(p[1] for p in pairs), 3),
        "inference_over_training": round(statistics.median(p[1] / p[0] for p in pairs), 3),
        **matmul_floor(inference, repeats),
    }


MATMULS = {"aten::addmm", "aten::mm", "aten::bmm"}
"""The matrix products a forward issues (leaves: ``linear`` and ``matmul`` call these)."""


def matmul_floor(forward: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """The matrix products of one forward alone, at 1 thread: a floor under its time that no fusion of the
    other operations can go below.

    The products are read from one forward with ``torch.profiler`` (their operand shapes), then replayed in
    order on operands of those shapes, each its own tensor (as the forward's weights are: about 10 MB at the
    default sizes, read once a forward). Returns ``matmuls`` (how many), ``macs_m`` (their multiply-adds, in
    millions) and ``matmul_floor_ms`` (the replay's median time).
    """
    from torch.profiler import ProfilerActivity, profile

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                forward()
            calls: list[tuple[str, list[torch.Tensor]]] = []
            macs = 0
            for event in prof.events():
                if event.name not in MATMULS:
                    continue
                shapes = event.input_shapes
                if event.name == "aten::addmm":
                    bias, a, b = shapes[0], shapes[1], shapes[2]
                    operands = [torch.randn(*bias), torch.randn(*a), torch.randn(*b)]
                    macs += a[0] * a[1] * b[1]
                else:
                    a, b = shapes[0], shapes[1]
                    operands = [torch.randn(*a), torch.randn(*b)]
                    macs += math.prod(a) * b[-1]
                calls.append((event.name, operands))

            def replay() -> None:
                for name, ops in calls:
                    if name == "aten::addmm":
                        torch.addmm(*ops)
                    elif name == "aten::mm":
                        torch.mm(*ops)
                    else:
                        torch.bmm(*ops)

            floor = median_ms(replay, repeats, warmup=10)
    finally:
        torch.set_num_threads(threads)
    return {"matmuls": len(calls), "macs_m": round(macs / 1e6, 2), "matmul_floor_ms": floor}


def bench_encoder(
    encoder: Literal["gnn", "flat"],
    batch: dict[str, Any],
    spec: Any,
    layout: Any,
    repeats: int,
    forward_only: bool = False,
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
        "forward_b1_1thread": forward_b1_1thread(model, obs1),
    }
    if forward_only:
        return out
    out["forward_b1024_ms"] = median_ms(lambda: forward(obs), repeats=repeats)
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


def expert_batch(
    batch_size: int, domain: str = "ecommerce"
) -> tuple[Any, Any, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(spec, layout, obs, actions)``: ``batch_size`` steps of the scripted expert on ``AgentTaskEnv``."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv

    env = AgentTaskEnv({"domain": domain})
    expert = env.domain.expert()
    observations: list[dict[str, np.ndarray]] = []
    actions: list[dict[str, Any]] = []
    seed = 0
    while len(observations) < batch_size:
        obs, _ = env.reset(seed=seed)
        seed += 1
        done = False
        while not done and len(observations) < batch_size:
            action = env.encode_action(*expert.plan(env.view()))
            observations.append(obs)
            actions.append(action)
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    acts = {k: torch.as_tensor(np.stack([np.asarray(a[k]) for a in actions])) for k in actions[0]}
    return env.graph_spec, env.layout, stack_observations(observations), acts


def bc_step_fn(
    spec: Any,
    layout: Any,
    config: dict[str, Any],
    obs: dict[str, torch.Tensor],
    acts: dict[str, torch.Tensor],
) -> tuple[AAACModel, Callable[[], None]]:
    """A model and its behaviour-cloning train step: forward, ``-logp``, backward, Adam."""
    torch.manual_seed(0)
    model = AAACModel(spec, layout, AAACModelConfig(device="cpu", **config)).train()
    packed = PackedActionLayout.from_action_layout(layout)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> None:
        enc = model.encode(obs)
        parts = packed.split(model.policy_logits(obs, enc)["packed"])
        loss = -skill_argument_logp(parts, packed, acts).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return model, step


def time_interleaved(steps: dict[str, Callable[[], None]], repeats: int) -> dict[str, dict[str, list[float]]]:
    """Wall and CPU seconds of each step function, interleaved (order alternating) after one warm-up each."""
    for fn in steps.values():
        fn()
    out: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in steps}
    names = list(steps)
    for i in range(repeats):
        for name in names if i % 2 == 0 else names[::-1]:
            t, c = time.perf_counter(), time.process_time()
            steps[name]()
            out[name]["wall"].append(time.perf_counter() - t)
            out[name]["cpu"].append(time.process_time() - c)
    return out


def bench_small(batch_size: int, repeats: int) -> dict[str, Any]:
    """BC train-step throughput of :data:`SMALL_CONFIGS` on real expert observations."""
    spec, layout, obs, acts = expert_batch(batch_size)
    fns: dict[str, Callable[[], None]] = {}
    params: dict[str, int] = {}
    configs: dict[str, dict[str, Any]] = {}
    for name, config in SMALL_CONFIGS.items():
        variants = {name: config}
        if config["encoder"] == "gnn":
            variants[f"{name}_padded_edges"] = {**config, "compact_edges": False}
        for key, cfg in variants.items():
            model, fns[key] = bc_step_fn(spec, layout, cfg, obs, acts)
            configs[key] = cfg
            params[key] = sum(p.numel() for p in model.parameters())
    times = time_interleaved(fns, repeats)
    result: dict[str, Any] = {}
    for key, t in times.items():
        result[key] = {
            "config": configs[key],
            "params": params[key],
            "samples_per_s_wall": round(batch_size / statistics.median(t["wall"]), 1),
            "samples_per_s_cpu": round(batch_size / statistics.median(t["cpu"]), 1),
        }
    for name in SMALL_CONFIGS:
        if f"{name}_padded_edges" in times:
            pairs = zip(times[f"{name}_padded_edges"]["wall"], times[name]["wall"], strict=True)
            result[name]["compact_speedup"] = round(statistics.median(a / b for a, b in pairs), 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the batch-1024 measurements")
    parser.add_argument("--small", action="store_true", help="quickstart-sized models, BC step, real env obs")
    parser.add_argument("--batch", type=int, default=256, help="batch size of --small")
    parser.add_argument("--forward-only", action="store_true", help="only the batch-1 forwards")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.small:
        result_small: dict[str, Any] = {
            "benchmark": "encoder_small_bc",
            "threads": args.threads,
            "batch": args.batch,
            **bench_small(args.batch, max(args.repeats, 4)),
        }
        publish("encoder", [result_small], variant="small")
        return
    spec, layout, source = benchmark_specs()
    torch.manual_seed(0)
    sampler = AAACModel(spec, layout, AAACModelConfig(device="cpu"))
    batch = make_batch(spec, layout, sampler, 8 if args.forward_only else 1024)
    result: dict[str, Any] = {
        "benchmark": "encoder",
        "spec": source,
        "threads": args.threads,
        "batch": 8 if args.forward_only else 1024,
    }
    encoders: tuple[Literal["gnn", "flat"], ...] = ("gnn", "flat")
    for encoder in encoders:
        result[encoder] = bench_encoder(encoder, batch, spec, layout, args.repeats, args.forward_only)
    publish("encoder", [result], variant="forward" if args.forward_only else None)


if __name__ == "__main__":
    main()
