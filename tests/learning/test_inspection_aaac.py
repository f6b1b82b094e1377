"""Learning test (issue 30): AAAC through ``agentic-ray train --config configs/inspection.yaml`` (the config alone)
beats the default-threshold policy on validation F1 and completion.

The three stages run as a user runs them (the CLI, its own local Ray), then the run's last checkpoint acts greedily
on the benchmark's validation tasks (10 per family: :func:`benchmarks.inspection.trained_policy`) beside the rule
policy with ``detect`` at the contract's defaults (:class:`~agentic_ray.domains.inspection.baseline.FixedThresholdPolicy`).
Bars, each a thing a run that learned nothing cannot pass:

* F1 at least the default's + 0.01. An untrained policy inspects no part (no F1 at all); detecting at the
  defaults is the baseline itself (+0). Measured at the three seeds (2026-12-05): 0.7385, 0.7282, 0.7436 against
  0.7154; imitation alone 0.7385, 0.7077, 0.7205. This is a floor against regressions, not issue 30's goal
  (+0.05, missed: ``benchmarks/results/inspection.json``).
* completion at least the default's + 0.10 (measured 0.78, 0.68, 0.80 against 0.56 on 2026-12-05, before the
  config's reward paid for progress: ``progress: share``, ``baseline: default``).

**Seed 1 fails the completion bar** (2026-12-06, with ``stages.reflection.freeze_encoder``; seeds 0 and 2 pass):
completion 0.62 against 0.56, F1 0.7333 against 0.7154 (passes). Its RL checkpoint completes 0.68 on these tasks and
0.69 on 100 per family, where the policy records a cracked part of a disputed batch as clean and repeats the call
to the step budget (``benchmarks/inspection_rl_diagnosis.py``). Other runs of the same config and seeds, evaluated
as here: seed 0 0.68, seed 2 0.78 (F1 0.7487, 0.7308). Before the flag the reflection stage undid RL's completion
(seeds 0 and 1 failed at 0.60 and 0.56). The bar is kept.

**Marked slow, out of CI:** one seed trains about 10k RL env steps after imitation; a run took 17 minutes with
three at once on a loaded 2-CPU box (load 8-16); the three one after another took 922 s on 2026-12-06 (load 2-3),
on top of CI's 33 minutes against its 35-minute aim. Run it with ``pytest -m slow tests/learning``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
F1_MARGIN, COMPLETION_MARGIN, TASKS_PER_FAMILY = 0.01, 0.10, 10


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aaac_beats_the_default_threshold_on_inspection(tmp_path: Path, seed: int) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from inspection import planner_actor, run_policy, trained_policy

    from agentic_ray.domains.inspection.baseline import FixedThresholdPolicy

    run = tmp_path / "run"
    env = {**os.environ, "WANDB_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    cmd = ["agentic-ray", "train", "--config", "configs/inspection.yaml", "--run-dir", str(run)]
    cmd += ["--set", f"seed={seed}", "--set", "wandb.mode=disabled"]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=3300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trained, _gates = trained_policy(str(run), TASKS_PER_FAMILY)
    default = run_policy(planner_actor(FixedThresholdPolicy().plan), TASKS_PER_FAMILY)
    got = json.dumps({k: (trained[k], default[k]) for k in ("f1", "completion", "ndcg")})
    assert trained["f1"] >= default["f1"] + F1_MARGIN, got
    assert trained["completion"] >= default["completion"] + COMPLETION_MARGIN, got
