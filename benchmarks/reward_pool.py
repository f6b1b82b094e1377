"""Throughput of sampling with layered rewards: zero-latency scorers, a blocking baseline, and the async pool.

For each judge latency, one EnvRunner samples the same env with the same (random or seeded) policy in four modes,
in rounds that alternate the modes (zero, async, zero_b, blocking), at least 5 rounds:

1. ``zero`` / ``zero_b``: every layer scored inside ``env.step`` at episode end with the judge rubric run in-process
   (no HTTP, no delay): what the rewards cost when scorers are free. The two zero streams are the same mode measured
   twice, so ``zero_over_zero`` (median of zero_b / median of zero) is the noise floor of the protocol on this box.
2. ``async``: the RewardAwareEnvRunner with the RewardActorPool (judge in async actors, the model layer in a CPU
   actor, ledger actor). Time includes the final drain, so every step is counted only once it is settled.
3. ``blocking``: the same actors, the same batching (one call per group and sample, 16 episodes per judge request,
   all in flight at once), but every ``sample()`` waits until its episodes are scored: the fair baseline for
   "sampling never waits on slow scorers". Time-capped (``--blocking-max-s``), measured as a rate.

Prints one JSON line per latency with the medians, every run, the noise floor and the ratios, and the ledger audit
of the async runs (summed).

``--steps`` defaults to 12,000 env steps per run (the length of a 24-iteration RL stage): the async run's time
includes the final drain, which waits about one judge latency for the last scores once per run (its median is
printed as ``async_drain_s_median``): a fixed wait per run, which weighs four times as much on a 3,000-step run.

Training also checkpoints: the pipeline saves a rolling checkpoint after every iteration. A checkpoint that first
drains the pool (``save_to_path(settle=True)``) waits for the judge at every iteration; the rolling one does not
(``settle=False``). The ``checkpoint`` object of each line measures that on the quickstart's algorithm (AAAC on the
e-commerce env, its reward pool with the judge layer on at that latency; ``--checkpoint-iterations`` iterations of
``train()`` then ``save_to_path`` per mode and round, two rounds, modes alternating):
the median seconds per iteration and per save in each mode, and ``settle_over_rolling``, the iteration time with
settling saves over the time with rolling ones. Run from the repository root::

    python benchmarks/reward_pool.py                        # e-commerce env, latencies 0, 50 and 800 ms
    python benchmarks/reward_pool.py --env test --rounds 7 --latencies 800
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

MODES = ("zero", "async", "zero_b", "blocking")
POOL_MODE = {"zero": "zero_latency", "zero_b": "zero_latency", "async": "async", "blocking": "blocking"}


def env_factory(name: str) -> tuple[Any, dict[str, Any], str]:
    """The env class, its config and a note."""
    if name == "ecommerce":
        from agentic_ray.envs.agent_task_env import AgentTaskEnv

        return AgentTaskEnv, {"domain": "ecommerce"}, "ecommerce (AgentTaskEnv)"
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
    mode: str, latency_ms: float, steps: int, max_s: float, env: tuple[Any, dict], args: argparse.Namespace
) -> dict[str, Any]:
    from agentic_ray.rewards.reward_actor_pool import RewardActorPool
    from agentic_ray.rewards.reward_pool_config import JudgeConfig, RewardPoolConfig

    pool_cfg = RewardPoolConfig(
        mode=POOL_MODE[mode],
        judge=JudgeConfig(latency_ms=latency_ms, server_mode="subprocess", batch_size=args.judge_batch),
        submit_interval_s=args.submit_interval_s,
        max_pending_episodes=args.max_pending,
    )
    pool = RewardActorPool.create(pool_cfg, name_prefix=f"bench-{mode}")
    runner = make_runner(env[0], env[1], pool_cfg, pool, args)
    try:
        runner.sample(random_actions=args.random_actions)  # warm-up: env reset, module, first calls
        runner.drain()
        t0 = time.perf_counter()
        done = 0
        while done < steps and time.perf_counter() - t0 < max_s:
            done += sum(len(ep) for ep in runner.sample(random_actions=args.random_actions))
        t_drain = time.perf_counter()
        done += sum(len(ep) for ep in runner.drain())
        wall = time.perf_counter() - t0
        return {
            "steps": done,
            "steps_per_s": done / wall,
            "drain_s": time.perf_counter() - t_drain,
            "audit": pool.audit() if mode == "async" else None,
            "wait_s": runner.reward_pool_stats().get("wait_s", 0.0),
        }
    finally:
        runner.stop()
        pool.shutdown()


def checkpoint_cost(latency_ms: float, args: argparse.Namespace) -> dict[str, Any]:
    """Median seconds per ``train()`` + ``save_to_path`` iteration of the quickstart's algorithm (AAAC, GNN, the
    reward pool with the judge layer on at ``latency_ms``), with settling and with rolling saves."""
    import torch

    from agentic_ray.algorithms.build import build_algo_config
    from agentic_ray.settings import load_settings

    settings = load_settings(
        ROOT / "configs" / "quickstart.yaml",
        {
            "seed": args.seed,
            "wandb.mode": "disabled",
            "rewards.layers.judge.enabled": True,
            "rewards.judge.latency_ms": latency_ms,
            "rewards.judge.server_mode": "subprocess",
            "rewards.judge.batch_size": args.judge_batch,
        },
    )
    torch.set_num_threads(settings.ray.torch_threads)
    times: dict[str, list[float]] = {"settle": [], "rolling": []}
    saves: dict[str, list[float]] = {"settle": [], "rolling": []}
    for _ in range(2):  # two alternating rounds per mode
        for mode in ("settle", "rolling"):
            algo = build_algo_config(settings).build_algo()
            where = tempfile.mkdtemp(prefix="agray_bench_ckpt_")
            try:
                algo.train()  # warm-up
                for _ in range(args.checkpoint_iterations):
                    t0 = time.perf_counter()
                    algo.train()
                    t1 = time.perf_counter()
                    algo.save_to_path(where, settle=mode == "settle")
                    t2 = time.perf_counter()
                    times[mode].append(t2 - t0)
                    saves[mode].append(t2 - t1)
            finally:
                algo.stop()
    med = {m: statistics.median(v) for m, v in times.items()}
    return {
        "algorithm": "quickstart (AAAC, reward pool with the judge layer)",
        "iterations_per_mode": len(times["settle"]),
        "iteration_s_median": {m: round(v, 3) for m, v in med.items()},
        "save_s_median": {m: round(statistics.median(v), 3) for m, v in saves.items()},
        "settle_over_rolling": round(med["settle"] / med["rolling"], 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", choices=("ecommerce", "test"), default="ecommerce")
    p.add_argument("--steps", type=int, default=12000, help="env steps per zero/async run")
    p.add_argument("--latencies", default="0,50,800", help="judge latencies in ms, comma-separated")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds; every mode runs once per round")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--blocking-max-s", type=float, default=10.0, help="time cap of each blocking run")
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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--checkpoint-iterations",
        type=int,
        default=4,
        help="iterations per mode and round of the rolling-checkpoint measurement (0: skip it)",
    )
    args = p.parse_args()
    if args.rounds < 5:
        p.error("--rounds must be at least 5 (medians of fewer runs on a shared box are noise)")
    args.random_actions = args.policy == "random"

    import ray

    env = env_factory(args.env)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="agray_bench_", dir="/tmp"),
        configure_logging=False,
        log_to_driver=False,
    )
    try:
        lines: list[dict[str, Any]] = []
        for lat in (float(x) for x in args.latencies.split(",")):
            runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
            for _ in range(args.rounds):
                for mode in MODES:
                    cap = args.blocking_max_s if mode == "blocking" else 600.0
                    runs[mode].append(run_mode(mode, lat, args.steps, cap, env, args))
            med = {m: statistics.median(r["steps_per_s"] for r in runs[m]) for m in MODES}
            audits = [r["audit"] for r in runs["async"]]
            line = {
                "judge_latency_ms": lat,
                "env": env[2],
                "policy": args.policy,
                "rounds": args.rounds,
                "median_steps_per_s": {m: round(v, 1) for m, v in med.items()},
                "zero_over_zero": round(med["zero_b"] / med["zero"], 3),
                "async_over_zero": round(med["async"] / med["zero"], 3),
                "async_over_blocking": round(med["async"] / med["blocking"], 2),
                "all_steps_per_s": {m: [round(r["steps_per_s"], 1) for r in runs[m]] for m in MODES},
                "blocking_wait_s_median": round(statistics.median(r["wait_s"] for r in runs["blocking"]), 2),
                "async_backpressure_wait_s_median": round(
                    statistics.median(r["wait_s"] for r in runs["async"]), 3
                ),
                # The final drain waits for the last episodes' scores (about one judge latency): a fixed cost per
                # run, not per step, included in the async time.
                "async_drain_s_median": round(statistics.median(r["drain_s"] for r in runs["async"]), 2),
                "async_run_s_median": round(
                    statistics.median(r["steps"] / r["steps_per_s"] for r in runs["async"]), 2
                ),
                # The async runs have no learner: sealed episodes are not trained, so "lost" is not meaningful here.
                "async_audit": {
                    "sealed": sum(a.sealed for a in audits),
                    "dropped": sum(a.dropped for a in audits),
                    "pending": sum(a.pending for a in audits),
                    "imputed": sum(a.imputed for a in audits),
                    "double_counted": sum(a.double_counted for a in audits),
                },
            }
            if args.checkpoint_iterations > 0:
                line["checkpoint"] = checkpoint_cost(lat, args)
            lines.append(line)
        publish("reward_pool", lines)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
