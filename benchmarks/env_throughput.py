"""Throughput of AgentTaskEnv on one domain with in-process tools and no injected latency; prints one JSON line.

Fields: ``steps_per_s`` (random masked policy, whole env step incl. the gateway and the observation),
``steps_per_cpu_s`` (the same per CPU second of this process: robust on a shared machine), ``obs_build_p50_ms``
(SLA read + observation build), ``mask_p50_ms`` (hard/soft/business masks), ``expert_success`` and
``expert_mean_steps`` (the domain's scripted expert on the validation split), ``random_success`` (random masked
policy), ``obs_only_rule_success`` (:class:`ObsOnlyRulePolicy`: the ready goal's skill with the first valid
pointer and the first revealed copy; structured mode only). Goals: steps_per_s >= 2000, obs_build_p50_ms < 1,
mask_p50_ms < 0.05, expert_success = 1, and on e-commerce obs_only_rule_success <= 0.5.

    python benchmarks/env_throughput.py [--domain ecommerce] [--steps 20000] [--mode structured|prototype]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import ObsOnlyRulePolicy, RandomMaskedPolicy
from agentic_ray.keys import EPISODE_RECORD


def _episodes(
    env: AgentTaskEnv, act: Callable[[dict[str, np.ndarray]], Any], n: int, seed: int
) -> tuple[float, float]:
    succ, steps = 0, 0
    obs, _ = env.reset(seed=seed)
    for _ in range(n):
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(act(obs))
            steps += 1
            done = term or trunc
        succ += bool(info[EPISODE_RECORD]["completed"])
        obs, _ = env.reset()
    return succ / n, steps / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", default="ecommerce")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--mode", default="structured", choices=["structured", "prototype"])
    ap.add_argument("--val-per-family", type=int, default=25)
    args = ap.parse_args()

    env = AgentTaskEnv(AgentTaskEnvConfig(domain=args.domain, action_mode=args.mode))
    rand = RandomMaskedPolicy(env.layout, seed=0)
    obs, _ = env.reset(seed=0)
    for _ in range(500):  # warm-up
        obs, _, term, trunc, _ = env.step(rand.act(obs))
        if term or trunc:
            obs, _ = env.reset()
    env.record_timings = True
    n, t_env, cpu_env = 0, 0.0, 0.0
    obs, _ = env.reset(seed=1)
    while n < args.steps:
        a = rand.act(obs)  # the policy's time is not the env's
        t0, c0 = time.perf_counter(), time.process_time()
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            obs, _ = env.reset()
        t_env += time.perf_counter() - t0
        cpu_env += time.process_time() - c0
        n += 1
    obs_p50 = float(np.median(env.timings["obs_ms"]))
    mask_p50 = float(np.median(env.timings["mask_ms"]))
    env.close()

    val = AgentTaskEnv(
        AgentTaskEnvConfig(
            domain=args.domain,
            action_mode=args.mode,
            split="validation",
            validation_per_family=args.val_per_family,
        )
    )
    expert = val.domain.expert()
    n_val = args.val_per_family * len(val.families)

    def expert_act(_obs: dict[str, np.ndarray]) -> Any:
        return val.encode_action(*expert.plan(val.view()))

    exp_succ, exp_steps = _episodes(val, expert_act, n_val, seed=0)
    rnd_succ, _ = _episodes(val, RandomMaskedPolicy(val.layout, seed=1).act, n_val, seed=0)
    rule_succ = None
    if args.mode == "structured":
        rule_succ, _ = _episodes(val, ObsOnlyRulePolicy(val.graph_spec, val.layout).act, n_val, seed=0)
    val.close()
    variant = None if args.domain == "ecommerce" else args.domain
    if args.mode != "structured":
        variant = f"{args.domain}-{args.mode}"
    publish(
        "env_throughput",
        [
            {
                "domain": args.domain,
                "mode": args.mode,
                "steps_per_s": round(n / t_env, 1),
                "steps_per_cpu_s": round(n / max(cpu_env, 1e-9), 1),
                "obs_build_p50_ms": round(obs_p50, 4),
                "mask_p50_ms": round(mask_p50, 4),
                "expert_success": exp_succ,
                "random_success": rnd_succ,
                "obs_only_rule_success": rule_succ,
                "expert_mean_steps": round(exp_steps, 3),
                "validation_episodes": n_val,
            }
        ],
        variant=variant,
    )


if __name__ == "__main__":
    main()
