"""Reflection input and loss: env vs predicted source, the CU ablation switch, the cross-entropy, inference-only
parity with a predicted reflection input."""

from __future__ import annotations

import pytest
import torch
from ray.rllib.core.columns import Columns

from agentic_ray.graph_spec import EVIDENCE_FLAGS, FAILURE_CODE_CLASSES, ROOT_CAUSES, observation_space
from agentic_ray.models import AAACModel
from agentic_ray.models.aaac_rl_module import (
    EVIDENCE_DROPOUT,
    EVIDENCE_ENABLED,
    REFLECTION_DROPOUT,
    REFLECTION_EMBEDDINGS,
    REFLECTION_ENABLED,
    AAACRLModule,
)
from agentic_ray.models.reflection import readout_with_reflection, reflection_loss
from agentic_ray.models.skill_argument_functional import (
    PackedActionLayout,
    skill_argument_logp,
    skill_argument_sample,
)
from tests.unit.models.helpers import TINY, toy_batch

C = len(ROOT_CAUSES)


FAILED = EVIDENCE_FLAGS.index("failed")


def _batch(n: int = 8, seed: int = 0, failed_every: int = 2) -> tuple:
    """Toy batch whose every ``failed_every``-th row failed: its reflection label is a one-hot and its failure
    evidence has the ``failed`` flag and a result-code class; zeros elsewhere."""
    spec, layout, obs = toy_batch(n, seed=seed)
    refl = torch.zeros(n, C)
    ev = torch.zeros_like(obs["failure_evidence"])
    rows = torch.arange(0, n, failed_every) if failed_every else torch.arange(0, dtype=torch.long)
    refl[rows, rows % C] = 1.0
    ev[rows, FAILED] = 1.0
    ev[rows, len(EVIDENCE_FLAGS) + rows % len(FAILURE_CODE_CLASSES)] = 1.0
    obs["reflection"], obs["failure_evidence"] = refl, ev
    return spec, layout, obs


def _ablated(obs: dict) -> dict:
    """The observation of a step without a failure: no label, no evidence."""
    return {
        **obs,
        "reflection": torch.zeros_like(obs["reflection"]),
        "failure_evidence": torch.zeros_like(obs["failure_evidence"]),
    }


def _model(spec, layout, source: str, encoder: str = "gnn", head_input: str = "evidence", **kw) -> AAACModel:
    torch.manual_seed(0)
    update = {"encoder": encoder, "reflection_source": source, "reflection_head_input": head_input}
    return AAACModel(spec, layout, TINY.model_copy(update=update), **kw)


def _module(source: str, inference_only: bool = False, head_input: str = "evidence", **extra) -> AAACRLModule:
    spec, layout, _ = toy_batch(1)
    torch.manual_seed(0)
    return AAACRLModule(
        observation_space=observation_space(spec, layout),
        action_space=layout.action_space(),
        inference_only=inference_only,
        model_config={
            "graph_spec": spec,
            "action_layout": layout,
            **TINY.model_dump(),
            "device": "cpu",
            "reflection_source": source,
            "reflection_head_input": head_input,
            **extra,
        },
    )


def test_split_readout_equals_the_concatenated_one() -> None:
    torch.manual_seed(0)
    readout = torch.nn.Sequential(torch.nn.Linear(10 + C, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))
    x, r = torch.randn(5, 10), torch.rand(5, C)
    full, free = readout_with_reflection(readout, x, r)
    assert free is None
    split, free = readout_with_reflection(readout, x, reflection_fn=lambda _: r)
    torch.testing.assert_close(split, full)
    torch.testing.assert_close(free, readout(torch.cat([x, torch.zeros(5, C)], -1)))


