"""AAACModel: head shapes, masks respected when sampling, node-order invariance, gradients, sizes."""

from __future__ import annotations

import pytest
import torch

from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.models import AAACModel, AAACModelConfig
from agentic_ray.models.skill_argument_functional import (
    PackedActionLayout,
    skill_argument_entropy,
    skill_argument_logp,
    skill_argument_sample,
)
from tests.unit.models.helpers import TINY, permute_nodes, toy_batch


def _model(spec, layout, encoder: str = "gnn", **kw) -> AAACModel:
    torch.manual_seed(0)
    return AAACModel(spec, layout, TINY.model_copy(update={"encoder": encoder}), **kw)


@pytest.mark.parametrize("encoder", ["gnn", "flat"])
def test_every_head_has_the_right_shape(encoder: str) -> None:
    spec, layout, obs = toy_batch(6)
    model = _model(spec, layout, encoder)
    enc = model.encode(obs)
    logits = model.policy_logits(obs, enc)
    k, e, n = layout.num_skills, layout.enum_slots, layout.numeric_slots
    packed = PackedActionLayout.from_action_layout(layout)
    parts = logits["parts"]
    assert logits["skill"].shape == (6, k)
    assert [lg.shape for lg in parts.pointers] == [
        (6, len(g.skills), g.width + 1) for g in packed.pointer_groups
    ]
    assert [lg.shape for lg in parts.sets] == [(6, len(g.skills), g.width) for g in packed.set_groups]
    assert [x.shape for x in parts.seq_items] == [(6, q.length, q.width) for q in packed.sequences]
    assert parts.source.shape == (6, k, n, layout.num_sources + 1)
    assert parts.enum.shape == (6, k, e, layout.enum_max)
    assert parts.numeric_mean.shape == parts.numeric_log_std.shape == (6, k, n)
    assert logits["packed"].shape == (6, packed.total_dim)
    assert model.reward_values(obs, enc).shape == (6,)
    assert model.risk_values(obs, enc).shape == (6,)
    assert model.reflection_logits(obs, enc).shape == (6, len(ROOT_CAUSES))
    proto = _model(spec, layout, encoder, prototype_mode=True)
    pl = layout.prototype_layout()
    pro = proto.policy_logits(obs, proto.encode(obs))
    assert pro["skill"].shape == (6, layout.num_prototypes)
    ppk = PackedActionLayout.from_action_layout(pl)
    assert pro["parts"].pointer_by_slot(ppk).shape == (
        6,
        layout.num_prototypes,
        pl.pointer_slots,
        layout.pointer_choices,
    )
    assert pro["packed"].shape == (6, ppk.total_dim)


def test_masks_in_logits() -> None:
    spec, layout, obs = toy_batch(16, seed=1)
    model = _model(spec, layout)
    logits = model.policy_logits(obs, model.encode(obs))
    packed = model.policy_heads.packed
    parts = logits["parts"]
    pointer = parts.pointer_by_slot(packed)
    assert (logits["skill"][obs["skill_mask"] == 0] < -1e8).all()
    assert (logits["skill"][obs["skill_mask"] == 1] > -1e8).all()
    for k, s in enumerate(layout.skills):
        for i in range(len(s.pointer_types)):
            assert torch.equal(pointer[:, k, i] > -1e8, obs["pointer_mask"][:, k, i] > 0)
        for i in range(s.numeric_count):
            src = parts.source[:, k, i]
            assert (src[:, 0] > -1e8).all()  # a free value is always possible
            assert torch.equal(src[:, 1:] > -1e8, obs["source_mask"][:, : layout.num_sources] > 0)
        for i, size in enumerate(s.enum_sizes):
            assert (parts.enum[:, k, i, size:] < -1e8).all() and (parts.enum[:, k, i, :size] > -1e8).all()
    sets = parts.set_by_slot(packed)
    for g in packed.set_groups:
        for k, i in zip(g.skills, g.slots, strict=True):
            assert torch.equal(sets[:, k, i, : g.width] > -1e8, obs["list_mask"][:, k, i, : g.width] > 0)
    for q, items in zip(packed.sequences, parts.seq_items, strict=True):  # every position has the slot's mask
        valid = obs["list_mask"][:, q.skill, q.slot, : q.width] > 0
        assert torch.equal(items > -1e8, valid.unsqueeze(1).expand_as(items))


