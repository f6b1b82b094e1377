"""Throughput of sampling with layered rewards: zero-latency scorers vs blocking in env.step vs the async pool.

For each judge latency, one EnvRunner samples a fixed number of env steps three ways, with the same (seeded,
randomly initialised) policy:

1. ``zero``: every layer scored inside ``env.step`` at episode end, with the judge rubric run in-process (no HTTP,
   no delay): what the rewards cost when scorers are free.
2. ``blocking``: every layer scored inside ``env.step``, the judge over HTTP with the configured latency (the
   pre-Ray baseline: "rewards had to finish inside env.step"). Measured as a rate over a shorter, time-capped run.
3. ``async``: the RewardAwareEnvRunner with the RewardActorPool (judge in async actors, the model layer in a CPU
   actor, ledger actor). Time includes the final drain, so every scored step is counted only once it is settled.

Prints one JSON line per latency. ``lost``/``double_counted``/``missing`` come from the ledger audit of the async
run. Run from the repository root::

    python benchmarks/reward_pool.py                    # e-commerce env, latencies 50 and 800 ms
    python benchmarks/reward_pool.py --env test --steps 5000 --policy module
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


def env_factory(name: str) -> tuple[Any, dict[str, Any], str]:
    """The env class, its config and a note; falls back to the test env when the e-commerce env is absent."""
    if name == "ecommerce":
        try:
            from agentic_ray.envs.agent_task_env import AgentTaskEnv

            return AgentTaskEnv, {"domain": "ecommerce"}, "ecommerce (AgentTaskEnv)"
        except ImportError as e:
            print(f"note: e-commerce env not available ({e}); falling back to the test env", file=sys.stderr)
    from tests.helpers.record_env import RecordEmittingEnv

    return RecordEmittingEnv, {"episode_len": 7}, "test (RecordEmittingEnv, 7-step episodes)"


def make_runner(
    env_cls: Any, env_cfg: dict[str, Any], pool_cfg: Any, pool: Any, args: argparse.Namespace
) -> Any:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module import FlattenObservations

    from agentic_ray.rollout.reward_aware_env_runner import RewardAwareEnvRunner
    from agentic_ray.rollout.reward_pool_wiring import wire_reward_pool

    config = (
        PPOConfig()
        .environment(env_cls, env_config=env_cfg)
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=args.num_envs,
            env_to_module_connector=lambda env, spaces=None, device=None: FlattenObservations(),
        )
        .debugging(seed=args.seed)
    )
    wire_reward_pool(config, pool_cfg, pool)
    return RewardAwareEnvRunner(config=config)


def run_mode(
    mode: str,
    latency_ms: float,
    steps: int,
    max_s: float,
    env_cls: Any,
    env_cfg: dict,
    args: argparse.Namespace,
) -> dict[str, Any]:
    from agentic_ray.rewards.reward_actor_pool import RewardActorPool
    from agentic_ray.rewards.reward_pool_config import JudgeConfig, RewardPoolConfig

    pool_cfg = RewardPoolConfig(
        mode=mode,
        judge=JudgeConfig(latency_ms=latency_ms, server_mode="subprocess", batch_size=args.judge_batch),
        submit_interval_s=args.submit_interval_s,
        max_pending_episodes=args.max_pending,
    )
    pool = RewardActorPool.create(pool_cfg, name_prefix=f"bench-{mode}")
    runner = make_runner(env_cls, env_cfg, pool_cfg, pool, args)
    try:
        runner.sample(random_actions=args.random_actions)  # warm-up: env reset, module, first calls
        runner.drain()
        t0 = time.perf_counter()
        done = 0
        while done < steps and time.perf_counter() - t0 < max_s:
            done += sum(len(ep) for ep in runner.sample(random_actions=args.random_actions))
        done += sum(len(ep) for ep in runner.drain())
        wall = time.perf_counter() - t0
        stats = runner.reward_pool_stats()
        audit = pool.audit()
        return {"steps": done, "wall_s": wall, "steps_per_s": done / wall, "audit": audit, "stats": stats}
    finally:
        runner.stop()
        pool.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", choices=("ecommerce", "test"), default="ecommerce")
    p.add_argument("--steps", type=int, default=8000, help="env steps per zero/async run")
    p.add_argument("--latencies", default="50,800", help="judge latencies in ms, comma-separated")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--blocking-max-s", type=float, default=20.0, help="time cap of the blocking run")
    p.add_argument("--judge-batch", type=int, default=16, help="episodes per judge HTTP request")
    p.add_argument("--submit-interval-s", type=float, default=0.05)
    p.add_argument("--max-pending", type=int, default=1000)
    p.add_argument(
        "--policy",
        choices=("random", "module"),
        default="random",
        help="'random': uniform random actions (fast env, the harshest test of reward overhead); "
        "'module': the seeded, randomly initialised default PPO RLModule",
    )
    p.add_argument(
        "--repeats", type=int, default=2, help="alternating zero/async runs; the best of each counts"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    args.random_actions = args.policy == "random"

    import ray

    env_cls, env_cfg, env_note = env_factory(args.env)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="agray_bench_", dir="/tmp"),
        configure_logging=False,
        log_to_driver=False,
    )
    try:
        for lat in (float(x) for x in args.latencies.split(",")):
            # The box is shared: zero and async alternate, and each keeps its best run. The audit figures
            # (lost, double_counted, missing) are summed over all async runs.
            zeros, asyncs = [], []
            for _ in range(args.repeats):
                zeros.append(run_mode("zero_latency", lat, args.steps, 600.0, env_cls, env_cfg, args))
                asyncs.append(run_mode("async", lat, args.steps, 600.0, env_cls, env_cfg, args))
            blocking = run_mode("blocking", lat, args.steps, args.blocking_max_s, env_cls, env_cfg, args)
            zero = max(zeros, key=lambda r: r["steps_per_s"])
            asyn = max(asyncs, key=lambda r: r["steps_per_s"])
            audits = [r["audit"] for r in asyncs]
            line = {
                "judge_latency_ms": lat,
                "env": env_note,
                "policy": args.policy,
                "steps_zero": zero["steps"],
                "steps_blocking": blocking["steps"],
                "steps_async": asyn["steps"],
                "steps_per_s_zero": round(zero["steps_per_s"], 1),
                "steps_per_s_blocking": round(blocking["steps_per_s"], 1),
                "steps_per_s_async": round(asyn["steps_per_s"], 1),
                "async_over_zero": round(asyn["steps_per_s"] / zero["steps_per_s"], 3),
                "async_over_blocking": round(asyn["steps_per_s"] / blocking["steps_per_s"], 2),
                "lost": sum(x.pending for x in audits),
                "double_counted": sum(x.double_counted for x in audits),
                "missing": sum(x.missing_layers for x in audits),
                "dropped": sum(x.dropped for x in audits),
                "incomplete": sum(x.incomplete for x in audits),
                "consumed": sum(x.consumed for x in audits),
                "repeats": args.repeats,
                "all_steps_per_s_zero": [round(r["steps_per_s"], 1) for r in zeros],
                "all_steps_per_s_async": [round(r["steps_per_s"], 1) for r in asyncs],
                "backpressure_wait_s": round(asyn["stats"].get("wait_s", 0.0), 3),
            }
            if args.verbose:
                line["async_counters"] = asyn["stats"].get("counters", {})
            print(json.dumps(line), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