@pytest.mark.parametrize(
    ("encoder", "head_input"), [("gnn", "evidence"), ("flat", "evidence"), ("gnn", "evidence_and_state")]
)
def test_predicted_input_follows_the_head_not_the_label(encoder: str, head_input: str) -> None:
    spec, layout, obs = _batch(8)
    failed = obs["failure_evidence"][:, FAILED] > 0
    model = _model(spec, layout, "predicted", encoder, head_input)
    with torch.no_grad():
        enc = model.encode(obs)
        # No label leak: which root cause the env wrote does not matter, only that the last step failed.
        relabelled = {**obs, "reflection": obs["reflection"].roll(1, dims=-1)}
        torch.testing.assert_close(model.encode(relabelled).state, enc.state)
        torch.testing.assert_close(model.reflection_logits(relabelled), model.reflection_logits(obs))
        if head_input == "evidence_and_state":  # the head reads the state of an all-zero reflection obs
            assert enc.reflection_free_state is not None
            torch.testing.assert_close(enc.reflection_free_state, model.encode(_ablated(obs)).state)
        else:  # the head reads the evidence alone
            assert model.reflection_input(obs).shape == obs["failure_evidence"].shape
        # The evidence is what the head reads: other evidence, another diagnosis (and another state on failed rows).
        other = {**obs, "failure_evidence": obs["failure_evidence"].roll(1, dims=-1)}
        other["failure_evidence"][:, FAILED] = obs["failure_evidence"][:, FAILED]
        assert not torch.allclose(
            model.reflection_logits(other)[failed], model.reflection_logits(obs)[failed]
        )
        # Changing the head changes the policy's state on failed rows only.
        model.reflection_head[-1].bias.copy_(torch.arange(C, dtype=torch.float32) * 5.0)
        changed = model.encode(obs).state
    moved = (changed - enc.state).abs().amax(-1) > 1e-5
    assert torch.equal(moved, failed)


@pytest.mark.parametrize("source", ["oracle_env", "predicted"])
def test_the_three_correction_conditions_are_distinct_inputs(source: str) -> None:
    """With the diagnosis; with the same evidence and the diagnosis withheld (CU's "off"); with neither (the
    evidence uplift's "off", which equals a step without a failure)."""
    _, _, obs = _batch(8, seed=1)
    module = _module(source)
    batch = {Columns.OBS: obs}
    fwd = module.forward_inference
    on = fwd(batch)[Columns.ACTION_DIST_INPUTS]
    evidence_only = fwd(batch, **{REFLECTION_ENABLED: False})[Columns.ACTION_DIST_INPUTS]
    neither = fwd(batch, **{EVIDENCE_ENABLED: False})[Columns.ACTION_DIST_INPUTS]
    torch.testing.assert_close(neither, fwd({Columns.OBS: _ablated(obs)})[Columns.ACTION_DIST_INPUTS])
    assert not torch.allclose(on, evidence_only) and not torch.allclose(evidence_only, neither)
    # Withheld, the diagnosis's source does not matter (the label, for the oracle); the evidence still does.
    relabelled = {Columns.OBS: {**obs, "reflection": obs["reflection"].roll(1, dims=-1)}}
    torch.testing.assert_close(
        fwd(relabelled, **{REFLECTION_ENABLED: False})[Columns.ACTION_DIST_INPUTS], evidence_only
    )
    noisy = {Columns.OBS: {**obs, "failure_evidence": torch.ones_like(obs["failure_evidence"])}}
    assert not torch.allclose(
        fwd(noisy, **{REFLECTION_ENABLED: False})[Columns.ACTION_DIST_INPUTS], evidence_only
    )
    torch.testing.assert_close(fwd(noisy, **{EVIDENCE_ENABLED: False})[Columns.ACTION_DIST_INPUTS], neither)
    # The attributes are the same switches; a kwarg overrides them both ways.
    module.reflection_enabled = False
    assert module.model.reflection_enabled is False
    torch.testing.assert_close(fwd(batch)[Columns.ACTION_DIST_INPUTS], evidence_only)
    torch.testing.assert_close(module.forward_exploration(batch)[Columns.ACTION_DIST_INPUTS], evidence_only)
    torch.testing.assert_close(fwd(batch, **{REFLECTION_ENABLED: True})[Columns.ACTION_DIST_INPUTS], on)
    module.reflection_enabled, module.evidence_enabled = True, False
    torch.testing.assert_close(fwd(batch)[Columns.ACTION_DIST_INPUTS], neither)
    module.evidence_enabled = True
    # Dropout (imitation): every row dropped is the ablation, none dropped is the policy as it acts.
    module.eval()
    train = module.forward_train
    torch.testing.assert_close(
        train(batch, **{REFLECTION_DROPOUT: 1.0})[Columns.ACTION_DIST_INPUTS], evidence_only
    )
    torch.testing.assert_close(train(batch, **{EVIDENCE_DROPOUT: 1.0})[Columns.ACTION_DIST_INPUTS], neither)
    torch.testing.assert_close(train(batch)[Columns.ACTION_DIST_INPUTS], on)


