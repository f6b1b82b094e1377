"""Ranking trials and the files a sweep writes, on hand-made trial rows (no Ray)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from agentic_ray.settings import load_settings
from agentic_ray.sweeps.outputs import write_outputs
from agentic_ray.sweeps.ranking import compare_to_default, pair_front, rank_trials
from agentic_ray.sweeps.sweep_config import SweepSettings

REPO = Path(__file__).resolve().parents[3]
OBJ = ["completion", "high_risk_share"]


def row(tid: str, completion: float | None, risk: float | None, default: bool = False, **params) -> dict:
    metrics = {} if completion is None else {"completion": completion, "high_risk_share": risk, "spt": 5.0}
    return {
        "trial_id": tid,
        "status": "TERMINATED" if metrics else "ERROR",
        "is_default": default,
        "params": params or {"rewards.layers.execution.weight": 0.4},
        "metrics": metrics,
        "evaluations": 4 if metrics else None,
        "stage": "rl",
    }


ROWS = [
    row("d", 0.85, 0.10, default=True),
    row("a", 0.90, 0.10, **{"rewards.layers.execution.weight": 0.5}),  # dominates the default
    row("b", 0.80, 0.02, **{"rewards.layers.execution.weight": 0.6}),  # a trade-off
    row("c", 0.80, 0.12, **{"rewards.layers.execution.weight": 0.45}),  # dominated by d and a
    row("e", None, None),  # failed before its first evaluation
]


def test_rank_orders_fronts_then_objectives_and_puts_failed_trials_last() -> None:
    ranked = rank_trials(ROWS, OBJ)
    assert [r["trial_id"] for r in ranked] == ["a", "b", "d", "c", "e"]
    assert [r["pareto_rank"] for r in ranked] == [0, 0, 1, 2, None]
    assert [r["rank"] for r in ranked] == [1, 2, 3, 4, None]


def test_ties_prefer_the_default() -> None:
    ranked = rank_trials([row("x", 0.9, 0.0), row("d", 0.9, 0.0, default=True)], OBJ)
    assert [r["trial_id"] for r in ranked] == ["d", "x"] and {r["pareto_rank"] for r in ranked} == {0}


def test_default_comparison() -> None:
    assert compare_to_default(ROWS, OBJ) == {
        "default_trial": "d",
        "default_on_front": False,
        "dominating_default": ["a"],
    }
    on_front = compare_to_default([r for r in ROWS if r["trial_id"] != "a"], OBJ)
    assert on_front["default_on_front"] is True and on_front["dominating_default"] == []
    assert compare_to_default([r for r in ROWS if not r["is_default"]], OBJ)["default_trial"] is None
    assert [r["trial_id"] for r in pair_front(ROWS, OBJ)] == ["b", "a"]  # sorted by completion


def test_outputs_csv_png_and_best_yaml_that_train_accepts(tmp_path: Path) -> None:
    sweep = SweepSettings.model_validate(
        {
            "name": "unit",
            "experiment": str(REPO / "configs" / "tiny.yaml"),
            "overrides": {
                "rewards": {"mode": "async", "layers": {"execution": {}, "efficiency": {}, "risk": {}}}
            },
            "searcher": "optuna",
            "reward_weights": {"layers": ["execution", "efficiency"]},
            "pareto_pairs": [["completion", "high_risk_share"], ["completion", "spt"]],
            "best_configs": 2,
        }
    )
    summary = write_outputs(tmp_path, sweep, ROWS, sweep.base_raw(), wall_s=12.3)
    with (tmp_path / "trials.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [r["trial_id"] for r in table] == ["a", "b", "d", "c", "e"]
    assert table[0]["rewards.layers.execution.weight"] == "0.5" and table[0]["completion"] == "0.9"
    with (tmp_path / "pareto_completion_vs_high_risk_share.csv").open() as f:
        assert [r["trial_id"] for r in csv.DictReader(f)] == ["b", "a"]
    for stem in ("pareto_completion_vs_high_risk_share", "pareto_completion_vs_spt"):
        assert (tmp_path / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["pareto_points"] == 2 and summary["errored"] == 1 and summary["best"]["trial_id"] == "a"
    assert summary["vs_default"]["objectives"]["dominating_default"] == ["a"]
    assert json.loads((tmp_path / "summary.json").read_text())["trials"] == 5
    best = [Path(p) for p in summary["best_configs"]]
    assert [p.name for p in best] == ["rank1_a.yaml", "rank2_b.yaml"]
    s = load_settings(best[0])
    assert (
        s.name == "unit-rank1"
        and s.rewards is not None
        and s.rewards.weight("execution") == pytest.approx(0.5)
    )
    assert s.stages.run == ["il", "rl", "reflection"]  # the experiment's own stages: train runs all of them
    assert "completion=0.9000" in best[0].read_text().splitlines()[1]
