"""Bounded chaos scenarios on the training plane, shared by the chaos tests and ``benchmarks/chaos.py``.

Each scenario builds a small RewardPoolPPO on :class:`RecordEmittingEnv`, injects one kind of fault while it
trains, stops by itself (iteration and time caps), drains the runners, and returns the ledger audit plus what it
measured. The callers assert (tests) or print (benchmark).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ray.rllib.algorithms.ppo import PPOConfig

from agentic_ray.rewards.ledger_audit import LedgerAudit
from agentic_ray.rewards.reward_ledger import RewardLedger
from agentic_ray.rewards.reward_pool_config import JudgeConfig, RewardPoolConfig
from agentic_ray.rollout.reward_pool_wiring import RewardPoolPPO, wire_reward_pool
from tests.helpers.record_env import RecordEmittingEnv


@dataclass
class ChaosResult:
    """What one scenario saw."""

    audit: LedgerAudit
    iterations: int
    wall_s: float
    events: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def small_ppo(
    num_env_runners: int = 0,
    num_envs: int = 4,
    batch: int = 112,
    step_delay_s: float = 0.0,
    seed: int = 0,
) -> PPOConfig:
    """PPO on 7-step RecordEmittingEnv episodes with tiny batches; EnvRunners restart when they die."""
    cfg = (
        PPOConfig()
        .environment(RecordEmittingEnv, env_config={"episode_len": 7, "step_delay_s": step_delay_s})
        .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=num_envs, sample_timeout_s=60.0)
        .training(train_batch_size_per_learner=batch, minibatch_size=56, num_epochs=1)
        .fault_tolerance(restart_failed_env_runners=True, env_runner_health_probe_timeout_s=10)
        .debugging(seed=seed)
    )
    if num_env_runners:
        cfg.env_runners(num_cpus_per_env_runner=0.5)
    return cfg


def pool_config(latency_ms: float = 300.0, **kw: Any) -> RewardPoolConfig:
    """Every layer on, the judge in async actors behind a rubric server with ``latency_ms``."""
    return RewardPoolConfig(judge=JudgeConfig(latency_ms=latency_ms, server_mode="thread"), **kw)


def kill_reward_actors_while_training(
    min_iterations: int = 4,
    duration_s: float = 20.0,
    max_iterations: int = 40,
    max_s: float = 180.0,
    pause_s: float = 0.5,
) -> ChaosResult:
    """Kill the judge actor, the model-scorer actor and the ledger actor in turn (each comes back before the
    next kill) while PPO trains for at least ``duration_s`` and until each was killed once (``max_s`` caps it);
    then checkpoint-drain and audit.
    """
    import ray

    algo = RewardPoolPPO(config=wire_reward_pool(small_ppo(), pool_config(max_pending_episodes=200)))
    t0 = time.perf_counter()
    kills: list[str] = []
    inflight: list[int] = []
    try:
        pool = algo.reward_pool
        assert pool is not None
        stop = threading.Event()

        def killer() -> None:
            targets = [("io", pool.actors("io")[0]), ("cpu", pool.actors("cpu")[0]), ("ledger", pool.ledger)]
            i = 0
            while not stop.wait(pause_s):
                name, handle = targets[i % len(targets)]
                client = algo.env_runner._reward_client
                inflight.append(len(client._inflight) if client is not None and name != "ledger" else 0)
                ray.kill(handle, no_restart=False)  # Ray restarts it and re-runs its calls in flight
                kills.append(name)
                ray.get(handle.pid.remote(), timeout=120)  # back up before the next kill
                i += 1

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        iters = 0
        while iters < max_iterations and time.perf_counter() - t0 < max_s:
            if iters >= min_iterations and time.perf_counter() - t0 >= duration_s and len(set(kills)) == 3:
                break
            algo.train()
            iters += 1
        stop.set()
        thread.join()
        stats = algo.env_runner.reward_pool_stats()
        algo.save_to_path()  # drains the runner into one more learner update
        return ChaosResult(
            algo.reward_audit(),
            iters,
            time.perf_counter() - t0,
            kills,
            {"inflight_at_kill": inflight, "counters": stats["counters"]},
        )
    finally:
        algo.stop()


def kill_env_runner_while_training(
    max_iterations: int = 20, max_s: float = 150.0, kill_after_iterations: int = 2
) -> ChaosResult:
    """SIGKILL the process of EnvRunner 1 in the middle of an iteration; RLlib restarts it.

    Trains until the learner has trained on an episode of the restarted runner (or the caps hit). Measures
    ``recovery_s``: from the kill to the first trained episode that the restarted runner sampled.
    """
    algo = RewardPoolPPO(
        config=wire_reward_pool(
            small_ppo(num_env_runners=2, num_envs=2, batch=84, step_delay_s=0.01), pool_config()
        )
    )
    t0 = time.perf_counter()
    events: list[str] = []
    try:
        pool = algo.reward_pool
        assert pool is not None
        group = algo.env_runner_group
        [(old_id, pid)] = group.foreach_env_runner(
            lambda er: (er.reward_runner_id, os.getpid()), remote_worker_ids=[1], local_env_runner=False
        )
        for _ in range(kill_after_iterations):
            algo.train()
        kill_t = {"t": 0.0}

        def kill_soon() -> None:
            time.sleep(0.4)  # inside the next iteration's sampling
            kill_t["t"] = time.time()
            os.kill(pid, signal.SIGKILL)
            events.append(f"SIGKILL EnvRunner 1 (pid {pid}, {old_id})")

        threading.Thread(target=kill_soon, daemon=True).start()
        ledger = RewardLedger(pool.spec["ledger_path"])
        iters = kill_after_iterations
        recovered_t: float | None = None
        while iters < max_iterations and time.perf_counter() - t0 < max_s:
            algo.train()
            iters += 1
            rows = ledger.query(
                "SELECT MIN(t.t) FROM trained t JOIN episodes e ON e.episode_id = t.episode_id"
                " WHERE e.runner LIKE 'w1-%' AND e.runner != ?",
                (old_id,),
            )
            if kill_t["t"] and rows[0][0] is not None:
                recovered_t = float(rows[0][0])
                break
        new_ids = group.foreach_env_runner(
            lambda er: er.reward_runner_id, remote_worker_ids=[1], local_env_runner=False
        )
        algo.save_to_path()
        audit = algo.reward_audit()
        return ChaosResult(
            audit,
            iters,
            time.perf_counter() - t0,
            events,
            {
                "old_runner_id": old_id,
                "new_runner_id": new_ids[0] if new_ids else None,
                "recovery_s": None if recovered_t is None else recovered_t - kill_t["t"],
                "restored": algo._counters.get("total_num_restored_workers", 0),
            },
        )
    finally:
        algo.stop()
