"""The generic ``ask_customer`` skill: a confirmation or a choice, answered by the domain's simulated customer.

A domain opts in with a top-level ``ask_customer:`` block in its contracts file
(:class:`~agentic_ray.skills.contracts.AskCustomerSpec`: what a question is about, the questions, optional
preconditions); :func:`ask_customer_contract` builds the one contract every domain gets from it, and
:class:`~agentic_ray.skills.contracts.DomainContracts` appends it after the domain's own skills. Nothing about it
is written per domain:

* inputs ``question`` (an enum of the declared questions) and the entity the question is about (the block's
  ``about.param``, e.g. ``order_id``);
* output ``question`` and ``answer``; the answer is revealed as field ``<question>`` of that entity (the domain's
  schema encodes it as a category field with the question's answers, checked by
  :func:`~agentic_ray.envs.observation.build_specs`), so the policy reads it as it reads any tool result;
* the handler :func:`ask_customer` asks the world's simulated customer, the optional hook
  ``world.answer_customer(question, about) -> str | None`` (:class:`~agentic_ray.domains.protocol.
  SimulatedCustomer`). A world without it, or a None answer, gets the default customer: ``yes`` to a
  confirmation, the first option of a choice.

A write that needs consent names the answer in a precondition (``after: ask_customer``, ``where: {question: ...,
answer: "yes"}``, ``same: [<about.param>]``), so the action mask and the gateway forbid it until the customer said
yes, from the one definition in :mod:`agentic_ray.skills.preconditions`. An ask is a step like any other: it
counts in the episode's steps, its efficiency and the eval metrics, so a task's ``optimal_steps`` includes it.
"""

from __future__ import annotations

import threading
from typing import Any

from agentic_ray.skills.contracts import (
    ASK_CUSTOMER,
    AskCustomerSpec,
    EntityParam,
    EnumParam,
    OutputField,
    OutputSpec,
    SkillContract,
)

__all__ = ["ASK_CUSTOMER", "answers_of", "ask_customer", "ask_customer_contract", "default_answer"]

HANDLER = f"{__name__}:ask_customer"

_ANSWERS: dict[str, tuple[tuple[str, ...], str]] = {}
"""Question -> (its answers, the ``about`` parameter), for every ``ask_customer`` contract built in this process
(the handler sees only ``(world, params)``; every process that hosts the skill loads its contracts first)."""
_LOCK = threading.Lock()


def ask_customer_contract(spec: AskCustomerSpec) -> SkillContract:
    """The generic ``ask_customer`` contract for a domain's ``ask_customer:`` block.

    Raises:
        ValueError: a question of this name was declared in this process with other answers or another
            ``about`` parameter (the handler finds a question by its name).
    """
    with _LOCK:
        for q, qs in spec.questions.items():
            entry = (qs.answers, spec.about.param)
            if _ANSWERS.setdefault(q, entry) != entry:
                raise ValueError(
                    f"ask_customer question {q!r} is declared with answers {list(qs.answers)} about "
                    f"{spec.about.param!r}, but another contract declared it with {list(_ANSWERS[q][0])} about "
                    f"{_ANSWERS[q][1]!r}: give it another name"
                )
    listed = "; ".join(
        f"{q}: {qs.description or qs.kind} ({'/'.join(qs.answers)})" for q, qs in spec.questions.items()
    )
    return SkillContract(
        name=ASK_CUSTOMER,
        description=(
            "Ask the customer a confirmation or a choice and get their answer, revealed on the entity the question "
            f"is about. Questions: {listed}." + (f" {spec.description}" if spec.description else "")
        ),
        handler=HANDLER,
        input={
            "question": EnumParam(choices=list(spec.questions), description="What to ask."),
            spec.about.param: EntityParam(node_type=spec.about.node_type, description="What it is about."),
        },
        output=OutputSpec(
            fields={
                "question": OutputField(type="string"),
                "answer": OutputField(type="string", of=spec.about.param, as_field="{question}"),
            }
        ),
        preconditions=list(spec.preconditions),
    )


def answers_of(question: str) -> tuple[str, ...]:
    """The answers of a declared question (KeyError when none was declared in this process)."""
    return _ANSWERS[question][0]


def default_answer(question: str) -> str:
    """The default customer's answer: ``yes`` to a confirmation, the first option of a choice."""
    return answers_of(question)[0]


def ask_customer(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Handler: the simulated customer's answer to ``params["question"]`` about ``params[<about>]``.

    Raises:
        ValueError: the world's customer gave an answer the question does not have (a domain bug; the gateway
            reports it as ``UPSTREAM_ERROR``).
    """
    question = str(params["question"])
    answers, about_param = _ANSWERS[question]
    about = str(params[about_param])
    hook = getattr(world, "answer_customer", None)
    answer = hook(question, about) if callable(hook) else None
    if answer is None:
        answer = answers[0]
    if answer not in answers:
        raise ValueError(
            f"the simulated customer answered {answer!r} to {question!r}; its answers are {answers}"
        )
    return {"question": question, "answer": answer}