def test_masked_skills_nodes_and_prototypes_are_never_sampled() -> None:
    spec, layout, obs = toy_batch(32, seed=2)
    model = _model(spec, layout)
    packed = PackedActionLayout.from_action_layout(layout)
    with torch.no_grad():
        parts = packed.split(model.policy_logits(obs, model.encode(obs))["packed"])
    torch.manual_seed(0)
    seen_skills = torch.zeros(32, layout.num_skills, dtype=torch.bool)
    for _ in range(200):
        a = skill_argument_sample(parts, packed)
        assert (obs["skill_mask"].gather(1, a["skill"][:, None]) == 1).all()
        seen_skills[torch.arange(32), a["skill"]] = True
        for b in range(32):
            s = layout.skills[int(a["skill"][b])]
            for i in range(len(s.pointer_types)):
                assert obs["pointer_mask"][b, int(a["skill"][b]), i, a["pointer"][b, i]] == 1
            lists = a["members"][b].reshape(layout.list_slots, layout.list_length)
            for i, (lo, _hi) in enumerate(s.list_bounds):
                m = lists[i][lists[i] < layout.max_pointer]
                if s.leader(i) < 0:
                    assert lo <= len(m) <= layout.list_max(s, i)
                else:  # a follower has its leader's length
                    assert len(m) == int((lists[s.leader(i)] < layout.max_pointer).sum())
                assert (obs["list_mask"][b, int(a["skill"][b]), i][m] == 1).all()
                if s.unique(i):
                    assert len(set(m.tolist())) == len(m)
            for i in range(s.numeric_count):
                c = int(a["source"][b, i])
                assert c == 0 or obs["source_mask"][b, c - 1] == 1
            for i, size in enumerate(s.enum_sizes):
                assert a["enum"][b, i] < size
    # Sampling is not degenerate: every allowed skill shows up.
    assert torch.equal(seen_skills, obs["skill_mask"] == 1)

    # Prototype mode: an allowed prototype, then entity arguments its skill's masks allow (the policy's choice).
    proto = _model(spec, layout, prototype_mode=True)
    ppk = PackedActionLayout.from_action_layout(layout.prototype_layout())
    with torch.no_grad():
        pparts = ppk.split(proto.policy_logits(obs, proto.encode(obs))["packed"])
    seen_targets = set()
    for _ in range(200):
        a = skill_argument_sample(pparts, ppk)
        assert (obs["proto_mask"].gather(1, a["skill"][:, None]) == 1).all()
        for b in range(32):
            k = layout.prototype_skills[int(a["skill"][b])]
            for i in range(len(layout.skills[k].pointer_types)):
                assert obs["pointer_mask"][b, k, i, a["pointer"][b, i]] == 1
                seen_targets.add((b, k, i, int(a["pointer"][b, i])))
    assert len(seen_targets) > 32  # several targets per row: the prototype does not fix the entity


