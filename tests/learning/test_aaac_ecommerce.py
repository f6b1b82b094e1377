"""Learning test: AAAC from scratch on the e-commerce env beats the random masked policy by a wide margin, on the
median of three seeds (issue 25: seed 0 alone is one of the 2 seeds of 5 that leave the 0.19 plateau).

**Marked slow, out of CI**: each seed trains 25k env steps (5 min alone on 2 CPUs, 13 min on a shared box), so the
three take 15-40 minutes, over the whole CI budget of 35. Run it with ``pytest -m slow tests/learning``; the
from-scratch comparison with PPO and its intervals are ``benchmarks/aaac_vs_ppo.py``'s. Not yet run at three seeds
since prototype mode stopped filling entity arguments from the ground truth (issue 25): the figures below are
from before, when a prototype carried its entities.

Setup (chosen so that it runs in a few minutes on 2 CPUs, ``num_env_runners=0``, sampling and learning in the
test process):

* env: ``action_mode="prototype"`` (one Discrete over the 22 mined prototypes instead of the structured
  skill+pointer+enum+numeric Dict); the shipped per-step rewards (+1 for a call that advances a goal, 0 for a
  redundant one, errors negative, +2 on completion); moderate fault injection (30% of training episodes faulty
  at the start, decaying to 10% at the end of the budget via ``set_training_progress``); validation episodes
  20% faulty;
* model: the heterogeneous GNN (hidden 32, 2 layers, 2 heads) with tool-node action scoring (the default) and
  separate critic encoders. With a flat-MLP encoder, or with logits from the pooled state only, both AAAC and PPO
  stayed at 12.5-20% after 20k steps: the greedy policy repeated one safe call whatever the goals said;
* AAAC defaults (clipped surrogate 0.2, two critics, w_reward 0.7 with the callbacks' risk stream, adaptive λ,
  β_0 0.1) with lr 1e-3, batch 512, minibatch 128, 4 epochs, entropy 0.01; no imitation;
* budget: ``ENV_STEPS`` env steps, then one greedy evaluation on the fixed validation tasks (10 per family × 8).

Threshold: completion ≥ random + ``MARGIN`` (30 points); the random masked policy completes 0% of these tasks.
Measured (seed 0): 42.5% after 25,108 env steps (754 s while another training job shared the 2 CPUs). With
20k steps and 5 tasks per family the same test gave 47.5% on one build and 20% after two env changes (the
reflection fix and one more goal feature): greedy completion on 40 tasks swings by 10-15 points between evaluations
(seed 0 read 40%, then 27.5% one evaluation later), hence the larger budget and the 80 validation tasks.

**Passes again since whole-episode sampling** (``agentic_ray/rollout/whole_episode_env_runner.py``): CI at commit
8500f26 read 39% after 25,216 env steps (49 iterations, random 0%), and the xfail below was removed. RLlib's
``complete_episodes`` sampling had dropped the running episodes at every ``sample()`` call, about half the steps
and biased to short episodes, i.e. to the early exits described next.

**The misses that had it marked xfail, after the partial-information env (issue 12).** The env hands the
policy nothing: it must look entities up before it acts, over 10 families. Measured (seed 0):

* CI, shipped rewards of that build: 17% after 25,351 env steps (random 0%), bar 30%;
* lookup bonus without give-back: 11-13% from 10k to 25k steps (flat); the greedy policy repeats one redundant
  safe call (net reward 0) until the budget runs out (sms.send 12 times);
* + redundant call net -0.25: 20% at 12k; the loop is gone, but the policy harvests the lookup bonus and ends on
  any terminal action;
* + the bonus as potential-based shaping (given back at the end, the shipped reward now): 20% at 12k; the policy
  learns an early exit (one handoff, failure -0.5) in 8 of 10 families;
* + failure -2.0 (not shipped): 12% at 12k; still an immediate handoff.

From scratch, exploration in this env is dominated by caller errors (-3 each), so ending the episode early beats
exploring within this budget. What the project relies on is imitation then RL (issue 13, "RL beyond imitation";
tests/learning/test_quickstart.py); this test stays to show when from-scratch RL catches up (it then XPASSes).
"""

from __future__ import annotations

import json
import statistics
import time

import pytest
import torch
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

from agentic_ray.algorithms.build import build_algo_config, current_module
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.eval.evaluator import ModulePolicy, RandomPolicy, evaluate_policy
from agentic_ray.rollout.episode_callbacks import set_training_progress
from agentic_ray.settings import ExperimentSettings

ENV_STEPS = 25_000
MARGIN = 0.30
TASKS_PER_FAMILY = 10
SEEDS = (0, 1, 2)


def _settings(seed: int) -> ExperimentSettings:
    return ExperimentSettings.model_validate(
        {
            "seed": seed,
            "ray": {"num_env_runners": 0, "num_envs_per_env_runner": 8},
            "env": {
                "action_mode": "prototype",
                "faults": {"enabled": True, "start_share": 0.3, "end_share": 0.1},
            },
            "model": {
                "encoder": "gnn",
                "hidden_dim": 32,
                "num_layers": 2,
                "num_heads": 2,
                "separate_critic_encoders": True,
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


def _train_and_evaluate(seed: int, eval_cfg: AgentTaskEnvConfig) -> dict[str, float]:
    """One seed from scratch to ``ENV_STEPS`` env steps, then the greedy evaluation."""
    torch.manual_seed(seed)
    algo = build_algo_config(_settings(seed)).build_algo()
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
    return {
        "seed": seed,
        "env_steps": steps,
        "iterations": iterations,
        "seconds": round(time.time() - start, 1),
        "completion": metrics.completion,
        "mean_steps": metrics.spt,
        "high_risk_share": metrics.high_risk_share,
    }


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_aaac_ecommerce_beats_random(ray_session) -> None:
    eval_cfg = AgentTaskEnvConfig(
        action_mode="prototype",
        faults={"enabled": True, "start_share": 0.2, "end_share": 0.2},
    )
    random_completion = evaluate_policy(RandomPolicy(SEEDS[0]), eval_cfg, TASKS_PER_FAMILY).metrics.completion
    runs = [_train_and_evaluate(seed, eval_cfg) for seed in SEEDS]
    median = statistics.median(r["completion"] for r in runs)
    summary = {"median_completion": median, "random_completion": random_completion, "runs": runs}
    print("AAAC e-commerce:", json.dumps(summary))
    assert median >= random_completion + MARGIN, (
        f"AAAC's median validation completion over seeds {SEEDS} is {median:.3f} after {ENV_STEPS} env steps; "
        f"random masked policy {random_completion:.3f}; needed >= random + {MARGIN:.2f}. {json.dumps(summary)}"
    )
