"""The generic ``ask_customer`` skill's contract side (issue 26, point 12): built from a domain's ``ask_customer:``
block, checked against the preconditions that read its answer, answered by the world's simulated customer or the
default one, and revealed as a field of the entity asked about."""

from __future__ import annotations

from typing import Any

import pytest

from agentic_ray.domains.knowledge import Knowledge, reveal_result
from agentic_ray.skills.ask_customer import ask_customer
from agentic_ray.skills.contracts import ASK_CUSTOMER, DomainContracts, EntityParam, EnumParam


def _contracts(where: dict[str, Any] | None = None, **extra: Any) -> DomainContracts:
    """A two-skill domain whose ``charge`` needs the customer's yes to ``tst_fee`` about the same order."""
    return DomainContracts.model_validate(
        {
            "domain": "tst",
            "node_types": ["order"],
            "skills": [
                {
                    "name": "charge",
                    "description": "Charge a fee on an order.",
                    "input": {"order_id": {"type": "entity", "node_type": "order"}},
                    "preconditions": [
                        {
                            "after": ASK_CUSTOMER,
                            "where": where or {"question": "tst_fee", "answer": "yes"},
                            "same": ["order_id"],
                        }
                    ],
                }
            ],
            "ask_customer": {
                "about": {"param": "order_id", "node_type": "order"},
                "questions": {
                    "tst_fee": {"kind": "confirm"},
                    "tst_pick": {"kind": "choose", "options": ["left", "right"]},
                },
            },
            **extra,
        }
    )


def test_the_block_adds_one_generic_skill_after_the_domains_own() -> None:
    dc = _contracts()
    assert [s.name for s in dc.skills] == ["charge", ASK_CUSTOMER]
    ask = dc.by_name()[ASK_CUSTOMER]
    q, about = ask.input["question"], ask.input["order_id"]
    assert isinstance(q, EnumParam) and q.choices == ["tst_fee", "tst_pick"]
    assert isinstance(about, EntityParam) and about.node_type == "order"
    assert set(ask.output.fields) == {"question", "answer"}
    assert DomainContracts.model_validate(dc.model_dump()) == dc  # a dump re-validates to the same contracts


def test_a_precondition_must_name_a_declared_question_and_answer() -> None:
    with pytest.raises(ValueError, match="not an ask_customer question"):
        _contracts({"question": "nope", "answer": "yes"})
    with pytest.raises(ValueError, match="'maybe' is not an answer of tst_fee"):
        _contracts({"question": "tst_fee", "answer": "maybe"})
    with pytest.raises(ValueError, match="do not write it in"):
        DomainContracts.model_validate(
            {
                **_contracts().model_dump(exclude={"skills"}),
                "skills": [{"name": ASK_CUSTOMER, "description": "my own"}],
            }
        )
    with pytest.raises(ValueError, match="at least two distinct options"):
        _contracts(
            ask_customer={
                "about": {"param": "order_id", "node_type": "order"},
                "questions": {"x": {"kind": "choose", "options": ["a"]}},
            }
        )


class _World:
    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def answer_customer(self, question: str, about: str) -> str | None:
        return self.answers.get(f"{question}:{about}")


def test_the_simulated_customer_answers_and_the_default_one_agrees() -> None:
    _contracts()
    ask = {"question": "tst_fee", "order_id": "o1"}
    assert ask_customer(object(), ask) == {"question": "tst_fee", "answer": "yes"}  # no hook: the default
    assert ask_customer(object(), {"question": "tst_pick", "order_id": "o1"})["answer"] == "left"
    assert ask_customer(_World({"tst_fee:o1": "no"}), ask)["answer"] == "no"
    assert ask_customer(_World({}), ask)["answer"] == "yes"  # None: the default
    with pytest.raises(ValueError, match="answered 'maybe'"):
        ask_customer(_World({"tst_fee:o1": "maybe"}), ask)


def test_the_answer_is_revealed_as_a_field_of_the_entity_asked_about() -> None:
    ask = _contracts().by_name()[ASK_CUSTOMER]
    k = Knowledge(["order"])
    touched = reveal_result(
        k, ask, {"question": "tst_pick", "order_id": "o1"}, {"question": "tst_pick", "answer": "right"}
    )
    reveal_result(k, ask, {"question": "tst_fee", "order_id": "o1"}, {"question": "tst_fee", "answer": "no"})
    assert touched == [("order", "o1")]
    assert k.fields("order", "o1") == {"tst_pick": "right", "tst_fee": "no"}
