"""Copy any revealed field (issue 26, point 3): string arguments copy a revealed field of a revealed entity through a
pointer slot, answers are such strings, and a request fact may hold several values, chosen by position.

On the plug-in retail domain (``tests/plugin_domain``): ``update_address`` copies ``order.address``,
``answer_tracking`` copies ``order.tracking``, and ``find_customer_by_email`` takes one of up to two emails.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agentic_ray.domains.protocol import Request
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.observation import build_specs, entity_columns
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.skills.contracts import DomainContracts
from tests.helpers.plugin_domain import register
from tests.plugin_domain import domain as retail


def _env(family: str, task_seed: int = 4) -> AgentTaskEnv:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register(), families=[family]))
    env.reset(seed=0, options={"task_seed": task_seed})
    return env


def _step(env: AgentTaskEnv, action: dict[str, Any]) -> dict[str, Any]:
    obs, _r, term, trunc, info = env.step(action)
    return {"done": term or trunc, **info[STEP_TRACE], "record": info.get(EPISODE_RECORD), "obs": obs}


def _call(env: AgentTaskEnv, skill: str, **params: Any) -> dict[str, Any]:
    return _step(env, env.encode_action(skill, params))


def _slot(env: AgentTaskEnv, skill: str, name: str) -> tuple[int, int]:
    k = env.skills.index(skill)
    return k, next(ps.slot for ps in env.codec.params[k] if ps.name == name)


def test_a_text_field_is_only_known_or_unknown() -> None:
    order = retail.schema.entity_type("order")
    cols, width = entity_columns(order)
    by = {c.name: c for c in cols}
    assert by["address"].kind == "text" and by["tracking"].known == by["address"].known + 1
    after = [c.known for c in cols if c.known > by["tracking"].known]
    assert (after[0] if after else width) == by["tracking"].known + 1  # no value column
    env = _env("ship_like_other")
    assert env.task is not None and env.knowledge is not None
    other = env.task.request.mentioned[1].id
    _call(env, "find_customer_by_email", email=env.task.request.facts["email"])
    x = _call(env, "get_order", order_id=other)["obs"]["order_x"]
    row = x[env.builder.node_index["order"][other]]
    assert row[by["address"].known] == 1 and row[by["tracking"].known] == 1


def test_a_copied_string_is_a_pointer_slot_over_the_entities_with_the_field_revealed() -> None:
    env = _env("ship_like_other")
    assert env.task is not None and env.world is not None
    target, other = (r.id for r in env.task.request.mentioned)
    k, slot = _slot(env, "update_address", "address")
    assert env.layout.skills[k].pointer_types == ("customer", "order", "order")
    m = env._masks
    assert not m.pointer_mask[k, slot].any() and m.skill_mask[k] == 0
    assert "hard: no known order with a revealed address for address" in m.reasons["update_address"]
    _call(env, "find_customer_by_email", email=env.task.request.facts["email"])
    _call(env, "get_order", order_id=other)
    idx = env.builder.node_index["order"]
    m = env._masks
    assert m.skill_mask[k] == 1
    assert m.pointer_mask[k, slot, idx[other]] == 1 and m.pointer_mask[k, slot, idx[target]] == 0
    # Pointing at the target order (its address unrevealed) is refused before the tool; the other's is copied.
    action = env.encode_action(
        "update_address",
        {"customer_id": env.world.customer.id, "order_id": target, "address": env.world.order(other).address},
    )
    assert action["pointer"][slot] == idx[other]
    wrong = {**action, "pointer": action["pointer"].copy()}
    wrong["pointer"][slot] = idx[target]
    assert env.mask_violation(wrong) is not None
    _k, _p, err, msg = env.codec.decode(wrong, env.task, env.knowledge)
    assert err == "INVALID_INPUT" and "no order with a revealed address" in msg
    _k, params, err, _msg = env.codec.decode(action, env.task, env.knowledge)
    assert err is None and params["address"] == env.knowledge.fields("order", other)["address"]
    out = _step(env, action)
    assert out["result_code"] == "OK" and out["done"] and out["record"]["completed"]
    assert env.world.order(target).address == env.world.order(other).address


def test_an_answer_copies_a_revealed_tracking_number() -> None:
    env = _env("tracking_answer")
    assert env.task is not None and env.world is not None
    oid = env.task.request.mentioned[0].id
    _call(env, "find_customer_by_email", email=env.task.request.facts["email"])
    with pytest.raises(KeyError, match="no known order has a revealed tracking"):
        env.codec.encode(
            "answer_tracking", {"customer_id": env.world.customer.id, "tracking_number": "1Z0"}, env.knowledge
        )
    _call(env, "get_order", order_id=oid)
    out = _call(
        env,
        "answer_tracking",
        customer_id=env.world.customer.id,
        tracking_number=env.world.order(oid).tracking,
    )
    assert (
        out["done"]
        and out["record"]["completed"]
        and env.world.case == f"told:{env.world.order(oid).tracking}"
    )


def test_a_request_fact_may_hold_several_values() -> None:
    r = Request("hi", {"email": ["a@x", "b@x"], "name": "Li"})
    assert (
        r.facts["email"] == ("a@x", "b@x")
        and r.values("email") == ("a@x", "b@x")
        and r.values("name") == ("Li",)
    )
    assert r.values("zip") == ()
    with pytest.raises(ValueError, match="non-empty tuple of strings"):
        Request("hi", {"email": ()})


def test_the_email_argument_chooses_one_of_two_emails_by_position() -> None:
    env = _env("two_emails")
    assert env.task is not None
    emails = env.task.request.values("email")
    right = env.task.extra["account_email"]
    assert len(emails) == 2 and right in emails
    k, slot = _slot(env, "find_customer_by_email", "email")
    assert env.layout.skills[k].enum_sizes == (2,)
    base = env.encode_action("find_customer_by_email", {"email": right})
    assert base["enum"][slot] == emails.index(right)
    for i, want in ((0, emails[0]), (1, emails[1])):
        a = {**base, "enum": base["enum"].copy()}
        a["enum"][slot] = i
        assert env.codec.decode(a, env.task, env.knowledge)[1]["email"] == want
    wrong = {**base, "enum": base["enum"].copy()}
    wrong["enum"][slot] = 1 - emails.index(right)
    assert _step(env, wrong)["result_code"] == "NOT_FOUND"  # the customer's other email: no account
    assert _step(env, base)["result_code"] == "OK"


def test_a_fact_position_past_the_values_or_several_values_for_one_slot_is_invalid_input() -> None:
    env = _env("cancel_order")  # one email
    assert env.task is not None
    a = env.encode_action("find_customer_by_email", {"email": env.task.request.facts["email"]})
    _k, slot = _slot(env, "find_customer_by_email", "email")
    a["enum"][slot] = 1
    _k, _p, err, msg = env.codec.decode(a, env.task, env.knowledge)
    assert err == "INVALID_INPUT" and "no email #2" in msg
    raw = retail.contracts().model_dump()
    for s in raw["skills"]:
        if s["name"] == "find_customer_by_email":
            s["input"]["email"]["max_values"] = 1
    contracts = DomainContracts.model_validate(raw)
    spec, layout = build_specs(retail.schema, contracts)
    assert layout.skills[0].enum_sizes == ()
    from agentic_ray.envs.action_codec import ActionCodec

    task = env.task.__class__(**{**env.task.__dict__, "request": Request("hi", {"email": ("a@x", "b@x")})})
    codec = ActionCodec(contracts, layout, spec, env.builder)
    _k, _p, err, msg = codec.decode({"skill": 0}, task, env.knowledge)
    assert err == "INVALID_INPUT" and "2 values for email" in msg


def test_contracts_and_specs_refuse_a_copy_they_cannot_honour() -> None:
    raw = retail.contracts().model_dump()
    upd = next(s for s in raw["skills"] if s["name"] == "update_address")
    upd["input"]["address"]["source"] = "parcel.address"
    with pytest.raises(ValueError, match="source: unknown node type 'parcel'"):
        DomainContracts.model_validate(raw)
    upd["input"]["address"]["source"] = "order.street"
    with pytest.raises(ValueError, match=r"copies order\.street, which the domain schema does not declare"):
        build_specs(retail.schema, DomainContracts.model_validate(raw))
    upd["input"]["address"]["source"] = "order.address"
    upd["input"]["address"]["max_values"] = 2
    with pytest.raises(ValueError, match="max_values is for strings copied from a request fact"):
        DomainContracts.model_validate(raw)


def test_the_masks_follow_reveals_of_fields_not_only_of_entities() -> None:
    """A reveal that only adds a field to an entity already known must reopen the copy slot (the mask cache is keyed
    on the node order, so also on what the copy slots read)."""
    env = _env("ship_like_other")
    assert env.task is not None and env.knowledge is not None and env.state is not None
    target = env.task.request.mentioned[0].id
    k, slot = _slot(env, "update_address", "address")
    _call(env, "find_customer_by_email", email=env.task.request.facts["email"])
    j = env.builder.node_index["order"][target]

    def copyable() -> np.ndarray:
        assert env.knowledge is not None and env.state is not None
        m = env.masks.compute(env.knowledge, env.builder.node_ids, env._sla(), 0.0, env.state.last_call_time)
        return m.pointer_mask[k, slot, :3]

    assert not copyable().any()
    # a field only: the node order is unchanged
    env.knowledge.reveal("order", target, {"address": "1 Elm St"})
    assert np.array_equal(copyable(), [int(i == j) for i in range(3)])
