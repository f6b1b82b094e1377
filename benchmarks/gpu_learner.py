"""GPU vs CPU learner throughput of the AAAC network (plain torch + torch-geometric; no Ray import at all).

Times one actor-critic train step (forward, policy-gradient + entropy + two critic losses + reflection loss,
backward, Adam step) at batch 4096 on cuda and on the CPU with 2 threads, in the same run, and prints one JSON
line with ``gpu_speedup`` = samples/s on cuda ÷ samples/s on CPU. Data stays on the device; the loop has no
host syncs (checked with ``torch.cuda.set_sync_debug_mode``). With ``--compile`` a second line reports the
``torch.compile``d model on cuda.

Run from the repository root: ``python benchmarks/gpu_learner.py [--batch 4096] [--device-only cpu]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentic_ray.graph_spec import ROOT_CAUSES, ActionLayout, GraphSpec, random_observation
from agentic_ray.models.obs_batching import stack_observations
from agentic_ray.models.skill_argument_functional import (
    PackedActionLayout,
    skill_argument_entropy,
    skill_argument_logp,
    skill_argument_sample,
)
from benchmarks.specs import benchmark_specs


def build_model(spec: GraphSpec, layout: ActionLayout) -> tuple[Any, str]:
    """The default-size ``AAACModel``; where pydantic is missing, the same modules composed by hand."""
    try:
        from agentic_ray.models.aaac_model import AAACModel, AAACModelConfig

        return AAACModel(spec, layout, AAACModelConfig(device="cpu")), "AAACModel"
    except ImportError:
        from agentic_ray.models.hetero_gnn_encoder import HeteroGNNEncoder
        from agentic_ray.models.skill_argument_heads import SkillArgumentHeads, mlp

        class ComposedActorCritic(nn.Module):
            """AAACModel's default modules (hidden 96, 3 layers, 4 heads, ffn 1) without its pydantic config."""

            def __init__(self) -> None:
                super().__init__()
                h = 96
                self.encoder = HeteroGNNEncoder(spec, hidden_dim=h, num_layers=3, num_heads=4, ffn_mult=1)
                self.policy_heads = SkillArgumentHeads(layout, spec.max_nodes, h, h, h)
                self.reward_critic, self.risk_critic = mlp(h, h, 1), mlp(h, h, 1)
                self.reflection_head = mlp(h, h, len(ROOT_CAUSES))

            def encode(self, obs: dict[str, torch.Tensor]) -> Any:
                return self.encoder(obs)

            def policy_logits(self, obs: dict[str, torch.Tensor], enc: Any) -> Any:
                return self.policy_heads(obs, enc)

            def reward_values(self, obs: dict[str, torch.Tensor], enc: Any) -> torch.Tensor:
                return self.reward_critic(enc.state).squeeze(-1)

            def risk_values(self, obs: dict[str, torch.Tensor], enc: Any) -> torch.Tensor:
                return self.risk_critic(enc.state).squeeze(-1)

            def reflection_logits(self, obs: dict[str, torch.Tensor], enc: Any) -> torch.Tensor:
                return self.reflection_head(enc.state)

        return ComposedActorCritic(), "composed (no pydantic)"