def test_without_the_evidence_channel_the_evidence_reaches_the_policy_only_through_the_diagnosis() -> None:
    """``evidence_to_policy=False``, with the oracle as the reflection source the head is a probe: the evidence
    changes the policy only where there is a diagnosis, through the fix prior (which reads the failed skill), and
    never without one."""
    _, _, obs = _batch(8, seed=5)
    module = _module("oracle_env", evidence_to_policy=False)
    with torch.no_grad():
        for p in module.model.fix_prior.parameters():
            p.normal_()
    noisy_evidence = {**obs, "failure_evidence": torch.ones_like(obs["failure_evidence"])}
    no_diagnosis = {**obs, "reflection": torch.zeros_like(obs["reflection"])}
    torch.testing.assert_close(
        module.forward_inference({Columns.OBS: {**noisy_evidence, "reflection": no_diagnosis["reflection"]}})[
            Columns.ACTION_DIST_INPUTS
        ],
        module.forward_inference({Columns.OBS: no_diagnosis})[Columns.ACTION_DIST_INPUTS],
    )
    with torch.no_grad():
        for p in module.model.fix_prior.parameters():
            p.zero_()
    torch.testing.assert_close(
        module.forward_inference({Columns.OBS: noisy_evidence})[Columns.ACTION_DIST_INPUTS],
        module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS],
    )


@pytest.mark.parametrize("source", ["oracle_env", "predicted"])
def test_the_fix_prior_moves_the_skill_logits_of_diagnosed_failures_only(source: str) -> None:
    """The fix prior (diagnosed cause x failed skill -> next skill) starts at zero, then moves exactly the skill
    logits of rows with a diagnosis, by the table entry of their cause and failed skill, and nothing when the
    reflection input is off (the CU ablation)."""
    _, layout, obs = _batch(8, seed=3)
    k = layout.num_skills
    failed_skill = torch.arange(8) % k
    obs["failure_evidence"][:, -k:] = 0.0
    obs["failure_evidence"][torch.arange(8), -k + failed_skill] = obs["failure_evidence"][:, FAILED]
    module = _module(source)
    module.eval()
    batch = {Columns.OBS: obs}
    base = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS]
    off = module.forward_inference(batch, **{REFLECTION_ENABLED: False})[Columns.ACTION_DIST_INPUTS]
    with torch.no_grad():
        for p in module.model.fix_prior.parameters():
            p.normal_()
    moved = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS]
    torch.testing.assert_close(
        module.forward_inference(batch, **{REFLECTION_ENABLED: False})[Columns.ACTION_DIST_INPUTS], off
    )
    failed = obs["failure_evidence"][:, FAILED] > 0
    delta = moved[:, :k] - base[:, :k]
    unmasked = obs["skill_mask"] > 0
    assert torch.all(delta[~failed] == 0)
    assert torch.all(delta[failed][unmasked[failed]].abs() > 0)
    if source == "oracle_env":  # the diagnosis is the label: the prior is exactly its table column
        from agentic_ray.models.aaac_model import FIX_PRIOR_GAIN

        cause = obs["reflection"].argmax(-1)
        fp = module.model.fix_prior
        retry = torch.nn.functional.one_hot(failed_skill, k).float() * fp.cause_retry[cause].unsqueeze(-1)
        want = FIX_PRIOR_GAIN * (fp.cause_skill[cause] + retry + fp.table[cause * k + failed_skill])
        torch.testing.assert_close(delta[failed & unmasked.all(-1)], want[failed & unmasked.all(-1)])


