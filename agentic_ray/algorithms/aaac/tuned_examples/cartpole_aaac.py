"""AAAC on CartPole-v1: the tuned config, and a loop that trains until a target episode return.

The learning test (``tests/learning/test_aaac_cartpole.py``, 3 seeds) and the 5-seed benchmark
(``benchmarks/aaac_cartpole.py``) both build their algorithm from :func:`cartpole_aaac_config`, so the figures they
print are for the same settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
)

from agentic_ray import keys
from agentic_ray.algorithms.aaac.aaac import AAACConfig

__all__ = ["MAX_ENV_STEPS", "TARGET_RETURN", "cartpole_aaac_config", "train_until_return"]

TARGET_RETURN = 450.0
MAX_ENV_STEPS = 300_000

# Learner metrics recorded per iteration by train_until_return (diagnostics of a run that does not learn).
_TRACKED = (
    keys.AAAC_ENTROPY,
    keys.AAAC_VF_LOSS_REWARD,
    keys.AAAC_KL,
    keys.AAAC_BETA,
    keys.AAAC_LAMBDA_MEAN,
    keys.AAAC_POLICY_LOSS,
)


def cartpole_aaac_config(seed: int, **training: Any) -> AAACConfig:
    """AAAC on CartPole-v1 with the learning test's settings; ``training`` overrides ``.training()`` arguments.

    Args:
        seed: ``debugging(seed=...)``: seeds torch, numpy and the env.
        **training: Extra or replacing ``AAACConfig.training`` arguments (for diagnosis runs).

    Returns:
        The config, not yet built.
    """
    settings: dict[str, Any] = {
        "train_batch_size_per_learner": 2000,
        "minibatch_size": 128,
        "num_epochs": 6,
        "lambda_length_threshold": 200,
        "lambda_smooth_width": 50,
    }
    settings.update(training)
    return (
        AAACConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(**settings)
        .debugging(seed=seed)
    )


def train_until_return(
    config: Any,
    *,
    target_return: float = TARGET_RETURN,
    max_env_steps: int = MAX_ENV_STEPS,
    on_iteration: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Trains until ``episode_return_mean >= target_return`` or ``max_env_steps`` env steps.

    Args:
        config: The algorithm config, AAAC's or another's (built here, stopped before returning).
        target_return: Stop as soon as RLlib's ``episode_return_mean`` reaches it.
        max_env_steps: Env-step budget.
        on_iteration: Called with each iteration's row (env steps, return and the tracked learner metrics).

    Returns:
        ``env_steps_to_target`` (None if not reached), ``env_steps``, ``episode_return_mean`` (last),
        ``best_return``, ``iterations``, ``seconds`` and ``lambda_means`` (per iteration).
    """
    algo = config.build_algo()
    start = time.time()
    steps, episode_return, best, reached = 0, float("-inf"), float("-inf"), None
    lambda_means: list[float] = []
    try:
        while steps < max_env_steps:
            result = algo.train()
            steps = int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])
            episode_return = float(result[ENV_RUNNER_RESULTS].get(EPISODE_RETURN_MEAN, float("-inf")))
            best = max(best, episode_return)
            learner = result[LEARNER_RESULTS][DEFAULT_MODULE_ID]
            # NaN for an algorithm without AAAC's adaptive λ (RLlib's PPO beside it in the benchmark).
            lambda_means.append(float(learner.get(keys.AAAC_LAMBDA_MEAN, float("nan"))))
            if on_iteration is not None:
                row = {"env_steps": steps, "return": round(episode_return, 1)}
                row |= {k: round(float(learner[k]), 4) for k in _TRACKED if k in learner}
                on_iteration(row)
            if episode_return >= target_return:
                reached = steps
                break
    finally:
        algo.stop()
    return {
        "env_steps_to_target": reached,
        "env_steps": steps,
        "episode_return_mean": round(episode_return, 1),
        "best_return": round(best, 1),
        "iterations": len(lambda_means),
        "seconds": round(time.time() - start, 1),
        "lambda_means": lambda_means,
    }
