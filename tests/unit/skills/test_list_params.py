"""Ordered lists, repeats and lists paired by position: the contract, the gateway and goal matching."""

from __future__ import annotations

import pytest

from agentic_ray.domains.goal_dag import Goal, ListSemantics
from agentic_ray.envs.episode import list_semantics
from agentic_ray.skills.contracts import DomainContracts, EntityListParam, SkillContract
from agentic_ray.skills.param_validation import InvalidParams, validate_params

ITEMS = {"type": "list", "node_type": "item", "min_items": 1, "max_items": 3}


def _contracts(**inputs: dict) -> DomainContracts:
    skill = SkillContract(name="order.exchange", description="Exchange items.", input=inputs)
    return DomainContracts(domain="shop", node_types=["item", "order"], skills=[skill])


def _exchange() -> SkillContract:
    return _contracts(
        item_ids={**ITEMS, "ordered": True, "unique": False},
        new_item_ids={**ITEMS, "ordered": True, "unique": False, "paired_with": "item_ids"},
        tags={**ITEMS, "min_items": 0, "required": False},
    ).skills[0]


def test_a_list_is_a_set_unless_the_contract_says_otherwise() -> None:
    p = EntityListParam(node_type="item")
    assert (p.ordered, p.unique, p.paired_with) == (False, True, None)


@pytest.mark.parametrize(
    ("follower", "problem"),
    [
        ({"paired_with": "nope"}, "'nope' is not a list parameter"),
        ({"paired_with": "new_item_ids"}, "cannot be paired with itself"),
        ({"paired_with": "item_ids", "min_items": 2}, "outside this list's 2..3"),
        ({"paired_with": "item_ids", "required": False}, "both be required or both optional"),
    ],
)
def test_a_pairing_must_name_another_unpaired_list_with_compatible_bounds(
    follower: dict, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        _contracts(item_ids=ITEMS, new_item_ids={**ITEMS, **follower})


def test_a_leader_cannot_itself_be_paired() -> None:
    with pytest.raises(ValueError, match="is itself paired"):
        _contracts(
            a={**ITEMS, "paired_with": "b"},
            b={**ITEMS, "paired_with": "c"},
            c=ITEMS,
        )


def test_the_gateway_accepts_repeats_only_where_the_contract_allows_them() -> None:
    c = _exchange()
    out, _ = validate_params(c, {"item_ids": ["i1", "i1"], "new_item_ids": ["i7", "i8"]})
    assert out["item_ids"] == ["i1", "i1"] and out["new_item_ids"] == ["i7", "i8"]  # order kept
    with pytest.raises(InvalidParams, match="listed twice"):
        validate_params(c, {"item_ids": ["i1"], "new_item_ids": ["i7"], "tags": ["t", "t"]})


def test_the_gateway_checks_paired_lengths() -> None:
    c = _exchange()
    with pytest.raises(InvalidParams, match="paired with 'item_ids'"):
        validate_params(c, {"item_ids": ["i1", "i2"], "new_item_ids": ["i7"]})


def test_goals_compare_lists_as_the_contract_says() -> None:
    sem = list_semantics(_contracts(
        item_ids={**ITEMS, "ordered": False, "unique": False},
        new_item_ids={**ITEMS, "unique": False, "paired_with": "item_ids"},
        seq={**ITEMS, "ordered": True},
        tags=ITEMS,
    ))["order.exchange"]  # fmt: skip
    assert sem["new_item_ids"] == ListSemantics(False, "item_ids") and sem["seq"].ordered
    g = Goal("x", "order.exchange", args={"seq": ["a", "b"], "tags": ["t1", "t2"]})
    assert g.matches("order.exchange", {"seq": ["a", "b"], "tags": ["t2", "t1"]}, sem)  # a set: any order
    assert not g.matches("order.exchange", {"seq": ["b", "a"], "tags": ["t1", "t2"]}, sem)  # a sequence
    multi = Goal("m", "order.exchange", args={"item_ids": ["i1", "i1", "i2"]})
    assert multi.matches("order.exchange", {"item_ids": ["i2", "i1", "i1"]}, sem)
    assert not multi.matches("order.exchange", {"item_ids": ["i2", "i2", "i1"]}, sem)  # a multiset counts
    pairs = Goal("p", "order.exchange", args={"item_ids": ["i1", "i2"], "new_item_ids": ["n1", "n2"]})
    assert pairs.matches("order.exchange", {"item_ids": ["i2", "i1"], "new_item_ids": ["n2", "n1"]}, sem)
    assert not pairs.matches("order.exchange", {"item_ids": ["i2", "i1"], "new_item_ids": ["n1", "n2"]}, sem)
    # Without the contract's semantics a list is a multiset, and the pairs are not checked.
    assert pairs.matches("order.exchange", {"item_ids": ["i2", "i1"], "new_item_ids": ["n1", "n2"]})
