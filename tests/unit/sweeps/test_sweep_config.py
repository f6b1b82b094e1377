"""Sweep settings and the search space: validation, decoding a trial config into experiment overrides, and
the default trial (no Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray.tune.search.sample import Categorical, Float, Integer
from typer.testing import CliRunner

from agentic_ray.cli import app
from agentic_ray.settings import ExperimentSettings, SettingsError, apply_overrides
from agentic_ray.sweeps.search_space import (
    WEIGHTS_KEY,
    build_search_space,
    default_point,
    param_space,
    unit_key,
)
from agentic_ray.sweeps.sweep_config import SweepSettings, load_sweep
from agentic_ray.sweeps.sweep_runner import expected_trials

REPO = Path(__file__).resolve().parents[3]
SWEEPS = sorted((REPO / "tune_sweeps").glob("*.yaml"))
REWARDS = {"mode": "async", "layers": {"execution": {}, "efficiency": {}, "plan": {}, "risk": {}}}


def make(**kw) -> SweepSettings:
    base = {
        "name": "t",
        "experiment": str(REPO / "configs" / "tiny.yaml"),
        "overrides": {"rewards": REWARDS},
        "searcher": "optuna",
        "reward_weights": {"layers": ["execution", "efficiency", "plan"], "minimum": {"execution": 0.4}},
    }
    return SweepSettings.model_validate({**base, **kw})


@pytest.mark.parametrize("path", SWEEPS, ids=[p.name for p in SWEEPS])
def test_shipped_sweeps_load_and_their_space_builds(path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    s = load_sweep(path)
    space = build_search_space(s, s.base_raw())
    assert expected_trials(s, param_space(s, space, s.base_raw())) >= 2
    assert space.is_default(space.overrides(default_point(s, space)))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"objectives": ["train_return"]}, "not a validation metric"),
        ({"objectives": ["episode_return_mean"]}, "never on the training reward"),
        ({"pareto_pairs": [["completion", "reward"]]}, "not a validation metric"),
        ({"objectives": ["completion", "spt"], "scheduler": {"name": "asha"}}, "exactly one objective"),
        ({"searcher": "grid", "params": {"algo.lr": {"low": 1e-4, "high": 1e-3}}}, "grid searcher needs"),
        ({"searcher": "grid"}, "grid_step or reward_weights.points"),
        ({"params": {"model.hidden_dim": {"values": [16, 32]}}}, "shared_imitation"),
        ({"trial_stages": ["il", "rl"]}, "drop 'il'"),
        ({"params": {"algo.lr": {"values": [1e-3], "low": 1e-4}}}, "either `values`"),
        ({"params": {"algo.lr": {"low": 0.0, "high": 1e-3, "log": True}}}, "low > 0"),
        ({"reward_weights": {"layers": ["execution"]}}, "at least two"),
        ({"reward_weights": {"layers": ["execution", "plan"], "minimum": {"judge": 0.1}}}, "not in `layers`"),
        ({"unknown_field": 1}, "Extra inputs"),
    ],
)
def test_invalid_sweeps_are_rejected_with_the_reason(change, match) -> None:
    with pytest.raises(ValueError, match=match):
        make(**change)


def test_space_checks_against_the_experiment() -> None:
    with pytest.raises(SettingsError, match="no reward pool"):
        s = make(overrides={})
        build_search_space(s, s.base_raw())
    with pytest.raises(SettingsError, match="not an enabled reward-stream layer"):
        s = make(reward_weights={"layers": ["execution", "user_experience"]})
        build_search_space(s, s.base_raw())
    with pytest.raises(SettingsError, match="no setting by that name"):
        s = make(params={"algo.training.w_rewrd": {"low": 0.5, "high": 0.9}})
        build_search_space(s, s.base_raw())
    with pytest.raises(SettingsError, match="outside the space"):  # execution default is 0.4
        s = make(reward_weights={"layers": ["execution", "efficiency"], "minimum": {"execution": 0.45}})
        build_search_space(s, s.base_raw())
    with pytest.raises(SettingsError, match="outside the searched"):
        s = make(reward_weights=None, params={"algo.lr": {"low": 1e-3, "high": 1e-2}})  # default 3e-4
        build_search_space(s, s.base_raw())
    with pytest.raises(SettingsError, match="invalid experiment"):
        s = make(reward_weights=None, searcher="grid", params={"algo.gamma": {"values": [1.5]}})
        build_search_space(s, s.base_raw())


def test_optuna_space_decodes_to_valid_overrides_and_the_default_is_the_experiment() -> None:
    s = make(
        params={
            "algo.training.w_reward": {"low": 0.5, "high": 0.95},
            "algo.training.lambda_length_threshold": {"low": 4, "high": 12, "integer": True},
            "algo.lr": {"low": 3e-5, "high": 3e-4, "log": True},
        },
        reward_weights={
            "layers": ["execution", "efficiency", "plan"],
            "minimum": {"execution": 0.4},
            "maximum": {"plan": 0.25},
        },
    )
    base_raw = s.base_raw()
    space = build_search_space(s, base_raw)
    assert space.total == pytest.approx(0.4 + 0.15 + 0.15)  # the experiment's sum over the searched layers
    ps = param_space(s, space, base_raw)
    assert isinstance(ps["algo.lr"], Float) and isinstance(
        ps["algo.training.lambda_length_threshold"], Integer
    )
    assert [unit_key(i) in ps for i in range(2)] == [True, True]
    # The default: the experiment's weights and AAAC's own w_reward / λ threshold (tiny.yaml sets none).
    default = space.overrides(default_point(s, space))
    assert default == pytest.approx(
        {
            "rewards.layers.execution.weight": 0.4,
            "rewards.layers.efficiency.weight": 0.15,
            "rewards.layers.plan.weight": 0.15,
            "algo.training.w_reward": 0.7,
            "algo.training.lambda_length_threshold": 8.0,
            "algo.lr": 3e-4,
        }
    )
    # A sampled corner: weights meet the bounds and the overrides give a valid experiment with them.
    trial = {"algo.training.w_reward": 0.9, "algo.training.lambda_length_threshold": 5, "algo.lr": 1e-4}
    trial |= {unit_key(0): 1.0, unit_key(1): 0.0}  # everything free goes to the last layer, capped at 0.25
    ov = space.overrides(trial)
    settings = ExperimentSettings.model_validate(apply_overrides(base_raw, ov))
    assert settings.rewards is not None
    w = {n: settings.rewards.weight(n) for n in ("execution", "efficiency", "plan")}
    assert sum(w.values()) == pytest.approx(0.7) and w["execution"] >= 0.4 and w["plan"] <= 0.25 + 1e-9
    assert settings.algo.training["w_reward"] == 0.9 and settings.algo.lr == 1e-4
    assert not space.is_default(ov)


def test_grid_space_is_the_lattice_crossed_with_values_plus_the_default() -> None:
    s = make(
        searcher="grid",
        reward_weights={
            "layers": ["execution", "efficiency"],
            "minimum": {"execution": 0.4},
            "points": [[0.45, 0.1], [0.5, 0.05]],
        },
        params={"algo.training.w_reward": {"values": [0.8, 0.85]}},
    )
    space = build_search_space(s, s.base_raw())
    ps = param_space(s, space, s.base_raw())
    assert len(ps[WEIGHTS_KEY]["grid_search"]) == 2 and ps["algo.training.w_reward"]["grid_search"] == [
        0.8,
        0.85,
    ]
    assert expected_trials(s, ps) == 2 * 2 + 1
    point = default_point(s, space)
    assert space.overrides(point)["rewards.layers.execution.weight"] == 0.4
    assert space.overrides(
        {WEIGHTS_KEY: ps[WEIGHTS_KEY]["grid_search"][1], "algo.training.w_reward": 0.8}
    ) == {
        "rewards.layers.execution.weight": 0.5,
        "rewards.layers.efficiency.weight": 0.05,
        "algo.training.w_reward": 0.8,
    }
    with pytest.raises(SettingsError, match="must sum"):
        bad = make(
            searcher="grid", reward_weights={"layers": ["execution", "efficiency"], "points": [[0.5, 0.5]]}
        )
        build_search_space(bad, bad.base_raw())


def test_random_space_uses_categories_for_values() -> None:
    s = make(
        searcher="random", reward_weights=None, params={"algo.training.w_reward": {"values": [0.7, 0.8]}}
    )
    ps = param_space(s, build_search_space(s, s.base_raw()), s.base_raw())
    assert isinstance(ps["algo.training.w_reward"], Categorical)


def test_cli_overrides_reach_the_sweep_and_its_experiment(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(make().model_dump_json())
    s = load_sweep(path, {"num_samples": 3, "overrides.stages.rl.iterations": 5})
    assert s.num_samples == 3 and s.overrides["stages.rl.iterations"] == 5 and "rewards" in s.overrides
    assert ExperimentSettings.model_validate(s.base_raw()).stages.rl.iterations == 5


def test_cli_dry_run_prints_the_plan_and_rejects_a_training_reward_objective(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    r = CliRunner().invoke(app, ["sweep", "--config", "tune_sweeps/reward_weights_mobo.yaml", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "8 trials" in r.output and "w.execution=0.4" in r.output and "execution [0.4, 0.8]" in r.output
    r = CliRunner().invoke(
        app,
        [
            "sweep",
            "--config",
            "tune_sweeps/reward_weights_mobo.yaml",
            "--set",
            "objectives=[train_return]",
            "--dry-run",
        ],
    )
    assert r.exit_code == 2 and "not a validation metric" in r.output


def test_tuner_settings_for_each_searcher_and_asha_on_one_objective() -> None:
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.basic_variant import BasicVariantGenerator
    from ray.tune.search.optuna import OptunaSearch

    from agentic_ray.sweeps.sweep_runner import build_tune_config

    mobo = make(objectives=["completion", "high_risk_share"], num_samples=3)
    tc = build_tune_config(mobo, build_search_space(mobo, mobo.base_raw()), mobo.base_raw(), 4)
    assert isinstance(tc.search_alg, OptunaSearch) and tc.metric is None and tc.scheduler is None
    assert tc.search_alg._metric == ["val/completion", "val/high_risk_share"]
    assert tc.search_alg._mode == ["max", "min"]
    assert tc.search_alg._points_to_evaluate  # the default trial goes first

    asha = make(
        searcher="random",
        objectives=["completion"],
        scheduler={"name": "asha", "grace_period": 1},
        overrides={"rewards": REWARDS, "stages.rl.iterations": 6, "eval.every": 2},
    )
    tc = build_tune_config(asha, build_search_space(asha, asha.base_raw()), asha.base_raw(), 5)
    assert isinstance(tc.search_alg, BasicVariantGenerator) and isinstance(tc.scheduler, ASHAScheduler)
    assert (tc.metric, tc.mode) == ("val/completion", "max")
    assert tc.scheduler._max_t == 3  # evaluations at RL iterations 2, 4 and 6
