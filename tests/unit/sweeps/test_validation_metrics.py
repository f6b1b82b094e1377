"""What a trial reports to Tune: validation metrics under val/, the ones computed from the episode records
(policy-controlled TCSR, consequences per episode) and the training return kept out of the objectives."""

from __future__ import annotations

import pytest

from agentic_ray.rewards.episode_record import EpisodeRecord, StepRecord
from agentic_ray.sweeps.sweep_config import SweepSettings
from agentic_ray.sweeps.validation_metrics import VALIDATION_METRICS, report_row
from tests.unit.rewards.records import record, step


def _step(ok: bool, injected: bool = False) -> StepRecord:
    return step("OK" if ok else "TOOL_TIMEOUT", injected=injected)


def _episode(steps: list[StepRecord], consequences: int = 0) -> EpisodeRecord:
    return record(
        steps, consequences=[{"skill": "a", "kind": "complaint", "step": 0, "weight": 1.0}] * consequences
    )


def test_report_row_counts_consequences_per_episode_and_policy_tcsr_without_injected_failures():
    records = [
        _episode([_step(True), _step(False, injected=True)], consequences=2),
        _episode([_step(True), _step(False)]),
        _episode([_step(True)], consequences=1),
    ]
    row = {"stage": "rl", "iteration": 2, "completion": 1.0, "high_risk_share": 0.25, "train_return": 3.0}
    out = report_row(row, records)
    assert out["val/consequence_rate"] == pytest.approx(1.0)  # 3 consequences over 3 episodes
    assert out["val/tcsr_policy"] == pytest.approx(3 / 4)  # the injected failure is left out
    assert out["val/completion"] == 1.0 and out["val/high_risk_share"] == 0.25
    assert out["train/return"] == 3.0 and "val/train_return" not in out
    assert report_row(row, [_episode([_step(True)])])["val/consequence_rate"] == 0.0


def test_consequence_rate_is_an_objective_to_minimise():
    assert VALIDATION_METRICS["consequence_rate"] == "min"
    s = SweepSettings.model_validate(
        {
            "name": "x",
            "experiment": "configs/tiny.yaml",
            "objectives": ["completion", "consequence_rate"],
            "pareto_pairs": [["completion", "consequence_rate"]],
            "params": {"algo.lr": {"values": [0.001]}},
        }
    )
    assert s.objectives == ["completion", "consequence_rate"]
