"""``build_algo_config``: an AAAC experiment run with ``--set algo.name=ppo`` (the README's command) builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentic_ray.algorithms.build import build_algo_config
from agentic_ray.settings import load_settings

QUICKSTART = Path(__file__).resolve().parents[3] / "configs" / "quickstart.yaml"


def test_ppo_on_an_aaac_experiment_leaves_out_the_aaac_settings(caplog) -> None:
    s = load_settings(QUICKSTART, {"algo.name": "ppo", "wandb.mode": "disabled"})
    assert "w_reward" in s.algo.training
    cfg = build_algo_config(s)
    assert type(cfg).__name__ == "PPOConfig" and not hasattr(cfg, "w_reward")
    assert cfg.lr == s.algo.lr
    assert "w_reward" in caplog.text and "left out" in caplog.text


def test_aaac_still_refuses_an_unknown_training_key() -> None:
    s = load_settings(QUICKSTART, {"algo.training.w_rewrd": 0.5, "wandb.mode": "disabled"})
    with pytest.raises(TypeError, match="w_rewrd"):
        build_algo_config(s)
