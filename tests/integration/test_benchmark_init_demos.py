"""``benchmarks/aaac_vs_ppo.py --init-demos``: the arm starts from the pipeline's imitation, and the run records it.

One small PPO run in the session's Ray: 25 demonstrations imitated with the quickstart's imitation settings, then one
training iteration. The imitation policy must complete far more of the validation tasks than an untrained one (the
random masked policy completes 0.01 of them; measured start 0.72 on 50 tasks at these settings), and the run must
keep both the imitation's record and the start evaluation (``--eval-at-start`` used to replace the former).
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.aaac_vs_ppo import parse, train_arm

pytestmark = pytest.mark.integration

ARGS = [
    "--init-demos",
    "25",
    "--action-mode",
    "structured",
    "--set",
    "stages.il.epochs=24",
    "--set",
    "stages.il.lr=0.002",
    "--env-steps",
    "200",
    "--batch",
    "128",
    "--minibatch",
    "64",
    "--epochs",
    "1",
    "--tasks",
    "20",
    "--curve-tasks",
    "10",
    "--eval-every",
    "1000",
    "--eval-at-start",
]


@pytest.mark.timeout(600)
def test_the_arm_starts_from_imitation_and_the_run_records_it(ray_session) -> None:
    threads = torch.get_num_threads()
    try:
        r = train_arm("ppo", 0, parse(ARGS))
    finally:
        torch.set_num_threads(threads)
    assert r["il_demos"] == 25 and r["il_nll"] is not None, r
    assert r["start_completion"] >= 0.3, r["start_completion"]
