"""A request that lacks what its family needs gets a typed clarification naming it, never goals."""

from __future__ import annotations

from agentic_ray.parser import Clarify


def test_missing_order_id_is_asked_for(ecommerce_parser) -> None:
    p = ecommerce_parser.parse("The address on my order is wrong, please send it to a parcel locker.", [])
    assert p.families == ("address_error",)
    assert isinstance(p.clarify, Clarify)
    assert p.clarify.reason == "missing_slots"
    assert "order" in p.clarify.missing
    assert p.goals == ()


def test_missing_identity_names_the_ways_to_give_it(ecommerce_parser) -> None:
    p = ecommerce_parser.parse(
        "The address on order O1234567 is wrong, please send it to a parcel locker.", []
    )
    assert isinstance(p.clarify, Clarify)
    assert p.clarify.missing == ("email",)
    assert set(p.clarify.identity_options) == {("email",), ("name", "zip")}
    assert p.goals == ()


def test_the_missing_slot_given_in_a_follow_up_completes_the_request(ecommerce_parser) -> None:
    history = [
        "Hi, I'm Li Wei, zip 361001. The address on my order is wrong, please send it to a parcel locker."
    ]
    p = ecommerce_parser.parse("Sorry, it is order O7654321.", history)
    assert p.clarify is None, p.clarify
    assert p.facts == {"name": "Li Wei", "zip": "361001"}
    goals = {g.id: g for g in p.goals}
    assert goals["address"].args == {"order_id": "O7654321", "source": "pickup_point"}
    assert goals["address"].deps == ("verify",)
    order = next(s for s in p.slots if s.slot == "order")
    assert (order.turn, "Sorry, it is order O7654321."[order.start : order.end]) == (1, "O7654321")


def test_a_known_fact_with_several_values_counts_as_given_and_keeps_its_values(ecommerce_parser) -> None:
    p = ecommerce_parser.parse(
        "The address on order O1234567 is wrong, please send it to a parcel locker.",
        [],
        known_facts={"email": ["li@example.com", "wei@example.com"]},
    )
    assert p.clarify is None, p.clarify
    assert p.facts["email"] == ("li@example.com", "wei@example.com")
