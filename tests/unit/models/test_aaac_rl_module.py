"""AAACRLModule without a Ray cluster: modes, masking from OBS, inference-only state, debug outputs, RLlib
distribution contract."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from ray.rllib.core.columns import Columns

from agentic_ray.algorithms.aaac.two_critic_api import check_parameter_groups
from agentic_ray.graph_spec import ROOT_CAUSES, observation_space
from agentic_ray.models.aaac_rl_module import DEBUG_OUTPUTS, AAACRLModule
from agentic_ray.models.skill_argument_distribution import SkillArgumentDistribution
from tests.unit.models.helpers import TINY, toy_batch


def _module(prototype: bool = False, inference_only: bool = False, **extra) -> AAACRLModule:
    spec, layout, _ = toy_batch(1)
    torch.manual_seed(0)
    return AAACRLModule(
        observation_space=observation_space(spec, layout),
        action_space=layout.prototype_action_space() if prototype else layout.action_space(),
        inference_only=inference_only,
        model_config={
            "graph_spec": spec,
            "action_layout": layout,
            "vf_share_layers": False,  # added by PPOConfig; must be ignored
            **TINY.model_dump(),
            "device": "cpu",
            **extra,
        },
    )


def test_structured_mode_round_trip_through_the_distribution() -> None:
    _, layout, obs = toy_batch(12, seed=1)
    module = _module()
    out = module.forward_exploration({Columns.OBS: obs})
    dist_cls = module.get_exploration_action_dist_cls()
    assert issubclass(dist_cls, SkillArgumentDistribution)
    assert out[Columns.ACTION_DIST_INPUTS].shape == (12, dist_cls.required_input_dim(layout.action_space()))
    dist = dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS])
    action = dist.sample()
    assert set(action) == {"skill", "pointer", "members", "enum", "source", "numeric"}
    assert layout.action_space().contains({k: v[0].numpy() for k, v in action.items()})
    assert (obs["skill_mask"].gather(1, action["skill"][:, None]) == 1).all()
    logp = dist.logp(action)
    assert logp.shape == (12,) and torch.isfinite(logp).all() and (logp < 0).all()
    greedy = dist.to_deterministic().sample()
    torch.testing.assert_close(
        greedy["skill"], out[Columns.ACTION_DIST_INPUTS][:, : layout.num_skills].argmax(-1)
    )
    assert torch.isfinite(dist.kl(dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS] * 0.5))).all()


def test_prototype_mode_chooses_a_prototype_then_its_entities() -> None:
    """Prototype mode acts over ``layout.prototype_layout()``: a masked prototype, then the entity arguments of its
    skill (the policy's choice among the revealed entities); any other action space is refused."""
    _, layout, obs = toy_batch(12, seed=2)
    module = _module(prototype=True)
    pl = layout.prototype_layout()
    out = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    dist = module.get_inference_action_dist_cls().from_logits(out)
    assert torch.equal(dist.parts.skill > -1e8, obs["proto_mask"] == 1)
    a = dist.sample()
    assert module.action_space.contains(
        {k: v[0].numpy() for k, v in a.items()} | {"skill": int(a["skill"][0])}
    )
    for b in range(12):
        k = layout.prototype_skills[int(a["skill"][b])]
        for i in range(len(pl.skills[int(a["skill"][b])].pointer_types)):
            assert obs["pointer_mask"][b, k, i, a["pointer"][b, i]] == 1
    with pytest.raises(ValueError):
        spec, layout, _ = toy_batch(1)
        AAACRLModule(
            observation_space=observation_space(spec, layout),
            action_space=gym.spaces.Discrete(layout.num_prototypes),
            model_config={"graph_spec": spec, "action_layout": layout},
        )


def test_critics_reflection_and_parameter_groups() -> None:
    _, _, obs = toy_batch(5, seed=3)
    module = _module()
    batch = {Columns.OBS: obs}
    train = module.forward_train(batch)
    v = module.compute_values(batch)
    torch.testing.assert_close(module.compute_values(batch, embeddings=train[Columns.EMBEDDINGS]), v)
    assert v.shape == module.compute_risk_values(batch).shape == (5,)
    assert not torch.allclose(v, module.compute_risk_values(batch))
    assert module.compute_reflection_logits(batch).shape == (5, len(ROOT_CAUSES))
    check_parameter_groups(module)
    check_parameter_groups(_module(separate_critic_encoders=True))


def test_inference_only_module_drops_critics_and_loads_learner_weights() -> None:
    _, _, obs = toy_batch(6, seed=4)
    learner_module = _module(reflection_source="oracle_env")
    env_module = _module(inference_only=True, reflection_source="oracle_env")
    assert not hasattr(env_module.model, "reward_critic") and env_module.model.reflection_head is None
    state = learner_module.get_state(inference_only=True)
    assert not any("critic" in k or "reflection" in k for k in state)
    assert len(state) == len(env_module.state_dict())
    env_module.set_state(state)
    batch = {Columns.OBS: obs}
    torch.testing.assert_close(
        env_module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS],
        learner_module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS],
    )


