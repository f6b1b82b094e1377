"""Membership preconditions (``belongs_to``) and preconditions over several entity parameters (issue 26, point 4):
what the one definition admits, what a contract may say, and the mask's projection of a joint rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agentic_ray.skills.contracts import ContractError, DomainContracts, load_contracts
from agentic_ray.skills.preconditions import (
    Call,
    PreconditionTracker,
    allowed_values,
    precondition_status,
    unconstrained_ok,
)

CONTRACTS: dict[str, Any] = {
    "domain": "shop",
    "node_types": ["customer", "payment_method", "order", "item"],
    "skills": [
        {
            "name": "find_customer",
            "description": "Identify the customer.",
            "input": {"email": {"type": "string"}},
            "output": {
                "fields": {
                    "customer_id": {"type": "entity", "node_type": "customer"},
                    "payment_methods": {
                        "type": "entity_map",
                        "node_type": "payment_method",
                        "of": "customer_id",
                        "fields": {"kind": "string"},
                    },
                }
            },
        },
        {
            "name": "get_order",
            "description": "Read an order.",
            "input": {"order_id": {"type": "entity", "node_type": "order"}},
            "output": {
                "fields": {
                    "customer_id": {"type": "entity", "node_type": "customer"},
                    "items": {
                        "type": "entity_list",
                        "node_type": "item",
                        "id_field": "item_id",
                        "fields": {"price": "float"},
                    },
                }
            },
        },
        {
            "name": "refund",
            "description": "Refund items to a payment method.",
            "input": {
                "customer_id": {"type": "entity", "node_type": "customer"},
                "order_id": {"type": "entity", "node_type": "order"},
                "item_ids": {"type": "list", "node_type": "item"},
                "payment_method_id": {"type": "entity", "node_type": "payment_method"},
            },
            "preconditions": [
                {
                    "after": "get_order",
                    "same": ["order_id", "customer_id"],
                    "belongs_to": [{"member": "item_ids", "owner": "order_id", "via": "items"}],
                },
                {
                    "after": "find_customer",
                    "belongs_to": [
                        {"member": "payment_method_id", "owner": "customer_id", "via": "payment_methods"}
                    ],
                },
            ],
        },
    ],
}
DC = DomainContracts.model_validate(CONTRACTS)
BY = DC.by_name()
REFUND = BY["refund"]

ME = Call(
    "find_customer",
    {"email": "a@x"},
    {"customer_id": "c1", "payment_methods": {"card_1": {"kind": "card"}, "gift_2": {"kind": "gift"}}},
)
ORDER_A = Call(
    "get_order",
    {"order_id": "oA"},
    {"customer_id": "c1", "items": [{"item_id": "a1", "price": 3.0}, {"item_id": "a2", "price": 4.0}]},
)
ORDER_B = Call(
    "get_order", {"order_id": "oB"}, {"customer_id": "c1", "items": [{"item_id": "b1", "price": 5.0}]}
)
OTHERS = Call(
    "get_order", {"order_id": "oC"}, {"customer_id": "c2", "items": [{"item_id": "c1i", "price": 1.0}]}
)
HISTORY = [ME, ORDER_A, ORDER_B, OTHERS]


def _ok(params: dict[str, Any], history: list[Call] = HISTORY) -> bool:
    return precondition_status(REFUND, params, history, contracts=BY)[0]


def _refund(**kw: Any) -> dict[str, Any]:
    return {"customer_id": "c1", "order_id": "oA", "item_ids": ["a1"], "payment_method_id": "card_1", **kw}


def test_members_of_keyed_and_nested_outputs_belong_to_their_owner() -> None:
    assert _ok(_refund())
    assert _ok(_refund(item_ids=["a1", "a2"], payment_method_id="gift_2"))  # a map's keys are its ids
    assert not _ok(_refund(payment_method_id="card_9"))  # not one of the customer's methods
    assert not _ok(_refund(item_ids=["b1"]))  # an item of another order
    assert not _ok(_refund(item_ids=["a1", "b1"]))  # every member must belong
    why = precondition_status(REFUND, _refund(item_ids=["b1"]), HISTORY, contracts=BY)[1]
    assert "listing the item_ids among the order_id's items" in why


def test_several_parameters_are_admitted_by_one_earlier_call() -> None:
    assert not _ok(_refund(order_id="oC", item_ids=["c1i"]))  # that order was read for another customer
    assert not _ok(
        _refund(customer_id="c2", order_id="oC", item_ids=["c1i"])
    )  # c2's methods were never listed
    # order oA and items of oB each appear in some read, but no one read admits them together
    assert not _ok(_refund(order_id="oB", item_ids=["a1"]))
    assert not _ok(_refund(), [ORDER_A])  # the payment method's owner was never identified


def test_the_mask_part_is_the_projection_of_the_joint_rule() -> None:
    known = {
        "customer_id": ["c1", "c2"],
        "order_id": ["oA", "oB", "oC"],
        "item_ids": ["a1", "a2", "b1", "c1i"],
        "payment_method_id": ["card_1", "gift_2"],
    }
    ok = unconstrained_ok(REFUND, HISTORY, contracts=BY)
    assert ok == (True, [])
    got = {n: allowed_values(REFUND, n, ids, HISTORY, contracts=BY, known=known) for n, ids in known.items()}
    # c2 owns order oC, but no payment method of c2 was listed: the second precondition leaves only c1
    assert got["customer_id"] == [True, False]
    assert got["order_id"] == [True, True, True]  # oC passes its own precondition's projection
    assert got["item_ids"] == [True, True, True, True]
    assert got["payment_method_id"] == [True, True]
    # the projection is a superset of the joint rule: each slot allowed, the combination not
    assert not _ok(_refund(order_id="oB", item_ids=["a1"]))
    # with one known candidate for the order (oB), the item slot is exact: only oB's item
    pinned = {**known, "order_id": ["oB"]}
    assert allowed_values(REFUND, "item_ids", known["item_ids"], HISTORY, contracts=BY, known=pinned) == [
        False,
        False,
        True,
        False,
    ]
    assert allowed_values(REFUND, "item_ids", ["b1"], [ME, ORDER_B], contracts=BY) == [True]
    assert allowed_values(REFUND, "item_ids", ["a1"], [ME, ORDER_B], contracts=BY) == [False]


def test_the_tracker_equals_the_pure_functions() -> None:
    tr = PreconditionTracker(DC.skills)
    i = [c.name for c in DC.skills].index("refund")
    known = {
        "customer_id": ["c1"],
        "order_id": ["oA", "oB"],
        "item_ids": ["a1", "b1", "zz"],
        "payment_method_id": ["card_1", "nope"],
    }
    for n in range(len(HISTORY) + 1):
        tr.reset(HISTORY[:n])
        assert tr.skill_ok(i) == unconstrained_ok(REFUND, HISTORY[:n], contracts=BY)
        for name, ids in known.items():
            assert tr.allowed(i, name, ids, known) == allowed_values(
                REFUND, name, ids, HISTORY[:n], contracts=BY, known=known
            )
    assert tr.joint[i] and not tr.joint[0]


def test_belongs_to_needs_the_contracts_to_read_via() -> None:
    with pytest.raises(ValueError, match="contracts"):
        precondition_status(REFUND, _refund(), HISTORY)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda pc: pc["belongs_to"][0].update(member="amount"), "belongs_to.0.member"),
        (lambda pc: pc["belongs_to"][0].update(owner="nope"), "belongs_to.0.owner"),
        (lambda pc: pc["belongs_to"][0].update(via="customer_id"), "belongs_to.0.via"),
        (lambda pc: pc["belongs_to"][0].update(via="missing"), "belongs_to.0.via"),
        (lambda pc: pc["belongs_to"][0].update(member="order_id"), "belongs_to.0.via"),  # lists items
    ],
)
def test_impossible_memberships_are_refused_at_load(tmp_path, mutate, field: str) -> None:
    import yaml

    data = copy.deepcopy(CONTRACTS)
    data["skills"][2]["input"]["amount"] = {"type": "float", "min": 0, "max": 1}
    mutate(data["skills"][2]["preconditions"][0])
    p = tmp_path / "shop.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ContractError) as ei:
        load_contracts(p)
    assert f"preconditions.0.{field}" in str(ei.value) and "refund" in str(ei.value), str(ei.value)


def test_the_env_masks_a_combination_no_earlier_call_admits() -> None:
    """Two orders read: each pointer slot allows the items of both, but an item of the other order is a masked
    step (never sent to the tool), and the mask's reason says why."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
    from agentic_ray.keys import STEP_TRACE
    from tests.helpers.plugin_domain import register

    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register(), families=["refund_item"]))
    env.reset(seed=0, options={"task_seed": 5})
    assert env.task is not None and env.knowledge is not None
    g = env.task.goals[0]
    other = next(o for o in env.world.customer.orders if o.id != g.args["order_id"])

    def step(skill: str, **params: Any) -> dict[str, Any]:
        return env.step(env.encode_action(skill, params))[4][STEP_TRACE]

    step("find_customer_by_email", email=env.task.request.facts["email"])
    step("list_orders", customer_id=g.args["customer_id"])  # reveals the other orders
    step("get_order", order_id=g.args["order_id"])
    step("get_order", order_id=other.id)
    k = env.skills.index("refund_item")
    items = env.builder.node_ids["item"]
    assert env.current_masks.pointer_mask[k, 2, [items.index(i.id) for i in other.items]].all()
    refunds = len(env.world.refunds)
    wrong = step("refund_item", **{**g.args, **g.numeric, "order_id": other.id})
    assert wrong["masked"] and wrong["result_code"] == "PRECONDITION_FAILED"
    assert "together fail a precondition" in wrong["message"] and len(env.world.refunds) == refunds
    right = step("refund_item", **{**g.args, **g.numeric})
    assert right["result_code"] == "OK" and right["goals_satisfied"] == ["refund"]
