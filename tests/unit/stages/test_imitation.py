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


@pytest.mark.parametrize("freeze", [True, False])
def test_correction_imitation_trains_only_the_heads_with_freeze_encoder(freeze: bool) -> None:
    """``stages.reflection.freeze_encoder``: the correction imitation (real demonstrations, a real module) leaves
    the state encoder's weights as they were and trains the heads; without it the encoder moves too."""
    import torch

    from agentic_ray.algorithms.build import module_spec
    from agentic_ray.envs.agent_task_env import AgentTaskEnv
    from agentic_ray.stages.demos import collect_demos

    s = ExperimentSettings.model_validate(
        {
            "model": {"hidden_dim": 16, "num_layers": 1},
            "stages": {
                "il": {"minibatch_size": 32},
                "reflection": {"correction_demos": 2, "correction_epochs": 1, "freeze_encoder": freeze},
            },
        }
    )
    torch.manual_seed(0)
    env = AgentTaskEnv(s.env)
    module = module_spec(s, env).build()
    env.close()
    encoder = {k: v.clone() for k, v in module.model.encoder.state_dict().items()}
    heads = {k: v.clone() for k, v in module.state_dict().items() if "encoder" not in k}
    demos = collect_demos(s.env, 4, 0.0, seed=0)
    imitation.imitate_corrections(module, s, demos)
    encoder_moved = any(not torch.equal(v, module.model.encoder.state_dict()[k]) for k, v in encoder.items())
    heads_moved = any(not torch.equal(v, module.state_dict()[k]) for k, v in heads.items())
    assert heads_moved
    assert encoder_moved is not freeze
    assert all(p.requires_grad for p in module.model.encoder.parameters())  # unfrozen again afterwards