def test_debug_outputs_by_flag_and_by_kwarg() -> None:
    _, layout, obs = toy_batch(4, seed=5)
    module = _module()
    assert DEBUG_OUTPUTS not in module.forward_inference({Columns.OBS: obs})
    dbg = module.forward_inference({Columns.OBS: obs}, debug_outputs=True)[DEBUG_OUTPUTS]
    torch.testing.assert_close(dbg["skill_probs"].sum(-1), torch.ones(4))
    assert (
        dbg["top_skills"].shape == (4, 3)
        and (dbg["top_skill_probs"][:, :-1] >= dbg["top_skill_probs"][:, 1:]).all()
    )
    assert dbg["pointer_probs"].shape == (4, layout.pointer_slots, layout.pointer_choices)
    assert dbg["member_probs"].shape == (4, layout.list_slots, layout.max_pointer)
    assert dbg["source_probs"].shape == (4, layout.numeric_slots, layout.num_sources + 1)
    assert "layer0/a__calls__tool" in dbg["attention"] and "layer1/tool__rev_calls__a" in dbg["gates"]
    flagged = _module(debug_outputs=True).forward_inference({Columns.OBS: obs})
    assert "prototype_probs" not in flagged[DEBUG_OUTPUTS] and "gates" in flagged[DEBUG_OUTPUTS]


def test_model_config_errors_are_explicit() -> None:
    with pytest.raises(ValueError):
        _module(hidden_sise=3)
    spec, layout, _ = toy_batch(1)
    with pytest.raises(ValueError, match="graph_spec"):
        AAACRLModule(
            observation_space=observation_space(spec, layout),
            action_space=layout.action_space(),
            model_config={},
        )


def test_an_env_runner_copy_samples_through_the_inference_path(monkeypatch) -> None:
    """An inference-only module (an EnvRunner's copy) is in eval mode from the start, so exploration runs the
    inference path (not RLlib's eval/train switch around the training path on every step); its logits equal the
    training path's, and they are ordinary tensors: a loss may use them beside a tensor with a gradient, as the
    learner's KL anchor to the frozen reference policy does."""
    from agentic_ray.models.inference_policy import InferencePolicy

    _, _, obs = toy_batch(6, seed=3)
    module = _module(inference_only=True)
    assert not module.training
    calls = []
    original = InferencePolicy.__call__

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(InferencePolicy, "__call__", counted)
    with torch.no_grad():
        got = module.forward_exploration({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    assert calls, "exploration did not run the inference path"
    want = module.model.policy_logits(obs, module.model.encode(obs))["packed"].detach()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert not got.is_inference()
    live = _module()  # a trained copy of the same weights, with a gradient
    logits = live.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    dist_cls = module.get_exploration_action_dist_cls()
    dist_cls.from_logits(got).kl(dist_cls.from_logits(logits)).mean().backward()
    assert any(p.grad is not None for p in live.parameters())