@pytest.mark.parametrize("source", ["oracle_env", "predicted"])
def test_reflection_loss_is_finite_masked_and_trains_the_head(source: str) -> None:
    """With a head that reads the state too (the loss can reach the encoder); see the next test for the default."""
    _, _, obs = _batch(8, seed=2)
    module = _module(source, head_input="evidence_and_state")
    out = module.forward_train({Columns.OBS: obs})
    loss, stats = reflection_loss(module, obs, embeddings=out[REFLECTION_EMBEDDINGS])
    assert loss.ndim == 0 and torch.isfinite(loss) and loss > 0
    assert int(stats["reflection_labelled_rows"]) == 4
    assert 0.0 <= float(stats["reflection_accuracy"]) <= 1.0
    # Same value when the module encodes by itself, and from the plain model.
    torch.testing.assert_close(reflection_loss(module, obs)[0], loss)
    torch.testing.assert_close(reflection_loss(module.model, obs)[0], loss)
    loss.backward()
    head = list(module.model.reflection_head.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.model.encoder.parameters())
    # train_encoder=False: same value, but only the head learns (what the AAAC learner does by default).
    module.zero_grad()
    head_only, _ = reflection_loss(module, obs, train_encoder=False)
    torch.testing.assert_close(head_only, loss)
    head_only.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head)
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in module.model.encoder.parameters())
    # A row mask (e.g. LOSS_MASK) removes rows.
    mask = torch.zeros(8, dtype=torch.bool)
    mask[0] = True
    assert int(reflection_loss(module, obs, mask=mask)[1]["reflection_labelled_rows"]) == 1

    _, _, clean = _batch(8, seed=2, failed_every=0)
    module.zero_grad()
    zero, stats = reflection_loss(module, clean)
    assert zero.item() == 0.0 and int(stats["reflection_labelled_rows"]) == 0
    assert float(stats["reflection_accuracy"]) == 0.0
    zero.backward()  # differentiable, gradients are zeros
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in head)


def test_a_head_on_the_evidence_alone_trains_only_itself() -> None:
    _, _, obs = _batch(8, seed=6)
    module = _module("predicted")
    loss, stats = reflection_loss(module, obs)
    assert torch.isfinite(loss) and loss > 0 and int(stats["reflection_labelled_rows"]) == 4
    loss.backward()
    assert all(
        p.grad is not None and p.grad.abs().sum() > 0 for p in module.model.reflection_head.parameters()
    )
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in module.model.encoder.parameters())


def test_policy_loss_does_not_train_the_head_through_the_predicted_input() -> None:
    spec, layout, obs = _batch(8, seed=3)
    model = _model(spec, layout, "predicted")
    packed = PackedActionLayout.from_action_layout(layout)
    parts = packed.split(model.policy_logits(obs, model.encode(obs))["packed"])
    action = skill_argument_sample(parts, packed)
    (-skill_argument_logp(parts, packed, action).mean()).backward()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.reflection_head.parameters())


def test_inference_only_module_with_predicted_reflection_keeps_the_head() -> None:
    _, _, obs = _batch(8, seed=4)
    learner_module = _module("predicted")
    env_module = _module("predicted", inference_only=True)
    assert env_module.model.reflection_head is not None
    assert not hasattr(env_module.model, "reward_critic")
    assert "model.reflection_head" not in env_module.get_non_inference_attributes()
    assert "model.reflection_head" in _module("oracle_env").get_non_inference_attributes()
    state = learner_module.get_state(inference_only=True)
    assert any(k.startswith("model.reflection_head.") for k in state)
    assert not any("critic" in k for k in state)
    assert len(state) == len(env_module.state_dict())
    env_module.set_state(state)
    batch = {Columns.OBS: obs}
    for kw in ({}, {REFLECTION_ENABLED: False}):
        torch.testing.assert_close(
            env_module.forward_inference(batch, **kw)[Columns.ACTION_DIST_INPUTS],
            learner_module.forward_inference(batch, **kw)[Columns.ACTION_DIST_INPUTS],
        )
    torch.testing.assert_close(
        env_module.model.reflection_logits(obs), learner_module.compute_reflection_logits(batch)
    )
