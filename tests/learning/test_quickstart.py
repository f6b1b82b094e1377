"""Quickstart-sized learning test: after imitation, TCSR ≥ 0.8; after RL, completion above the imitation result.

Runs ``configs/quickstart.yaml`` (all three stages, about 2-5 minutes on 2 idle CPUs).

Status (2026-11-30): the imitation half holds (TCSR 0.85 after 1,000 demonstrations, completion 0.60); the RL
half does not: with the critics on their own encoders RL keeps completion at 0.60 (8 iterations, and also over
20) but does not raise it; with a shared encoder it fell to 0.30 (critic regression wiped out the imitation
features). Kept strict and marked slow (not in CI) until RL after imitation improves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentic_ray.eval.report import read_metrics
from agentic_ray.settings import load_settings
from agentic_ray.stages.pipeline import run_pipeline

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.learning
@pytest.mark.slow
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
