"""The multimodal state (issue 30): image and text blocks from the schema, per-modality sub-encoders, gated
cross-attention fusion with the task text as query, and the gates' monitoring. Real inspection observations (a
listing reveals the frames, a detection the focus mask, an OCR read the serial's tokens)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from agentic_ray.dashboard.panels import gate_warnings
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.graph_spec import SESSION_NODE_TYPE, TASK_TEXT, specs_from_dict, specs_to_dict
from agentic_ray.keys import MODALITY_GATE_MEANS, MODALITY_KINDS
from agentic_ray.models.aaac_model import AAACModel, AAACModelConfig
from agentic_ray.models.multimodal_node_encoder import MultimodalNodeEncoder, gate_means
from agentic_ray.models.obs_batching import stack_observations
from agentic_ray.text.tokens import VOCAB, hash_tokens, ids_from_columns

TINY = AAACModelConfig(hidden_dim=32, num_heads=4, num_layers=1, ffn_mult=0, device="cpu")


@functools.cache
def _episode() -> tuple[AgentTaskEnv, list[dict[str, np.ndarray]], list[str]]:
    """One top_cracks episode by the expert: the observation after each step and the skill of each step."""
    env = AgentTaskEnv({"domain": "inspection", "families": ["top_cracks"]})
    obs, _ = env.reset(seed=3)
    rows, skills = [obs], []
    expert = env.domain.expert()
    for _ in range(12):
        skill, params = expert.plan(env.view())
        obs, _r, term, trunc, _info = env.step(env.encode_action(skill, params))
        rows.append(obs)
        skills.append(skill)
        if term or trunc:
            break
    return env, rows, skills


def _block(env: AgentTaskEnv, field: str):  # type: ignore[no-untyped-def]
    return next(b for b in env.graph_spec.modalities if b.field == field)


def _model(env: AgentTaskEnv, **update: object) -> AAACModel:
    torch.manual_seed(0)
    return AAACModel(env.graph_spec, env.layout, TINY.model_copy(update=update)).eval()


def test_tokens_are_hashed_deterministically_and_survive_the_observation_columns() -> None:
    ids, w = hash_tokens("Line L-82: find 2 cracks", 8)
    assert ids.tolist()[:7] == hash_tokens("line l-82: FIND 2 cracks", 8)[0].tolist()[:7]
    assert (ids[:8] > 0).sum() == 8 and ids.max() < VOCAB  # line l - 8 2 : find 2 (truncated at 8)
    assert w.sum() == pytest.approx(1.0)
    ids2, w2 = hash_tokens("a b", 4)
    assert ids2[2:].tolist() == [0, 0] and w2.tolist() == [0.5, 0.5, 0.0, 0.0]
    cols = (ids / VOCAB).astype(np.float32)
    assert ids_from_columns(cols).tolist() == ids.tolist()


def test_the_schema_declares_image_and_text_blocks_and_the_spec_keeps_them() -> None:
    env, _rows, _ = _episode()
    spec = env.graph_spec
    kinds = {(b.node_type, b.field): (b.kind, b.size) for b in spec.modalities}
    assert kinds == {
        ("part", "frame"): ("image", 16),
        ("part", "serial"): ("text", 8),
        (SESSION_NODE_TYPE, TASK_TEXT): ("text", 24),
    }
    frame = _block(env, "frame")
    assert frame.end - frame.start == 2 * 16 * 16
    struct = spec.struct_columns("part")
    assert not set(struct) & set(range(frame.start, frame.end))
    assert frame.known in struct  # whether the frame is revealed is a structured column
    assert specs_from_dict(specs_to_dict(spec, env.layout))[0] == spec


def test_the_observation_holds_the_frame_its_focus_mask_and_the_task_text() -> None:
    env, rows, skills = _episode()
    frame, task = _block(env, "frame"), _block(env, TASK_TEXT)
    n = 16 * 16
    first = rows[0]["part_x"]
    assert not first[:, frame.known].any()  # nothing is shown before the listing
    listed = rows[1 + skills.index("line.list_parts")]["part_x"]
    real = rows[1]["part_mask"].astype(bool)
    assert listed[real, frame.known].all()
    pixels = listed[real, frame.start : frame.start + n]
    assert 0.2 < pixels.mean() < 0.8 and pixels.std() > 0.05  # a frame, not a constant
    assert (listed[real, frame.start + n : frame.end] == 1).all()  # no focus yet: attend everywhere
    detected = rows[1 + skills.index("detect")]["part_x"]
    focus = detected[real, frame.start + n : frame.end]
    assert ((focus == 0) | (focus == 1)).all()
    # one part inspected: its mask is its reported boxes (zeros elsewhere), the others still attend everywhere
    assert (~(focus == 1).all(axis=1)).sum() == 1
    ids, _w = hash_tokens(env.task.request.text, task.size)
    sess = rows[0]["session_x"][0]
    assert sess[task.known] == 1
    assert ids_from_columns(sess[task.start : task.start + task.size]).tolist() == ids.tolist()


def test_each_modality_has_its_own_sub_encoder_and_the_flat_ablation_has_none() -> None:
    env, rows, _ = _episode()
    gated, flat = _model(env), _model(env, modality_fusion="flat")
    enc = gated.encoder.multimodal["part"]
    assert isinstance(enc, MultimodalNodeEncoder)
    assert enc.names == ["struct", "image:frame", "text:serial"]
    assert isinstance(enc.images["frame"].net[0], torch.nn.Conv2d)
    assert isinstance(enc.text.bag, torch.nn.EmbeddingBag)
    assert isinstance(enc.attention, torch.nn.MultiheadAttention)
    assert "part" not in gated.encoder.input_proj and "part" in flat.encoder.input_proj
    assert len(flat.encoder.multimodal) == 0
    obs = stack_observations(rows)
    with torch.no_grad():
        a, b = gated.encode(obs), flat.encode(obs)
    assert a.state.shape == b.state.shape == (len(rows), 32)
    assert a.modality_gates and not b.modality_gates
    # every sub-encoder reaches the state: gradients flow into the CNN, the token table and the query
    gated.train()
    gated.encode(obs).state.square().sum().backward()
    for p in (
        enc.images["frame"].net[0].weight,
        enc.text.bag.weight,
        gated.encoder.task_query.proj[0].weight,
    ):
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_gates_respond_to_their_modality() -> None:
    """Zeroing a modality's input moves its gate (and not a modality the node has not revealed)."""
    env, rows, skills = _episode()
    model = _model(env)
    obs = stack_observations(rows)
    frame, serial, task = _block(env, "frame"), _block(env, "serial"), _block(env, TASK_TEXT)

    def gates(o: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return model.encode(o).modality_gates

    base = gates(obs)
    image_gate = base["modality/part/image:frame"]
    listed = 1 + skills.index("line.list_parts")
    assert torch.isnan(image_gate[0]).all()  # no frame revealed before the listing: no gate
    assert not torch.isnan(image_gate[listed][obs["part_mask"][listed].bool()]).any()

    no_pixels = {k: v.clone() for k, v in obs.items()}
    no_pixels["part_x"][..., frame.start : frame.end] = 0.0
    moved = gates(no_pixels)
    shown = ~torch.isnan(image_gate)
    assert (moved["modality/part/image:frame"][shown] - image_gate[shown]).abs().max() > 1e-3
    torch.testing.assert_close(moved["modality/part/struct"], base["modality/part/struct"], equal_nan=True)

    no_query = {k: v.clone() for k, v in obs.items()}
    no_query["session_x"][..., task.start : task.end] = 0.0
    moved = gates(no_query)
    t = "modality/session/text:task_text"
    assert (moved[t] - base[t]).abs().max() > 1e-3

    read = [i for i, s in enumerate(skills) if s == "ocr_extract"]
    no_serial = {k: v.clone() for k, v in obs.items()}
    no_serial["part_x"][..., serial.start : serial.end] = 0.0
    s = "modality/part/text:serial"
    if read:  # the serial's gate exists only where it was read
        assert (gates(no_serial)[s] - base[s]).abs().nan_to_num().max() > 1e-3
    else:
        assert torch.isnan(base[s]).all()


def test_gate_means_are_logged_by_forward_train_and_low_gates_are_reported() -> None:
    from ray.rllib.core.columns import Columns

    from agentic_ray.models.aaac_rl_module import AAACRLModule

    env, rows, _ = _episode()
    torch.manual_seed(0)
    module = AAACRLModule(
        observation_space=None,
        action_space=env.layout.action_space(),
        model_config={"graph_spec": env.graph_spec, "action_layout": env.layout, **TINY.model_dump()},
    )
    obs = stack_observations(rows)
    out = module.forward_train({Columns.OBS: obs})
    means = out[MODALITY_GATE_MEANS]
    assert means.shape == (len(MODALITY_KINDS),)
    assert bool(((means > 0) & (means < 1)).all())
    with torch.no_grad():
        enc = module.model.encode(obs)
    named = gate_means(enc.modality_gates, enc.node_masks)
    for kind, v in zip(MODALITY_KINDS, means.tolist(), strict=True):
        assert named[f"gate_{kind}"] == pytest.approx(v, abs=1e-6)
    assert gate_warnings({"gate_image": 0.05, "gate_text": 0.4, "entropy": 0.01}) == [
        "gate_image = 0.050 < 0.1: the encoder for the image modality is not used"
    ]


def test_argument_task_context_feeds_the_task_text_to_the_argument_heads() -> None:
    """With ``argument_task_context`` the encoder's task text reaches the argument heads directly: moving only
    ``enc.task`` (state and nodes fixed) moves the numeric means and not the skill logits; without it, it moves
    nothing; with the flat fusion too. (The inference path covers it: ``test_inference_policy.py``.)"""
    from dataclasses import replace

    env, rows, _skills = _episode()
    obs = stack_observations(rows)
    for on in (True, False):
        model = _model(env, argument_task_context=on)
        with torch.no_grad():
            enc = model.encode(obs)
            assert enc.task is not None and enc.task.shape == enc.state.shape
            base = model.policy_logits(obs, enc)["parts"]
            moved = model.policy_logits(obs, replace(enc, task=enc.task + 1.0))["parts"]
        torch.testing.assert_close(moved.skill, base.skill)
        delta = (moved.numeric_mean - base.numeric_mean).abs().max()
        if on:
            assert delta > 1e-3, delta
        else:
            assert delta == 0.0
    with pytest.raises(ValueError, match="argument_task_context"):
        AAACModelConfig(**(TINY.model_dump() | {"encoder": "flat", "argument_task_context": True}))
    # The flat fusion ablation (issue 30's comparison) keeps the option: the task text gets its own encoder.
    flat = _model(env, modality_fusion="flat", argument_task_context=True)
    with torch.no_grad():
        enc = flat.encode(obs)
        assert not len(flat.encoder.multimodal) and enc.task is not None
        moved = flat.policy_logits(obs, replace(enc, task=enc.task + 1.0))["parts"].numeric_mean
        assert (moved - flat.policy_logits(obs, enc)["parts"].numeric_mean).abs().max() > 1e-3


def test_only_the_policy_encoder_encodes_the_task_for_the_argument_heads() -> None:
    """Critic encoders read no task context: under the flat fusion they build no text encoder of their own (one
    would never be trained), while the policy's encoder does."""
    env = AgentTaskEnv({"domain": "inspection"})
    model = _model(
        env,
        modality_fusion="flat",
        argument_task_context=True,
        separate_critic_encoders=True,
        critics_share_encoder=False,
    )
    assert model.encoder.task_query is not None
    for which in ("reward_critic", "risk_critic"):
        assert model.critic_encoder(which).task_query is None, which
