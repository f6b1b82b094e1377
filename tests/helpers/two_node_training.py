"""Driver for the two-node scenarios: RewardPoolPPO with 2 EnvRunners and SPREAD reward actors on a ``ray start``
cluster, optionally losing a node mid-run. Run as a separate process (a process joins one Ray cluster only)::

    python -m tests.helpers.two_node_training --address 127.0.0.1:PORT --out result.json \\
        [--kill-signal FILE --kill-after 3] [--iterations 8]

With ``--kill-signal``, after ``--kill-after`` iterations it writes FILE and goes on training; the caller stops the
worker node as soon as FILE appears, i.e. during the next iteration. At the end it drains the runners (one more
learner update) and writes the audit, where each EnvRunner and reward actor ran, and the sampling throughput.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from agentic_ray.rewards.reward_pool_config import ActorGroupConfig
from agentic_ray.rollout.reward_pool_wiring import RewardPoolPPO, wire_reward_pool
from tests.helpers.chaos_scenarios import pool_config, small_ppo


def placements(algo: Any) -> dict[str, list[str]]:
    """Node id of every remote EnvRunner and every reward actor."""
    import ray

    pool = algo.reward_pool
    runners = algo.env_runner_group.foreach_env_runner(
        lambda er: ray.get_runtime_context().get_node_id(), local_env_runner=False
    )
    actors = [*pool.actors("io"), *pool.actors("cpu")]
    return {
        "env_runners": sorted(runners),
        "reward_actors": sorted(ray.get([a.node_id.remote() for a in actors])),
        "ledger": [ray.get(pool.ledger.node_id.remote())],
        "driver": [ray.get_runtime_context().get_node_id()],
    }


def train_and_measure(
    iterations: int = 8, kill_after: int = 3, kill_signal: str | None = None, max_s: float = 400.0
) -> dict[str, Any]:
    """Train on the Ray cluster this process is connected to; see the module docstring. Returns the report."""
    import ray

    config = small_ppo(num_env_runners=2, num_envs=2, batch=84, step_delay_s=0.005)
    config.env_runners(num_cpus_per_env_runner=1)  # one per 1-CPU node
    spread = ActorGroupConfig(num_actors=2, scheduling_strategy="SPREAD")
    pool_cfg = pool_config(io_group=spread.model_copy(update={"max_concurrency": 1000}), cpu_group=spread)
    algo = RewardPoolPPO(config=wire_reward_pool(config, pool_cfg))
    out: dict[str, Any] = {"iterations": []}
    t0 = time.perf_counter()
    try:
        out["placement"] = placements(algo)
        out["nodes"] = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        for it in range(iterations):
            if kill_signal and it == kill_after:
                Path(kill_signal).write_text(str(time.time()))
            t = time.perf_counter()
            res = algo.train()
            steps = float(res.get("env_runners", {}).get("num_env_steps_sampled", 0) or 0)
            out["iterations"].append(
                {
                    "i": it,
                    "s": time.perf_counter() - t,
                    "env_steps": 0 if math.isnan(steps) else int(steps),
                    "healthy_runners": algo.env_runner_group.num_healthy_remote_workers(),
                }
            )
            if time.perf_counter() - t0 > max_s:
                break
        algo.save_to_path()  # drains what the surviving runners hold into one more update
        out["audit"] = algo.reward_audit().to_dict()
        out["alive_nodes_at_end"] = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        out["ok"] = True
    except Exception as e:  # reported, not raised: the caller asserts on the result
        out["ok"] = False
        out["error"] = repr(e)
    finally:
        out["wall_s"] = time.perf_counter() - t0
        algo.stop()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--address", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--kill-after", type=int, default=3)
    p.add_argument("--kill-signal", default=None)
    p.add_argument("--max-s", type=float, default=400.0)
    a = p.parse_args()

    import ray

    ray.init(address=a.address, log_to_driver=False)
    try:
        out = train_and_measure(a.iterations, a.kill_after, a.kill_signal, a.max_s)
        Path(a.out).write_text(json.dumps(out, default=str))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
