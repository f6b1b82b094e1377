"""Outputs keyed by id and nested entity objects with a declared id field (issue 26, point 5): typed in the
contract, checked by the gateway, revealed into the agent's knowledge."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentic_ray.domains.knowledge import Knowledge, reveal_result
from agentic_ray.skills.contracts import OutputField, SkillContract
from agentic_ray.skills.param_validation import output_problem

LOOKUP = SkillContract.model_validate(
    {
        "name": "lookup",
        "description": "A customer, their payment methods keyed by id, an order's items and its best seller.",
        "input": {"customer_id": {"type": "entity", "node_type": "customer"}},
        "output": {
            "fields": {
                "payment_methods": {
                    "type": "entity_map",
                    "node_type": "payment_method",
                    "of": "customer_id",
                    "fields": {"kind": "string", "balance": "float"},
                },
                "items": {
                    "type": "entity_list",
                    "node_type": "item",
                    "of": "customer_id",
                    "as_field": "bought",
                    "id_field": "item_id",
                    "fields": {"price": "float"},
                },
                "best": {
                    "type": "entity",
                    "node_type": "item",
                    "id_field": "item_id",
                    "fields": {"price": "float"},
                },
                "best_rank": {"type": "int", "of": "best"},
            }
        },
    }
)
PAYLOAD: dict[str, Any] = {
    "payment_methods": {
        "credit_card_123": {"kind": "credit_card", "balance": 0.0},
        "gift_9": {"kind": "gift", "balance": 5.5},
    },
    "items": [{"item_id": "i1", "price": 10.0, "color": "red"}, "i2"],
    "best": {"item_id": "i3", "price": 99.0},
    "best_rank": 1,
}


def test_keyed_and_nested_entities_are_revealed_with_their_fields() -> None:
    k = Knowledge(["customer", "payment_method", "item"])
    touched = reveal_result(k, LOOKUP, {"customer_id": "c1"}, PAYLOAD)
    assert k.ids("payment_method") == ["credit_card_123", "gift_9"]
    assert k.fields("payment_method", "credit_card_123") == {"kind": "credit_card", "balance": 0.0}
    assert k.ids("item") == ["i1", "i2", "i3"]
    assert k.fields("item", "i1") == {"price": 10.0}  # only the declared fields
    assert k.fields("item", "i3") == {"price": 99.0, "best_rank": 1}  # `of:` reaches into a nested object
    assert k.fields("customer", "c1") == {
        "payment_methods": ["credit_card_123", "gift_9"],
        "bought": ["i1", "i2"],
    }
    assert set(touched) == {
        ("payment_method", "credit_card_123"),
        ("payment_method", "gift_9"),
        ("item", "i1"),
        ("item", "i2"),
        ("item", "i3"),
        ("customer", "c1"),
    }


def test_the_gateway_checks_the_declared_shapes() -> None:
    assert output_problem(LOOKUP, PAYLOAD) is None
    bad = [
        ({"payment_methods": {"p1": "credit_card"}}, "payment_methods['p1']: an object"),
        ({"payment_methods": {"p1": {"kind": "x"}}}, "payment_methods['p1']: missing field 'balance'"),
        ({"payment_methods": [{"id": "p1"}]}, "payment_methods: list where dict expected"),
        ({"items": [{"id": "i1", "price": 1.0}]}, "items[0]: an entity id or an object with an 'item_id'"),
        ({"items": [{"item_id": "i1", "price": "1"}]}, "items[0].price: str where float expected"),
        ({"best": "i3"}, "best: str where dict expected"),
        ({"best": {"item_id": 3, "price": 1.0}}, "best: an entity id or an object with an 'item_id'"),
    ]
    for change, why in bad:
        got = output_problem(LOOKUP, {**PAYLOAD, **change})
        assert got is not None and got.startswith(why), (change, got)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"type": "entity_map", "node_type": "x", "id_field": "x_id"}, "keyed by id"),
        ({"type": "entity", "node_type": "x", "fields": {"a": "int"}}, "declare its id_field"),
        ({"type": "string", "id_field": "x_id"}, "for entity, entity_list and entity_map"),
        ({"type": "entity_list", "node_type": "x", "id_field": "a", "fields": {"a": "int"}}, "is the id"),
    ],
)
def test_impossible_declarations_are_refused(spec: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        OutputField.model_validate(spec)


def test_the_plugin_domain_reveals_keyed_payment_methods_and_nested_items() -> None:
    from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
    from tests.helpers.plugin_domain import register

    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register()))
    env.reset(seed=0, options={"family": "refund_item", "task_seed": 3})
    assert env.knowledge is not None and env.task is not None
    expert = env.domain.expert()
    for _ in range(2):  # identify the customer, read the order
        env.step(env.encode_action(*expert.plan(env.view())))
    c = env.world.customer
    k = env.knowledge
    assert k.ids("payment_method") == [p.id for p in c.payment_methods]
    assert all(k.fields("payment_method", p.id)["kind"] == p.kind for p in c.payment_methods)
    order = env.world.order(env.task.goals[0].args["order_id"])
    assert k.fields("order", order.id)["items"] == [i.id for i in order.items]
    assert all(k.fields("item", i.id)["price"] == i.price for i in order.items)
    obs = env._observe()
    assert obs["order__contains__item_mask"].sum() == len(order.items)  # links from the stored ids
    assert obs["customer__pays_with__payment_method_mask"].sum() == len(c.payment_methods)
