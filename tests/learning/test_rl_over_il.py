"""Learning test: RL raises completion above imitation from a limited set of demonstrations, on 200 tasks.

Reads the session's quickstart run (the README's main command, ``quickstart_run``: imitation from 25
demonstrations, then 60 RL iterations, about 31k env steps, at lr 3e-4) and evaluates its imitation and RL
checkpoints greedily on the same 200 validation tasks (20 per family, 30% faulty). At 25 demonstrations imitation
leaves room under the scripted expert, and RL must close part of it.

Bar: RL's completion at least imitation's + 10 points, and the 95% bootstrap interval of the per-task differences
above 0. A no-op RL stage keeps imitation's policy and fails both. The multi-seed claim (3 seeds, with intervals)
is ``python benchmarks/rl_over_il.py --methods rl``, which trains its own runs; this test trains nothing, so it
costs two evaluations (about 40 s) on top of the shared run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentic_ray.eval.evaluator import ModulePolicy, evaluate_policy, validation_env_config
from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint
from agentic_ray.settings import ExperimentSettings, load_settings
from benchmarks.rl_over_il import bootstrap_ci

REPO = Path(__file__).resolve().parents[2]
TASKS, MARGIN = 200, 0.10


def _completion(run_dir: Path, stage: str, s: ExperimentSettings, tasks_per_family: int) -> np.ndarray:
    module = load_policy_module(pick_checkpoint(run_dir, stage))
    res = evaluate_policy(
        ModulePolicy(module), validation_env_config(s.env, s.eval.fault_share), tasks_per_family
    )
    return np.asarray([r.completed for r in res.records], float)


@pytest.mark.learning
@pytest.mark.timeout(900)
def test_rl_raises_completion_above_imitation(quickstart_run) -> None:
    s = load_settings(REPO / "configs" / "quickstart.yaml", {"wandb.mode": "disabled"})
    assert s.stages.il.demos <= 25, "the bar assumes imitation from a limited demonstration set"
    tpf = TASKS // len(s.env.family_list())
    il = _completion(quickstart_run.run_dir, "il", s, tpf)
    rl = _completion(quickstart_run.run_dir, "rl", s, tpf)
    ci = bootstrap_ci(rl - il)
    got = json.dumps(
        {"il": il.mean(), "rl": rl.mean(), "gain": rl.mean() - il.mean(), "ci": ci, "tasks": len(il)}
    )
    print("RL over imitation:", got)
    assert len(il) == len(rl) == TASKS
    assert rl.mean() >= il.mean() + MARGIN, f"RL completion not >= imitation + {MARGIN}: {got}"
    assert ci is not None and ci[0] > 0, f"the gain's 95% interval reaches 0: {got}"
