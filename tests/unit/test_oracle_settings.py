"""No hidden state reaches the policy by default: every setting resolves ``reflection_source`` to ``predicted``; the
env's root cause is only the explicitly named oracle ``oracle_env``, and the old name ``env`` is an error."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agentic_ray.models.aaac_model import AAACModelConfig
from agentic_ray.settings import ExperimentSettings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_is_the_predicted_diagnosis() -> None:
    assert AAACModelConfig().reflection_source == "predicted" and not AAACModelConfig().uses_oracle
    assert ExperimentSettings().model.reflection_source == "predicted"
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        assert load_settings(path).model.reflection_source == "predicted", path


def test_the_benchmarks_train_without_the_oracle() -> None:
    from benchmarks.aaac_vs_ppo import ARMS, parse, settings_for

    for setting in ("scratch", "imitation"):
        a = parse(["--setting", setting])
        for arm in ARMS:
            assert not settings_for(arm, 0, a).model.uses_oracle, (setting, arm)


def test_the_oracle_is_named_and_the_old_name_is_an_error() -> None:
    assert AAACModelConfig(reflection_source="oracle_env").uses_oracle
    with pytest.raises(ValidationError, match="oracle_env"):
        AAACModelConfig(reflection_source="env")
    with pytest.raises(SettingsError, match="oracle_env"):
        load_settings(ROOT / "configs" / "tiny.yaml", {"model.reflection_source": "env"})
