"""Learning test: AAAC reaches an episode return of 450 on CartPole-v1 within 300k env steps.

One seed in CI (2-3 minutes on the shared 2-CPU box; the three seeds took 7 of CI's 35 minutes): the multi-seed
claim, with RLlib's tuned PPO beside it, is ``benchmarks/aaac_cartpole.py``'s (issue 24: multi-seed learning
claims live in the benchmarks). Seeds 2 and 3 run with ``pytest -m slow``.

The settings are the tuned example's (``agentic_ray/algorithms/aaac/tuned_examples/cartpole_aaac.py``): TD(λ) with
a smooth λ switch at 200 steps (width 50), so short early episodes train with λ≈0.95 and long ones with λ≈0.55;
everything else is AAAC's default (w_reward 0.7 with an all-zero risk stream, β_0 0.1 decaying per optimisation
step, clipped importance-weighted surrogate 0.2, per-group clips). Seeds 1-3 are not the seed the example was
tuned on (0); ``benchmarks/aaac_cartpole.py`` prints the figures for seeds 1-5.
"""

from __future__ import annotations

import json

import pytest

from agentic_ray.algorithms.aaac.tuned_examples.cartpole_aaac import (
    MAX_ENV_STEPS,
    TARGET_RETURN,
    cartpole_aaac_config,
    train_until_return,
)


@pytest.mark.learning
@pytest.mark.parametrize(
    "seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)]
)
def test_aaac_reaches_450_on_cartpole(ray_session, seed: int) -> None:
    out = train_until_return(
        cartpole_aaac_config(seed), target_return=TARGET_RETURN, max_env_steps=MAX_ENV_STEPS
    )
    lambdas = out.pop("lambda_means")
    print(f"AAAC CartPole-v1 seed {seed}:", json.dumps(out))

    assert out["env_steps_to_target"] is not None, (
        f"seed {seed}: AAAC reached episode_return_mean {out['episode_return_mean']} (best {out['best_return']}) "
        f"after {out['env_steps']} env steps; target {TARGET_RETURN} within {MAX_ENV_STEPS}."
    )
    # Adaptive λ was in play: short early episodes used a higher λ than the long ones at the end.
    assert lambdas[0] > 0.9 and lambdas[-1] < lambdas[0] - 0.2, lambdas
