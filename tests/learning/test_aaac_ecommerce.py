"""Learning test: AAAC from scratch on the e-commerce env beats the random masked policy by a wide margin.

Setup (chosen so that it runs in a few minutes on 2 shared CPUs, ``num_env_runners=0``, sampling and learning in
the test process):

* env: ``action_mode="prototype"`` (one Discrete over the 22 mined prototypes instead of the structured
  skill+pointer+enum+numeric Dict): one categorical head instead of four, which is what makes learning from scratch
  feasible at this budget; moderate fault injection (30% of training episodes faulty at the start, decaying to
  10% at the end of the budget via ``set_training_progress``); validation episodes 20% faulty;
* env reward (``AgentTaskEnvConfig.rewards``): ``success=0``, ``completion=+4``, ``failure=-2``, error penalties as
  shipped. With the shipped ``success=+1`` per successful call (and only ``+1`` on completion), repeating a safe
  call until the step budget runs out (≈ 2× the optimal length) earns more than completing the task, and both
  AAAC and PPO converge to that loop (0% completion); see ``benchmarks/aaac_vs_ppo.py``;
* model: flat-MLP encoder (trunk 2×128, hidden 64): the GNN trains ~15× slower on CPU;
* AAAC defaults (two critics, w_reward 0.7 with the callbacks' risk stream, adaptive λ, β_0 0.1) with lr 1e-3,
  batch 512, minibatch 128, 4 epochs, entropy 0.01; no imitation;
* budget: ``ENV_STEPS`` env steps, then one greedy evaluation on the fixed validation tasks (5 per family × 8).

Threshold: completion ≥ random + ``MARGIN`` (30 points); the random masked policy completes 0% of these tasks.
Cost: ~20k env steps ≈ 1–2 min of training when the box is idle (~350 env steps/s), 8 min under heavy load.

Status (2026-11-30): **fails at this budget** — measured 12.5% (5 of 40 tasks) vs random 0.0% after
20,299 env steps (484 s under load). PPO with the same everything also plateaus at 12.5% through 24k steps;
AAAC's policy entropy collapses much earlier than PPO's, and a per-subgoal progress bonus did not help within
15k steps (see ``benchmarks/results/aaac_vs_ppo.md``). The margin is kept at the issue's +30 points on purpose:
lower it only with the lead's agreement, not to make the test green.
"""

from __future__ import annotations

import json
import time

import pytest
import torch
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

from agentic_ray.algorithms.build import build_algo_config, current_module
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.eval.evaluator import ModulePolicy, RandomPolicy, evaluate_policy
from agentic_ray.rollout.episode_callbacks import set_training_progress
from agentic_ray.settings import ExperimentSettings

ENV_STEPS = 20_000
MARGIN = 0.30
TASKS_PER_FAMILY = 5
SEED = 0
REWARDS = {"success": 0.0, "completion": 4.0, "failure": -2.0}


def _settings() -> ExperimentSettings:
    return ExperimentSettings.model_validate(
        {
            "seed": SEED,
            "ray": {"num_env_runners": 0, "num_envs_per_env_runner": 8},
            "env": {
                "action_mode": "prototype",
                "rewards": REWARDS,
                "faults": {"enabled": True, "start_share": 0.3, "end_share": 0.1},
            },
            "model": {
                "encoder": "flat",
                "hidden_dim": 64,
                "num_heads": 4,
                "flat_hidden_dim": 128,
                "flat_layers": 2,
                "device": "cpu",
            },
            "algo": {
                "name": "aaac",
                "lr": 1e-3,
                "train_batch_size": 512,
                "minibatch_size": 128,
                "num_epochs": 4,
                "entropy_coeff": 0.01,
            },
        }
    )


@pytest.mark.learning
@pytest.mark.slow  # known to fail at this budget (see the module docstring); run with `pytest -m slow`
def test_aaac_ecommerce_beats_random(ray_session) -> None:
    torch.manual_seed(SEED)
    settings = _settings()
    eval_cfg = AgentTaskEnvConfig(
        action_mode="prototype",
        rewards=REWARDS,
        faults={"enabled": True, "start_share": 0.2, "end_share": 0.2},
    )
    random_completion = evaluate_policy(RandomPolicy(SEED), eval_cfg, TASKS_PER_FAMILY).metrics.completion

    algo = build_algo_config(settings).build_algo()
    start, steps, iterations = time.time(), 0, 0
    try:
        while steps < ENV_STEPS:
            set_training_progress(algo, steps / ENV_STEPS)
            result = algo.train()
            steps = int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])
            iterations += 1
        metrics = evaluate_policy(ModulePolicy(current_module(algo)), eval_cfg, TASKS_PER_FAMILY).metrics
    finally:
        algo.stop()
    summary = {
        "env_steps": steps,
        "iterations": iterations,
        "seconds": round(time.time() - start, 1),
        "completion": metrics.completion,
        "random_completion": random_completion,
        "mean_steps": metrics.spt,
        "high_risk_share": metrics.high_risk_share,
    }
    print("AAAC e-commerce:", json.dumps(summary))
    assert metrics.completion >= random_completion + MARGIN, (
        f"AAAC validation completion {metrics.completion:.3f} after {steps} env steps; random masked policy "
        f"{random_completion:.3f}; needed >= random + {MARGIN:.2f}. {json.dumps(summary)}"
    )