def make_batch(
    spec: GraphSpec, layout: ActionLayout, model: Any, batch_size: int, seed: int = 0
) -> dict[str, Any]:
    """Random observations, actions sampled from the model, and random advantages/returns/labels (CPU)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(batch_size):
        o = random_observation(spec, layout, rng)
        o["reflection"] = np.eye(len(ROOT_CAUSES), dtype=np.float32)[rng.integers(len(ROOT_CAUSES))]
        rows.append(o)
    obs = stack_observations(rows)
    packed = PackedActionLayout.from_action_layout(layout)
    with torch.no_grad():
        chunks = []
        for i in range(0, batch_size, 1024):
            part = {k: v[i : i + 1024] for k, v in obs.items()}
            chunks.append(
                skill_argument_sample(
                    packed.split(model.policy_logits(part, model.encode(part))["packed"]), packed
                )
            )
        actions = {k: torch.cat([c[k] for c in chunks]) for k in chunks[0]}
    gen = torch.Generator().manual_seed(seed)
    return {
        "obs": obs,
        "actions": actions,
        "advantages": torch.randn(batch_size, generator=gen),
        "reward_returns": torch.randn(batch_size, generator=gen),
        "risk_returns": torch.randn(batch_size, generator=gen),
        "root_cause": torch.randint(0, len(ROOT_CAUSES), (batch_size,), generator=gen),
    }


def to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch.to(device)


def actor_critic_loss(model: Any, packed: PackedActionLayout, batch: dict[str, Any]) -> torch.Tensor:
    """Policy gradient + entropy bonus + reward/risk critic MSE + reflection cross-entropy (a scalar)."""
    obs = batch["obs"]
    enc = model.encode(obs)
    parts = packed.split(model.policy_logits(obs, enc)["packed"])
    logp = skill_argument_logp(parts, packed, batch["actions"])
    entropy = skill_argument_entropy(parts, packed)
    pg_loss = -(logp * batch["advantages"]).mean() - 0.01 * entropy.mean()
    v_loss = F.mse_loss(model.reward_values(obs, enc), batch["reward_returns"])
    risk_loss = F.mse_loss(model.risk_values(obs, enc), batch["risk_returns"])
    reflect_loss = F.cross_entropy(model.reflection_logits(obs, enc), batch["root_cause"])
    return pg_loss + 0.5 * v_loss + 0.5 * risk_loss + reflect_loss


def time_train_steps(
    model: Any,
    packed: PackedActionLayout,
    batch: dict[str, Any],
    device: torch.device,
    iters: int,
    warmup: int,
) -> dict[str, float]:
    """Median-free throughput: ``iters`` steps between two syncs, after ``warmup`` steps."""
    model = model.to(device).train()
    batch = to_device(batch, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = actor_critic_loss(model, packed, batch)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    syncs = 0
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step()
        torch.cuda.set_sync_debug_mode("default")
        syncs = sum("synchroniz" in str(w.message) for w in caught)
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        loss = step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    n = batch["advantages"].shape[0]
    out = {
        "step_ms": 1e3 * elapsed / iters,
        "samples_per_s": n * iters / elapsed,
        "loss_finite": bool(torch.isfinite(loss).item()),
    }
    if device.type == "cuda":
        out["host_syncs_per_step"] = syncs
        out["peak_mem_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--gpu-iters", type=int, default=20)
    parser.add_argument("--cpu-iters", type=int, default=2)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument("--device-only", choices=["cpu", "cuda"], default=None, help="time one device only")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile on cuda")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    spec, layout, source = benchmark_specs()
    packed = PackedActionLayout.from_action_layout(layout)
    model, kind = build_model(spec, layout)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    t0 = time.perf_counter()
    batch = make_batch(spec, layout, model, args.batch)
    result: dict[str, Any] = {
        "benchmark": "gpu_learner",
        "spec": source,
        "model": kind,
        "params": sum(p.numel() for p in model.parameters()),
        "batch": args.batch,
        "dtype": "float32 (tf32 off)",
        "data_build_s": round(time.perf_counter() - t0, 2),
        "torch": torch.__version__,
    }
    has_cuda = torch.cuda.is_available()
    if has_cuda:
        result["gpu_name"] = torch.cuda.get_device_name(0)
    if args.device_only != "cpu" and has_cuda:
        model.load_state_dict(state)
        result["cuda"] = time_train_steps(
            model, packed, batch, torch.device("cuda"), args.gpu_iters, warmup=3
        )
    if args.device_only != "cuda":
        torch.set_num_threads(args.cpu_threads)
        model.load_state_dict(state)
        result["cpu_threads"] = args.cpu_threads
        result["cpu"] = time_train_steps(model, packed, batch, torch.device("cpu"), args.cpu_iters, warmup=1)
    if "cuda" in result and "cpu" in result:
        result["gpu_speedup"] = round(result["cuda"]["samples_per_s"] / result["cpu"]["samples_per_s"], 1)
    print(json.dumps(result), flush=True)

    if args.compile and has_cuda:
        try:
            model.load_state_dict(state)
            model.to("cuda")
            t0 = time.perf_counter()
            compiled = torch.compile(model.encoder, dynamic=False)
            model.encoder = compiled
            res = time_train_steps(model, packed, batch, torch.device("cuda"), args.gpu_iters, warmup=3)
            res["compile_and_warmup_s"] = round(
                time.perf_counter() - t0 - res["step_ms"] * args.gpu_iters / 1e3, 1
            )
            out = {"benchmark": "gpu_learner_compiled_encoder", "cuda": res}
            if "cpu" in result:
                out["gpu_speedup"] = round(res["samples_per_s"] / result["cpu"]["samples_per_s"], 1)
            print(json.dumps(out), flush=True)
        except Exception as exc:  # compile is optional; report why it failed
            print(
                json.dumps({"benchmark": "gpu_learner_compiled_encoder", "error": repr(exc)[:500]}),
                flush=True,
            )


if __name__ == "__main__":
    main()
