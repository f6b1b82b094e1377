"""List arguments in the env: ordered, repeated and paired lists through the action codec, and the caps.

The e-commerce contracts plus one skill a third party would write: an exchange whose ``item_ids`` may repeat an
item and whose ``new_item_ids`` pair with them by position.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy
from agentic_ray.keys import ENTITIES_PAST_CAP
from agentic_ray.skills.contracts import domain_file

EXCHANGE = {
    "name": "order.exchange",
    "description": "Exchange delivered items for others, item by item.",
    "input": {
        "order_id": {"type": "entity", "node_type": "order"},
        "item_ids": {
            "type": "list", "node_type": "product", "ordered": True, "unique": False, "min_items": 2, "max_items": 3,
        },
        "new_item_ids": {
            "type": "list", "node_type": "product", "ordered": True, "unique": False, "max_items": 3,
            "paired_with": "item_ids",
        },
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> AgentTaskEnv:
    raw = yaml.safe_load(Path(domain_file("ecommerce")).read_text())
    raw["skills"].append(EXCHANGE)
    path = tmp_path_factory.mktemp("contracts") / "ecommerce_exchange.yaml"
    path.write_text(yaml.safe_dump(raw))
    e = AgentTaskEnv(AgentTaskEnvConfig(domain="ecommerce", contracts_path=str(path)))
    e.reset(seed=0)
    assert e.knowledge is not None
    for pid in ("P-a", "P-b", "P-c"):
        e.knowledge.mention("product", pid)
    e.knowledge.mention("order", "O-1")
    e.builder.refresh(e.knowledge)
    return e


def test_the_layout_knows_each_list_kind(env: AgentTaskEnv) -> None:
    lay = env.layout
    ex = lay.skills[lay.skill_index("order.exchange")]
    assert ex.is_sequence(0) and ex.is_sequence(1) and ex.leader(1) == 0 and not ex.unique(0)
    ret = lay.skills[lay.skill_index("return.create")]
    assert not ret.is_sequence(0)
    assert dict(lay.type_widths) == {"user": 1, "order": 4, "product": 8}
    assert lay.list_length == 3


def test_ordered_repeated_and_paired_lists_round_trip(env: AgentTaskEnv) -> None:
    assert env.task is not None and env.knowledge is not None
    params = {"order_id": "O-1", "item_ids": ["P-b", "P-a", "P-b"], "new_item_ids": ["P-c", "P-c", "P-a"]}
    action = env.codec.encode("order.exchange", params, env.knowledge)
    assert env.action_space.contains(action)
    idx = env.builder.node_index["product"]
    mp, t = env.layout.max_pointer, env.layout.list_length
    assert action["members"][:t].tolist() == [idx["P-b"], idx["P-a"], idx["P-b"]]
    _k, got, err, _ = env.codec.decode(action, env.task, env.knowledge)
    assert err is None and got == params
    # A set is listed in increasing node order, whatever order the call names it in, and decodes as a set.
    ret = env.codec.encode("return.create", {"order_id": "O-1", "item_ids": ["P-c", "P-a"], "reason": "quality"},
                           env.knowledge)  # fmt: skip
    assert ret["members"][:t].tolist() == [*sorted([idx["P-c"], idx["P-a"]]), mp]
    _, got, err, _ = env.codec.decode(ret, env.task, env.knowledge)
    assert err is None and set(got["item_ids"]) == {"P-a", "P-c"}
    # A repeat in a list that allows none is a typed error, never a call.
    bad = {**ret, "members": ret["members"].copy()}
    bad["members"][:2] = idx["P-a"]
    assert env.codec.decode(bad, env.task, env.knowledge)[2] == "INVALID_INPUT"


def test_a_list_with_repeats_needs_one_known_entity(env: AgentTaskEnv) -> None:
    """``item_ids`` takes 2..3 members with repeats: one known product is enough (the set of ``return.create``
    needs its minimum of distinct ones)."""
    know = Knowledge(env.domain.schema.type_names)
    know.mention("product", "P-only")
    know.mention("order", "O-1")
    ids = {t: know.ids(t) for t in env.domain.schema.type_names}
    m = env.masks.compute(know, ids, env._sla(None), 0.0, np.full(len(env.skills), -1e9))
    reasons = " ".join(m.reasons.get("order.exchange", []))
    assert "known product" not in reasons
    obs_free = env.layout.skill_index("order.exchange")
    assert m.list_mask[obs_free, 0, 0] == 1


def test_random_policy_draws_paired_lists_of_equal_length(env: AgentTaskEnv) -> None:
    assert env.task is not None and env.knowledge is not None
    obs = env._observe()
    obs["skill_mask"][:] = 0
    k = env.layout.skill_index("order.exchange")
    obs["skill_mask"][k] = 1
    obs["list_mask"][k, :2, :3] = 1
    pol = RandomMaskedPolicy(env.layout, seed=0)
    repeats = 0
    for _ in range(60):
        _, params, err, _ = env.codec.decode(pol.act(obs), env.task, env.knowledge)
        assert err is None
        assert len(params["item_ids"]) == len(params["new_item_ids"])
        repeats += len(set(params["item_ids"])) < len(params["item_ids"])
    assert repeats > 0  # repeats are drawn where the contract allows them


def test_entities_past_a_cap_are_counted_and_reported(
    env: AgentTaskEnv, caplog: pytest.LogCaptureFixture
) -> None:
    e = AgentTaskEnv(AgentTaskEnvConfig(domain="ecommerce"))
    e.reset(seed=1)
    assert e.knowledge is not None
    cap = e.graph_spec.max_nodes["product"]
    for i in range(cap + 3):
        e.knowledge.mention("product", f"P-extra-{i}")
    with caplog.at_level("WARNING"):
        _obs, _r, term, trunc, info = e.step(RandomMaskedPolicy(e.layout, seed=0).act(e._observe()))
    known = len(e.knowledge.ids("product"))
    assert info[ENTITIES_PAST_CAP] == {"product": known - cap} and known - cap >= 3
    assert any("past the node cap" in r.message for r in caplog.records)
    while not (term or trunc):
        _obs, _r, term, trunc, info = e.step(RandomMaskedPolicy(e.layout, seed=1).act(_obs))
    assert info["episode_record"][ENTITIES_PAST_CAP]["product"] >= 3
    assert np.isfinite(_obs["product_x"]).all()


def test_a_paired_refund_counts_only_with_the_right_pairs() -> None:
    """The plug-in domain's ``refund_items``: the goal holds pairs (item, payment method); the same lists paired
    the other way round satisfy nothing, the right pairs in another order do."""
    from tests.helpers.plugin_domain import register

    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register(), families=["refund_items"]))
    expert = env.domain.expert()
    for seed in range(20):
        env.reset(seed=seed)
        assert env.task is not None
        g = env.task.goals[0]
        if len(set(g.args["payment_method_ids"])) == 2:
            break
    else:
        pytest.fail("no refund_items task with two payment methods in 20 seeds")
    while (step := expert.plan(env.view()))[0] != "refund_items":
        env.step(env.encode_action(*step))
    skill, params = step
    swapped = {**params, "payment_method_ids": params["payment_method_ids"][::-1]}
    reordered = {
        **params,
        "item_ids": params["item_ids"][::-1],
        "payment_method_ids": swapped["payment_method_ids"],
    }
    lists = env.list_semantics[skill]
    assert not g.matches(skill, swapped, lists)
    assert g.matches(skill, reordered, lists)
    *_, term, _trunc, info = env.step(env.encode_action(skill, reordered))
    assert term and info["episode_record"]["completed"]
