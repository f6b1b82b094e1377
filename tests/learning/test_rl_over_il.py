"""Learning test (issue 13, section 3): RL raises completion above imitation from a limited set of demonstrations.

One seed of ``benchmarks/rl_over_il.py`` (:func:`seed_overrides` and :func:`run_seed`: the quickstart config,
stages ``il`` then ``rl``, the same evaluations): imitation from 25 demonstrations, then 60 RL iterations (about
31k env steps) at lr 3e-4, both evaluated greedily on the same 200 validation tasks (20 per family, 30% faulty).
At 25 demonstrations imitation completes 0.585 of them against the scripted expert's 0.895, so there is room.

Bar: RL's completion at least imitation's + 10 points (the issue's goal), and the 95% bootstrap interval of the
per-task differences above 0. A no-op RL stage keeps imitation's completion and fails both.
Measured with ``python benchmarks/rl_over_il.py --methods rl`` (3 seeds, 200 tasks), with whole-episode sampling:
imitation 0.585 / 0.69 / 0.655 -> RL 0.825 / 0.85 / 0.81 at seeds 0 / 1 / 2, mean gain +0.185 [0.155, 0.217], the
issue's 3-seed goal of +0.10 met. Before that fix (the EnvRunner dropped the running episodes at every sample()
call) the same run read RL 0.805 / 0.775 / 0.645, gain +0.098 [0.068, 0.13]: seed 2's -0.01 showed the bar can
fail. This test runs seed 0 (the asynchronous reward pool makes runs repeat only approximately). About 330 s per
seed on the shared box.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentic_ray.settings import ExperimentSettings, load_settings
from benchmarks.rl_over_il import bootstrap_ci, run_seed, seed_overrides

REPO = Path(__file__).resolve().parents[2]
SEED, DEMOS, ITERATIONS, LR, TASKS = 0, 25, 60, 3e-4, 200
MARGIN = 0.10


@pytest.mark.learning
@pytest.mark.timeout(2400)  # about 5.5 min alone on 2 CPUs
def test_rl_raises_completion_above_imitation(ray_session) -> None:
    tpf = TASKS // len(ExperimentSettings().env.family_list())
    over = seed_overrides(SEED, "rl", DEMOS, ITERATIONS, LR, 0.0, tpf)
    r = run_seed(load_settings(REPO / "configs" / "quickstart.yaml", over), cu_pairs=0)
    il, rl = np.asarray(r["il"], float), np.asarray(r["rl"], float)
    ci = bootstrap_ci(rl - il)
    got = json.dumps(
        {"il": il.mean(), "rl": rl.mean(), "gain": rl.mean() - il.mean(), "ci": ci, "tasks": len(il)}
    )
    print("RL over imitation:", got)
    assert len(il) == len(rl) == TASKS
    assert rl.mean() >= il.mean() + MARGIN, f"RL completion not >= imitation + {MARGIN}: {got}"
    assert ci is not None and ci[0] > 0, f"the gain's 95% interval reaches 0: {got}"
