"""Pool settings: validation, weights and the execution-weight warning."""

from __future__ import annotations

import warnings

import pytest
from pydantic import ValidationError

from agentic_ray.rewards.reward_pool_config import LayerConfig, RewardPoolConfig


def test_defaults_cover_all_layers_and_weights():
    cfg = RewardPoolConfig()
    assert set(cfg.enabled_layers()) == {
        "execution",
        "efficiency",
        "risk",
        "plan",
        "user_experience",
        "long_term_value",
        "judge",
    }
    assert cfg.weight("execution") == 0.4
    assert cfg.normalize_mode("execution") == "scale" and cfg.normalize_mode("judge") == "standard"
    reward_weights = sum(cfg.weight(n) for n in cfg.enabled_layers() if n != "risk")
    assert reward_weights == pytest.approx(1.0)


def test_low_execution_weight_warns():
    with pytest.warns(UserWarning, match="execution layer weight 0.3"):
        RewardPoolConfig(layers={"execution": LayerConfig(weight=0.3), "judge": LayerConfig()})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RewardPoolConfig(layers={"execution": LayerConfig(weight=0.5)})
    # without the layer the warning says it is off, not that its weight is 0
    with pytest.warns(UserWarning, match="the execution layer is off: seed 000"):
        RewardPoolConfig(layers={"task_outcome": LayerConfig()})
    with pytest.warns(UserWarning, match="the execution layer is off"):
        RewardPoolConfig(layers={"execution": LayerConfig(enabled=False), "task_outcome": LayerConfig()})


def test_invalid_settings_are_errors():
    with pytest.raises(ValidationError, match="unknown reward layers"):
        RewardPoolConfig(layers={"execution": LayerConfig(), "sentiment": LayerConfig()})
    with pytest.raises(ValidationError):
        RewardPoolConfig(max_pendng_episodes=5)
    with pytest.raises(ValidationError, match="reward-stream"):
        RewardPoolConfig(layers={"risk": LayerConfig()})
