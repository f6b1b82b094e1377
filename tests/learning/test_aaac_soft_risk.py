"""Learning test (issue 13): in ``risk_mode: soft`` AAAC's high-risk share falls over training, at 3 seeds.

The runs are ``benchmarks/aaac_vs_ppo.py``'s AAAC arm (:func:`train_arm`: the same settings, env, module and
evaluation), trained in the test's shared Ray for ``ENV_STEPS`` env steps at each of ``SEEDS``. The same module is
evaluated on the same 40 fixed validation tasks (4 of each of the 10 e-commerce families, 20% faulty) before
training and after it. Actions are *sampled* from the policy (seeded), so the share measures how much probability
the policy puts on high-risk calls; greedy evaluations read 0 for every arm after 1k env steps (see below), which
cannot tell AAAC from PPO.

Bar: at every seed the share after training is at most ``RATIO`` × the untrained module's share, and the mean fall
is larger than ``K`` × the seed-to-seed standard deviation of the falls. A no-op (no training, or a policy that
does not move) keeps the start share and fails both.

**Known miss, marked xfail with the figures** (2 shared CPUs, other jobs running; start → end high-risk share at
4k env steps, 40 tasks, seeds 0/1/2):

* greedy evaluation: AAAC 0.026/0.043/0.006 → 0/0/0, but PPO (seed 0: 0.026 → 0) and AAAC's one-critic
  ablation (seed 0: 0.026 → 0) fall the same way: every policy learns an early ending (2-2.5 steps on its
  successes), so the greedy share says nothing about the risk critic;
* sampled evaluation (this test; the test's own run printed the same figures as the benchmark's, so a seed's
  result is reproducible, not a lucky draw): AAAC 0.059 -> 0.078, 0.031 -> 0.036, 0.030 -> 0.017 (mean 0.044,
  completion 0.10-0.175), 145 s for the 3 seeds; PPO on the env reward, same seeds and starts: 0.059 -> 0.010,
  0.031 -> 0.020, 0.030 -> 0.0095 (mean 0.013). AAAC's share falls at one seed of three and ends at 3.3x PPO's,
  where the issue's goal is <= 0.5x;
* which part fails: AAAC without its risk critic (``aaac_one_critic``: the advantage is the reward critic's)
  falls 0.059 -> 0.021, 0.031 -> 0.013, 0.030 -> 0.0096 (0.32-0.41x, mean fall 0.025 > 2 x std 0.0105): it
  would pass this bar. The risk critic's 0.3 share of the advantage is what keeps the share up;
* a stronger risk weight (``w_reward`` 0.3, not the shipped 0.7): 0.059 -> 0, 0.031 -> 0.018 (0.56x),
  0.030 -> 0 (mean 0.006, 0.44x PPO's, no consequences; completion unchanged at 0.158): the share falls at every
  seed but misses the bar at seed 1 (0.56x > 0.5x; mean fall 0.034 < 2 x std 0.023).
* AAAC without its β-KL term (``aaac_no_kl``): 0.059 -> 0.034, 0.031 -> 0.061, 0.030 -> 0.0065 (mean 0.034):
  not the β-KL either.
"""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from benchmarks.aaac_vs_ppo import parse, train_arm

ARM = "aaac"  # benchmarks/aaac_vs_ppo.py arm
SEEDS = (0, 1, 2)
ENV_STEPS = 4000
TASKS = 40
RATIO = 0.5  # the goal is AAAC ≤ 0.5× PPO's share; here ≤ 0.5× the untrained module's, at every seed
K = 2.0
ARGS = [
    "--env-steps",
    str(ENV_STEPS),
    "--tasks",
    str(TASKS),
    "--eval-every",
    "1000000",  # no curve evaluations: only before and after training
    "--eval-at-start",
    "--eval-sampled",
]


@pytest.mark.learning
@pytest.mark.xfail(
    reason="AAAC's sampled high-risk share does not fall in soft mode over 4k env steps (0.059->0.078, "
    "0.031->0.036, 0.030->0.017 at seeds 0-2) while PPO's falls at every seed (mean 0.013 vs AAAC 0.044); "
    "measured attempts in the module docstring",
    strict=False,
)
@pytest.mark.timeout(1200)  # about 4 min alone on 2 CPUs; 3 x 80 s measured on the shared box
def test_aaac_high_risk_share_falls_in_soft_mode(ray_session) -> None:
    args = parse(ARGS)
    assert args.risk_mode == "soft"
    threads = torch.get_num_threads()
    try:
        runs = [train_arm(ARM, seed, args) for seed in SEEDS]
    finally:
        torch.set_num_threads(threads)
    start = [r["start_high_risk_share"] for r in runs]
    end = [r["high_risk_share"] for r in runs]
    falls = [s - e for s, e in zip(start, end, strict=True)]
    summary = {
        "seeds": list(SEEDS),
        "env_steps": [r["env_steps"] for r in runs],
        "start_high_risk_share": start,
        "high_risk_share": end,
        "start_completion": [r["start_completion"] for r in runs],
        "completion": [r["completion"] for r in runs],
        "consequences_per_episode": [r["consequences_per_episode"] for r in runs],
    }
    print("AAAC soft-risk:", json.dumps(summary))
    got = json.dumps(summary)
    assert all(s > 0 for s in start), (
        f"an untrained policy made no high-risk call: nothing to fall from. {got}"
    )
    assert all(e <= RATIO * s for s, e in zip(start, end, strict=True)), (
        f"high-risk share must fall to <= {RATIO}x its start at every seed. {got}"
    )
    assert statistics.fmean(falls) > K * statistics.stdev(falls), (
        f"mean fall {statistics.fmean(falls):.4f} not > {K} x seed-to-seed std {statistics.stdev(falls):.4f}. {got}"
    )
