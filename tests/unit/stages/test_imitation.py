"""The reflection stage's correction imitation trains at ``stages.reflection.correction_lr`` (imitation's lr when
unset)."""

from __future__ import annotations

from typing import Any

import pytest

from agentic_ray.settings import ExperimentSettings
from agentic_ray.stages import imitation


@pytest.mark.parametrize(("correction_lr", "expected"), [(None, 0.002), (1e-4, 1e-4)])
def test_correction_imitation_lr(
    monkeypatch: pytest.MonkeyPatch, correction_lr: float | None, expected: float
) -> None:
    seen: dict[str, Any] = {}

    def fake_cloning(module: Any, demos: list[Any], **kwargs: Any) -> dict[str, Any]:
        seen.update(kwargs)
        return {"nll": [0.0], "samples": 0}

    monkeypatch.setattr(imitation, "collect_demos", lambda *a, **k: [])
    monkeypatch.setattr(imitation, "behaviour_cloning", fake_cloning)
    s = ExperimentSettings.model_validate(
        {"stages": {"il": {"lr": 0.002}, "reflection": {"correction_lr": correction_lr}}}
    )
    imitation.imitate_corrections(None, s, [])
    assert seen["lr"] == expected