@pytest.mark.parametrize("scorer", ["state", "tool_nodes"])
def test_distribution_is_invariant_to_node_order(scorer: str) -> None:
    """Invariant to the order of every node type; with tool-node scoring, tool node ``k`` *is* skill ``k``, so
    tool nodes keep their positions (their order is part of the action space, like the skill index)."""
    spec, layout, obs = toy_batch(8, seed=3)
    torch.manual_seed(0)
    model = AAACModel(spec, layout, TINY.model_copy(update={"action_scorer": scorer})).eval()
    fixed = ("tool",) if scorer == "tool_nodes" else ()
    perm_obs, perms = permute_nodes(obs, spec, layout, seed=11, fixed=fixed)
    with torch.no_grad():
        a = model.policy_logits(obs, model.encode(obs))
        b = model.policy_logits(perm_obs, model.encode(perm_obs))
        va, vb = model.reward_values(obs), model.reward_values(perm_obs)
    pa_, pb_ = a["parts"], b["parts"]
    torch.testing.assert_close(a["skill"], b["skill"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pa_.enum, pb_.enum, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pa_.numeric_mean, pb_.numeric_mean, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(va, vb, atol=1e-5, rtol=1e-5)
    packed = model.policy_heads.packed
    for g, la, lb in zip(packed.pointer_groups, pa_.pointers, pb_.pointers, strict=True):
        n, perm = spec.max_nodes[g.node_type], perms[g.node_type]
        sa, sb = la.softmax(-1), lb.softmax(-1)
        torch.testing.assert_close(sa[..., :n][..., perm], sb[..., :n], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sa[..., n:], sb[..., n:], atol=1e-5, rtol=1e-5)
    for g, la, lb in zip(packed.set_groups, pa_.sets, pb_.sets, strict=True):
        perm = perms[g.node_type]
        torch.testing.assert_close(la[..., perm], lb, atol=1e-4, rtol=1e-4)
    for i, q in enumerate(packed.sequences):
        perm = perms[q.node_type]
        torch.testing.assert_close(pa_.seq_items[i][..., perm], pb_.seq_items[i], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(pa_.seq_stop[i], pb_.seq_stop[i], atol=1e-4, rtol=1e-4)
        if q.leader >= 0:
            lead_perm = perms[packed.sequences[q.leader].node_type]
            torch.testing.assert_close(pa_.seq_lead[i][:, lead_perm], pb_.seq_lead[i], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(pa_.seq_own[i][:, perm], pb_.seq_own[i], atol=1e-4, rtol=1e-4)


def test_tool_node_scoring_reads_the_tool_node_of_each_action() -> None:
    """A change confined to one tool node's features moves only the logits of actions on that tool."""
    spec, layout, obs = toy_batch(4, seed=5)
    for prototype_mode in (False, True):
        torch.manual_seed(0)
        model = AAACModel(
            spec, layout, TINY.model_copy(update={"encoder": "flat"}), prototype_mode=prototype_mode
        )
        enc = model.encode(obs)
        bumped_nodes = dict(enc.nodes)
        bumped_nodes["tool"] = enc.nodes["tool"].clone()
        bumped_nodes["tool"][:, 1] += 1.0
        bumped = type(enc)(state=enc.state, nodes=bumped_nodes, node_masks=enc.node_masks)
        with torch.no_grad():
            a, b = model.policy_logits(obs, enc)["skill"], model.policy_logits(obs, bumped)["skill"]
            if prototype_mode:
                on_tool = torch.tensor([k == 1 for k in layout.prototype_skills])
            else:
                on_tool = torch.arange(layout.num_skills) == 1
        valid = (obs["proto_mask"] if prototype_mode else obs["skill_mask"]).bool()
        moved = ~torch.isclose(a, b) & valid
        assert moved[:, on_tool].any() and not moved[:, ~on_tool].any()


def test_numeric_on_pointer_reads_the_candidate_node() -> None:
    """With numeric_on_pointer, b.refund's numeric Gaussian is given per node of its pointer's type (c), and a
    change to one c node's embedding moves that candidate's mean only."""
    spec, layout, obs = toy_batch(6, seed=2)
    torch.manual_seed(0)
    model = AAACModel(spec, layout, TINY.model_copy(update={"numeric_on_pointer": True})).eval()
    refund, mp = layout.skill_index("b.refund"), layout.max_pointer
    enc = model.encode(obs)
    with torch.no_grad():
        a = model.policy_logits(obs, enc)["parts"]
        nodes = dict(enc.nodes)
        nodes["c"] = enc.nodes["c"].clone()
        nodes["c"][:, 1] += 1.0
        b = model.policy_logits(obs, type(enc)(state=enc.state, nodes=nodes, node_masks=enc.node_masks))[
            "parts"
        ]
    n = layout.numeric_slots
    assert a.numeric_mean.shape == a.numeric_log_std.shape == (6, layout.num_skills, n, mp + 1)
    mean = a.numeric_mean[:, refund, 0]
    assert (mean[:, 0] - mean[:, 2]).abs().min() > 1e-4  # candidates differ
    moved = ~torch.isclose(a.numeric_mean[:, refund, 0], b.numeric_mean[:, refund, 0])
    assert moved[:, 1].all() and not moved[:, [0, 2, mp]].any()


@pytest.mark.parametrize("numeric_on_pointer", [False, True])
def test_gradients_reach_every_head_and_parameter(numeric_on_pointer: bool) -> None:
    spec, layout, obs = toy_batch(16, seed=4)
    for prototype_mode in (False, True):
        torch.manual_seed(0)
        cfg = TINY.model_copy(update={"numeric_on_pointer": numeric_on_pointer})
        model = AAACModel(spec, layout, cfg, prototype_mode=prototype_mode)
        enc = model.encode(obs)
        acting = layout.prototype_layout() if prototype_mode else layout
        packed = model.policy_heads.packed
        assert packed.total_dim == model.policy_logits(obs, enc)["packed"].shape[-1]
        parts = packed.split(model.policy_logits(obs, enc)["packed"])
        torch.manual_seed(0)
        action = skill_argument_sample(parts, packed)
        # Force every skill (prototype) to appear so every one's argument head gets a gradient.
        action["skill"] = torch.arange(16) % acting.num_skills
        policy = (
            skill_argument_logp(parts, packed, action).sum() + skill_argument_entropy(parts, packed).sum()
        )
        loss = (
            policy
            + model.reward_values(obs, enc).square().sum()
            + model.risk_values(obs, enc).square().sum()
            + model.reflection_logits(obs, enc).log_softmax(-1)[:, 0].sum()
        )
        loss.backward()
        dead = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
        assert not dead, dead
        # A pointer over a type with a single node (user) has one valid choice: its softmax is constant, so
        # its key projection rightly gets no gradient.
        single = tuple(f"policy_heads.node_key.{nt}." for nt, n in spec.max_nodes.items() if n == 1)
        if prototype_mode:  # a prototype fixes its enum values and numeric rule: those heads are unused
            single += tuple(
                f"policy_heads.{h}" for h in ("enum_head", "numeric_", "source_", "list_key.", "list_query")
            )
        zero = [
            n for n, p in model.named_parameters() if p.grad.abs().sum() == 0 and not n.startswith(single)
        ]
        assert not zero, zero


def test_parameter_groups_partition_the_model() -> None:
    spec, layout, _ = toy_batch(1)
    for separate, shared in ((False, True), (True, True), (True, False)):
        update = {"separate_critic_encoders": separate, "critics_share_encoder": shared}
        model = AAACModel(spec, layout, TINY.model_copy(update=update))
        groups = [model.policy_parameters(), model.reward_critic_parameters(), model.risk_critic_parameters()]
        ids = [id(p) for g in groups for p in g]
        assert len(ids) == len(set(ids)) == len(list(model.parameters()))
        assert all(groups)
        assert (len(groups[1]) > 4) == separate
        assert (len(groups[2]) > 4) == (separate and not shared)
    inference = AAACModel(spec, layout, TINY, build_critics=False)  # the predicted diagnosis needs its head
    assert not hasattr(inference, "reward_critic") and inference.reflection_head is not None
    oracle = TINY.model_copy(update={"reflection_source": "oracle_env"})
    assert AAACModel(spec, layout, oracle, build_critics=False).reflection_head is None


@pytest.mark.parametrize("separate,shared", [(False, True), (True, True), (True, False)])
def test_critic_values_match_the_two_critics_one_by_one(separate: bool, shared: bool) -> None:
    spec, layout, obs = toy_batch(5, seed=6)
    update = {"separate_critic_encoders": separate, "critics_share_encoder": shared}
    model = AAACModel(spec, layout, TINY.model_copy(update=update)).eval()
    with torch.no_grad():
        reward, risk = model.critic_values(obs)
        torch.testing.assert_close(reward, model.reward_values(obs))
        torch.testing.assert_close(risk, model.risk_values(obs))


def test_default_size_is_near_the_seed() -> None:
    from agentic_ray.envs.agent_task_env import AgentTaskEnv

    env = AgentTaskEnv()
    spec, layout = env.graph_spec, env.layout
    for encoder in ("gnn", "flat"):
        n = sum(p.numel() for p in AAACModel(spec, layout, AAACModelConfig(encoder=encoder)).parameters())
        assert 1.7e6 < n < 2.6e6, (encoder, n)


def test_config_rejects_unknown_keys_and_bad_heads() -> None:
    with pytest.raises(ValueError):
        AAACModelConfig(hidden_dim=30, num_heads=4)
    with pytest.raises(ValueError):
        AAACModelConfig(hidden_sise=64)
