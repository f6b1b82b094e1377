"""Quickstart-sized learning test: after imitation, TCSR ≥ 0.8; after RL, completion above the imitation result.

Runs ``configs/quickstart.yaml`` (all three stages, about 2-5 minutes on 2 idle CPUs).

Status (2026-11-30): the imitation half holds (TCSR 0.90, completion 0.675 with 24 epochs); the RL half does
not. Measured on the final code (imitation 0.675 each time): 12 RL iterations 0.675 (equal, so the test fails),
24 iterations 0.575, lr 3e-4 0.625; on an earlier build lr 3e-4 with 4 epochs per batch went 0.70 -> 0.525. One
intermediate build (the goal's numeric target fed in [-1, 1], outside the observation space) measured
0.675 -> 0.725, which did not survive the fix. The remaining imitation failures are numeric (coupon values 8% off, refunds 3% off, against a 2%
tolerance) and RL's Gaussian exploration around a confident imitation mean rarely lands inside it. Kept strict
and marked slow (not in CI) until RL after imitation improves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentic_ray.eval.report import read_metrics
from agentic_ray.settings import load_settings
from agentic_ray.stages.pipeline import run_pipeline

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.learning
@pytest.mark.slow  # fails: RL does not raise completion above imitation yet (see the module docstring)
@pytest.mark.timeout(1800)  # 3-6 min alone on 2 CPUs; up to 15 min when the box is shared
def test_quickstart_il_then_rl(ray_session, tmp_path) -> None:
    s = load_settings(REPO / "configs" / "quickstart.yaml", {"wandb.mode": "disabled"})
    out = run_pipeline(s, run_dir=tmp_path / "run", progress=lambda _m: None)
    evals = [r for r in read_metrics(Path(out["run_dir"]) / "metrics.jsonl") if "tcsr" in r]
    il = [r for r in evals if r["stage"] == "il"][-1]
    rl = [r for r in evals if r["stage"] == "rl"][-1]
    assert il["tcsr"] >= 0.8, f"TCSR after imitation {il['tcsr']:.3f} < 0.8"
    assert rl["completion"] > il["completion"], (
        f"completion after RL {rl['completion']:.3f} is not above imitation's {il['completion']:.3f}"
    )
