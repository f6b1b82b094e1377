"""Skill contracts: pydantic models loaded from ``configs/skills/<domain>.yaml``.

A contract is the single source of truth for a skill: what it accepts (and how to clip or reject it), what it
returns, how fast it must be, how it is retried, what to fall back to, how risky it is, what it needs at startup
and which business rules must hold before it may run. Loading validates everything; a bad file raises
:class:`ContractError` naming the file, the skill and the field, and nothing starts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

ERROR_CODES: tuple[str, ...] = (
    "TOOL_TIMEOUT",
    "INVALID_INPUT",
    "INVALID_OUTPUT",
    "CIRCUIT_OPEN",
    "RATE_LIMITED",
    "UPSTREAM_ERROR",
    "NOT_WHITELISTED",
    "DEPENDENCY_MISSING",
    "PRECONDITION_FAILED",
    "NOT_FOUND",
    "CONFLICT",
)
"""Error codes every skill may return. Skills may declare extra, domain-specific codes."""

DEFAULT_RETRYABLE: dict[str, bool] = {
    "TOOL_TIMEOUT": True,
    "INVALID_INPUT": False,
    "INVALID_OUTPUT": True,
    "CIRCUIT_OPEN": False,
    "RATE_LIMITED": True,
    "UPSTREAM_ERROR": True,
    "NOT_WHITELISTED": False,
    "DEPENDENCY_MISSING": False,
    "PRECONDITION_FAILED": False,
    "NOT_FOUND": False,
    "CONFLICT": False,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FloatParam(_Strict):
    type: Literal["float"] = "float"
    min: float = Field(description="Lower bound; smaller values are clipped with a warning.")
    max: float = Field(description="Upper bound; larger values are clipped with a warning.")
    max_from: str | None = Field(
        default=None,
        description="Name of a numeric field of the referenced entity that tightens the upper bound at call "
        "time (e.g. an order's total). Resolved by the env when it maps actions; the gateway clips to `max`.",
    )
    required: bool = Field(default=True, description="Whether the caller must pass it.")
    default: float | None = Field(default=None, description="Used when the parameter is omitted.")
    copy_from: list[str] = Field(
        default_factory=list,
        description="`<node type>.<field>` a demonstration copies the value from when several revealed values are "
        "equal (e.g. an item's price equals its single-item order's total). The policy may copy any revealed "
        "value; this only keeps demonstrations and mined prototypes consistent.",
    )
    description: str = ""

    @model_validator(mode="after")
    def _bounds(self) -> FloatParam:
        for name, v in (("min", self.min), ("max", self.max), ("default", self.default)):
            if v is not None and not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v}")
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        if self.default is not None and not self.min <= self.default <= self.max:
            raise ValueError(f"default {self.default} outside [{self.min}, {self.max}]")
        return self


class IntParam(_Strict):
    type: Literal["int"] = "int"
    min: int = Field(description="Lower bound; smaller values are clipped with a warning.")
    max: int = Field(description="Upper bound; larger values are clipped with a warning.")
    required: bool = Field(default=True, description="Whether the caller must pass it.")
    default: int | None = Field(default=None, description="Used when the parameter is omitted.")
    copy_from: list[str] = Field(default_factory=list, description="See FloatParam.copy_from.")
    description: str = ""

    @model_validator(mode="after")
    def _bounds(self) -> IntParam:
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        if self.default is not None and not self.min <= self.default <= self.max:
            raise ValueError(f"default {self.default} outside [{self.min}, {self.max}]")
        return self


class EnumParam(_Strict):
    type: Literal["enum"] = "enum"
    choices: list[str] = Field(min_length=1, description="Allowed values; anything else is INVALID_INPUT.")
    required: bool = Field(default=True, description="Whether the caller must pass it.")
    default: str | None = Field(default=None, description="Used when the parameter is omitted.")
    description: str = ""

    @model_validator(mode="after")
    def _default_in_choices(self) -> EnumParam:
        if self.default is not None and self.default not in self.choices:
            raise ValueError(f"default {self.default!r} not in choices {self.choices}")
        if len(set(self.choices)) != len(self.choices):
            raise ValueError("choices must be unique")
        return self


class BoolParam(_Strict):
    type: Literal["bool"] = "bool"
    required: bool = Field(default=True, description="Whether the caller must pass it.")
    default: bool | None = Field(default=None, description="Used when the parameter is omitted.")
    description: str = ""


class StringParam(_Strict):
    type: Literal["string"] = "string"
    max_length: int = Field(default=1024, ge=1, description="Longer strings are INVALID_INPUT.")
    required: bool = Field(default=True, description="Whether the caller must pass it.")
    default: str | None = Field(default=None, description="Used when the parameter is omitted.")
    source: str | None = Field(
        default=None,
        pattern=r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$",
        description="Where an agent takes the value from: `request.<fact>` copies a fact the customer gave (an "
        "email, a name, a zip code); `<node type>.<field>` copies that field of a revealed entity, the entity "
        "chosen by the policy's pointer among those whose field a tool result revealed (the address a lookup "
        "showed, a tracking number, an option name; the field must be in the domain schema, e.g. a `text` "
        "field). Strings that are not copied are enums (a declared vocabulary).",
    )
    max_values: int = Field(
        default=1,
        ge=1,
        le=8,
        description="`source: request.<fact>` only: the most values the request may give for the fact (a "
        "customer with two emails). Above 1 the policy chooses the value by position with an enum slot of "
        "`max_values` choices; a position past the values the request gives is INVALID_INPUT. At 1, a request "
        "that gives several values for the fact is INVALID_INPUT (the argument cannot say which).",
    )
    description: str = ""

    @model_validator(mode="after")
    def _default_fits(self) -> StringParam:
        if self.default is not None and len(self.default) > self.max_length:
            raise ValueError(f"default is {len(self.default)} characters, above max_length {self.max_length}")
        if self.max_values > 1 and self.request_fact is None:
            raise ValueError(
                "max_values is for strings copied from a request fact (`source: request.<fact>`)"
            )
        return self

    @property
    def request_fact(self) -> str | None:
        """The request fact the value is copied from (``email`` for ``source: request.email``), or None."""
        if self.source is None or not self.source.startswith("request."):
            return None
        return self.source.split(".", 1)[1]

    @property
    def copy_field(self) -> tuple[str, str] | None:
        """``(node type, field)`` of a revealed entity field the value is copied from (``("order", "address")``
        for ``source: order.address``), or None."""
        if self.source is None or self.request_fact is not None:
            return None
        t, _, f = self.source.partition(".")
        return t, f


class EntityParam(_Strict):
    type: Literal["entity"] = "entity"
    node_type: str = Field(description="Graph node type the id refers to (user, product, order, ...).")
    required: bool = Field(default=True, description="Whether the caller must pass it.")
    default: str | None = Field(default=None, description="Used when the parameter is omitted.")
    description: str = ""


class EntityListParam(_Strict):
    """A list of entity references of one node type, e.g. the ``item_ids`` of a return.

    By default a set: order does not matter and no id may repeat. ``ordered: true`` makes it a sequence (order
    matters), ``unique: false`` lets an id repeat (two units of one item; unordered, a multiset), and
    ``paired_with: <other list>`` pairs it by position with another list parameter of the skill: both have the same
    length and member ``i`` goes with the other's member ``i`` ("exchange item i for new item i"). A goal compares
    an ordered list as a sequence, any other as a multiset, and a paired list by its pairs.
    """

    type: Literal["list"] = "list"
    node_type: str = Field(description="Graph node type of every member.")
    min_items: int = Field(default=1, ge=0, description="Fewest members.")
    max_items: int = Field(default=8, ge=1, description="Most members.")
    ordered: bool = Field(default=False, description="The order of the members matters (a sequence).")
    unique: bool = Field(default=True, description="No id may appear twice (false: repeats are allowed).")
    paired_with: str | None = Field(
        default=None,
        description="Another list parameter of this skill this one is paired with by position (the same length; "
        "member i goes with its member i). Its bounds must lie within this list's.",
    )
    required: bool = Field(default=True, description="Whether the caller must pass it.")
    default: list[str] | None = Field(default=None, description="Used when the parameter is omitted.")
    description: str = ""

    @model_validator(mode="after")
    def _bounds(self) -> EntityListParam:
        if self.min_items > self.max_items:
            raise ValueError(f"min_items {self.min_items} > max_items {self.max_items}")
        return self


ParamSpec = Annotated[
    FloatParam | IntParam | EnumParam | BoolParam | StringParam | EntityParam | EntityListParam,
    Field(discriminator="type"),
]


class ErrorSpec(_Strict):
    code: str = Field(description="Error code the backend may return.")
    retryable: bool = Field(description="Whether the gateway retries on it.")
    description: str = ""


ScalarType = Literal["float", "int", "bool", "string", "list", "dict"]


ENTITY_OUTPUTS: tuple[str, ...] = ("entity", "entity_list", "entity_map")
"""Output types whose value names entities (and so reveals them)."""


class OutputField(_Strict):
    """One success-payload field. Typed entity references are how a lookup *reveals* entities.

    * ``type: entity`` (with ``node_type``): the value is an entity id; the agent now knows that entity. With
      ``id_field`` the value is a nested object instead, its id under that key and its ``fields`` revealed with it
      (``{"item_id": "i7", "price": 20.0}``).
    * ``type: entity_list``: a list of ids, or of objects whose id is under ``id_field`` (default ``id``) plus
      the ``fields`` given, each an entity of ``node_type`` revealed with those fields (``[{"item_id": ...}]``).
    * ``type: entity_map``: an object keyed by entity id, each value an object with the ``fields`` given
      (``{"credit_card_123": {"kind": "credit_card"}}``); every key is an entity of ``node_type``.
    * a scalar type with ``of: <name>``: the value is field ``<name-of-this-output>`` of the entity that input
      parameter or output field ``<name>`` refers to (``status: {type: string, of: order_id}``).
    * ``of`` on an entity, entity_list or entity_map field links the referring entity to the revealed ones (the
      ids are also stored as that field of the ``of`` entity, e.g. an order's ``items``; a map stores its keys).

    :meth:`entity_items` is the one reading of such a value: what the agent's knowledge reveals
    (:func:`~agentic_ray.domains.knowledge.reveal_result`), what the gateway's output check accepts and what a
    ``belongs_to`` precondition's ``via`` lists.
    """

    type: Literal["float", "int", "bool", "string", "list", "dict", "entity", "entity_list", "entity_map"] = (
        Field(description="Value type.")
    )
    node_type: str | None = Field(
        default=None, description="Entity type (entity, entity_list and entity_map only)."
    )
    of: str | None = Field(
        default=None, description="Input parameter or output field naming the entity this value belongs to."
    )
    fields: dict[str, ScalarType] = Field(
        default_factory=dict,
        description="Entity objects (an entity_list's or entity_map's members, a nested entity): the fields each "
        "object reveals.",
    )
    id_field: str | None = Field(
        default=None,
        description="Key holding the id in entity objects: an entity_list's objects (default `id`), or a nested "
        "`entity` object (without it an `entity` value is a plain id). Not for entity_map (its keys are the ids).",
    )
    as_field: str | None = Field(
        default=None,
        description="Name of the entity field the value is stored as (default: this name). `{param}` is replaced "
        "by the call's value of input parameter `param` (the generic ask_customer stores an answer as the field "
        "named by its question: `{question}`).",
    )

    @model_validator(mode="after")
    def _entity_type(self) -> OutputField:
        if self.type in ENTITY_OUTPUTS and not self.node_type:
            raise ValueError(f"a {self.type} output needs node_type")
        if self.type not in ENTITY_OUTPUTS and (self.node_type or self.fields or self.id_field):
            raise ValueError(
                "node_type/fields/id_field are for entity, entity_list and entity_map outputs only"
            )
        if self.type == "entity_map" and self.id_field is not None:
            raise ValueError("an entity_map is keyed by id: id_field does not apply")
        if self.type == "entity" and self.fields and self.id_field is None:
            raise ValueError("an entity output with fields is a nested object: declare its id_field")
        if self.id_field is not None and self.id_field in self.fields:
            raise ValueError(f"id_field {self.id_field!r} is the id, not one of the fields")
        return self

    @property
    def scalar_type(self) -> str:
        """The JSON type a payload value must have."""
        if self.type == "entity":
            return "dict" if self.id_field is not None else "string"
        return {"entity_list": "list", "entity_map": "dict"}.get(self.type, self.type)

    def entity_items(self, value: Any) -> list[tuple[str, dict[str, Any]]]:
        """The entities an entity-typed value names, in order, each with the declared ``fields`` it carries.

        Members that are not well formed (an object without its id, a non-string id) are skipped; the gateway's
        output check (:func:`~agentic_ray.skills.param_validation.output_problem`) rejects such payloads first.

        Returns:
            ``[(id, {field: value})]``; ``[]`` for a non-entity output or a value of the wrong shape.
        """
        key = self.id_field or "id"
        out: list[tuple[str, dict[str, Any]]] = []

        def obj(eid: Any, d: Any) -> None:
            if isinstance(eid, str) and eid:
                out.append((eid, {k: d[k] for k in self.fields if k in d} if isinstance(d, dict) else {}))

        if self.type == "entity":
            if self.id_field is None:
                obj(value, None)
            elif isinstance(value, dict):
                obj(value.get(key), value)
        elif self.type == "entity_list" and isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    obj(item, None)
                elif isinstance(item, dict):
                    obj(item.get(key), item)
        elif self.type == "entity_map" and isinstance(value, dict):
            for eid, item in value.items():
                obj(eid, item)
        return out

    def field_name(self, name: str, params: dict[str, Any]) -> str:
        """The entity field this output (called ``name``) is stored as, for a call with ``params``."""
        if self.as_field is None:
            return name
        if "{" not in self.as_field:
            return self.as_field
        return self.as_field.format_map({k: str(v) for k, v in params.items()})

    def entity_ids(self, value: Any) -> list[str]:
        """The ids of :meth:`entity_items`."""
        return [eid for eid, _f in self.entity_items(value)]


class OutputSpec(_Strict):
    fields: dict[str, OutputField] = Field(
        default_factory=dict,
        description="Success payload fields and their types; a payload that lacks one or has the wrong type "
        "is INVALID_OUTPUT (a garbled payload in a valid JSON shell). A plain type name is short for "
        "`{type: <name>}`.",
    )
    errors: list[ErrorSpec] = Field(default_factory=list, description="Declared error codes.")

    @model_validator(mode="before")
    @classmethod
    def _short_types(cls, v: Any) -> Any:
        if isinstance(v, dict) and isinstance(v.get("fields"), dict):
            v = {**v, "fields": {k: {"type": t} if isinstance(t, str) else t for k, t in v["fields"].items()}}
        return v


class SLASpec(_Strict):
    timeout_ms: float = Field(default=1000.0, gt=0, description="Hard per-attempt timeout.")
    p95_ms: float = Field(default=500.0, gt=0, description="Latency target (p95) for monitoring.")
    max_concurrency: int = Field(default=16, ge=1, description="Concurrent calls; beyond it RATE_LIMITED.")
    error_budget: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Share of failed calls (after retries) over the window above which the circuit opens. "
        "The default is loose, as in common breaker libraries; tighten it per skill (seed 000: OCR ≤0.3%).",
    )
    window: int = Field(default=50, ge=5, description="Calls in the rolling SLA window.")
    breaker_min_calls: int = Field(
        default=20, ge=1, description="Calls in the window before the breaker may trip."
    )
    breaker_reset_s: float = Field(default=5.0, gt=0, description="Open time before a half-open probe.")

    @model_validator(mode="after")
    def _p95_within_timeout(self) -> SLASpec:
        if self.p95_ms > self.timeout_ms:
            raise ValueError(f"p95_ms {self.p95_ms} exceeds timeout_ms {self.timeout_ms}")
        if self.breaker_min_calls > self.window:
            raise ValueError(
                f"breaker_min_calls {self.breaker_min_calls} exceeds window {self.window}: the breaker could "
                "never trip"
            )
        return self


class RetrySpec(_Strict):
    max_retries: int = Field(default=2, ge=0, le=10, description="Retries after the first attempt.")
    backoff_initial_ms: float = Field(default=20.0, ge=0, description="First backoff.")
    backoff_multiplier: float = Field(default=2.0, ge=1, description="Exponential growth of the backoff.")
    backoff_max_ms: float = Field(default=500.0, ge=0, description="Backoff cap.")


class FallbackSpec(_Strict):
    skill: str | None = Field(default=None, description="Another skill to call with the same params.")
    rule: str | None = Field(
        default=None, description="A named rule-based degrade the domain defines (`Domain.fallback_rules`)."
    )

    @model_validator(mode="after")
    def _one_of(self) -> FallbackSpec:
        if (self.skill is None) == (self.rule is None):
            raise ValueError("a fallback names exactly one of `skill` or `rule`")
        return self


class RiskSpec(_Strict):
    high_risk: bool = Field(default=False, description="Whether the skill is high-risk.")
    weight: float = Field(default=0.0, ge=0, description="Weight wᵢ in the L3 risk layer.")
    consequence: str | None = Field(
        default=None,
        description="What a high-risk shortcut (the call without its safety precondition, risk_mode: soft) may "
        "cause after the episode ends, e.g. a complaint or a chargeback.",
    )
    consequence_probability: float = Field(
        default=0.0, ge=0, le=1, description="Probability that a shortcut causes the consequence."
    )


class RequirementSpec(_Strict):
    kind: Literal["file", "env", "module"] = Field(description="What kind of resource.")
    target: str = Field(description="File path (relative to the contract file), env var, or module name.")


class BelongsToSpec(_Strict):
    """Membership through a revealed relation: ``member`` belongs to ``owner`` when the earlier call that names
    the owner (its parameter or payload field called ``owner``) listed the member in its output ``via``.

    ``{member: payment_method_id, owner: customer_id, via: payment_methods}`` on a precondition ``after:
    find_customer`` means: a successful ``find_customer`` for this ``customer_id`` returned the
    ``payment_method_id`` among its ``payment_methods`` (an entity, entity_list or entity_map output, read by
    :meth:`OutputField.entity_items`). A list ``member`` belongs when every id in it does.
    """

    member: str = Field(description="Entity or list parameter of this skill that must belong to the owner.")
    owner: str = Field(
        description="Entity parameter of this skill naming the owner; the earlier call has a parameter or "
        "payload field of the same name with the same value."
    )
    via: str = Field(
        description="Output field of the earlier call (entity, entity_list or entity_map of the member's node "
        "type) listing the owner's members."
    )


class PreconditionSpec(_Strict):
    """A business rule on the call history: an earlier successful call must exist.

    ``after`` names one skill, ``any_of`` alternatives (the customer is identified by email *or* by name and zip
    code). ``same`` parameters must equal the earlier call's parameter or payload field of that name; several may
    be named, and then one earlier call must match them all (the order *and* the customer it was read for).
    ``belongs_to`` asks that a parameter belong to another through a relation the earlier call revealed (the
    payment method is one of the identified customer's; see :class:`BelongsToSpec`). ``bind`` ties the earlier call
    to another one: ``{user_id: [user.find, ...]}`` means the earlier call's payload ``user_id`` equals the
    ``user_id`` of a successful call of one of those skills (the order acted on belongs to the customer who was
    identified). A ``safety`` rule is a risk check: ``risk_mode: soft`` lifts it, and the call then runs as a
    high-risk shortcut. The one implementation, read by the gateway and the action mask alike, is
    :mod:`agentic_ray.skills.preconditions`.
    """

    after: str | None = Field(default=None, description="A skill that must have succeeded earlier.")
    any_of: list[str] = Field(default_factory=list, description="Alternatives to `after`: any one of them.")
    where: dict[str, Any] = Field(
        default_factory=dict, description="Payload fields the earlier success must have had."
    )
    same: list[str] = Field(
        default_factory=list,
        description="Entity parameters whose values must be equal in both calls (e.g. order_id); with several, "
        "one earlier call matches them all.",
    )
    belongs_to: list[BelongsToSpec] = Field(
        default_factory=list,
        description="Membership between two entity parameters through a relation the earlier call revealed.",
    )
    bind: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Payload field of the earlier call -> skills one of whose successful calls has the same "
        "value in that field.",
    )
    safety: bool = Field(default=False, description="A safety check that risk_mode: soft turns into a risk.")
    description: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> PreconditionSpec:
        if (self.after is None) == (not self.any_of):
            raise ValueError("a precondition names exactly one of `after` or `any_of`")
        return self

    @property
    def skills(self) -> list[str]:
        """The skill(s) whose earlier success satisfies it."""
        return [self.after] if self.after is not None else list(self.any_of)

    @property
    def constrained(self) -> tuple[str, ...]:
        """The parameters it constrains (``same``, then each ``belongs_to`` owner and member), in order."""
        names = [*self.same, *(n for b in self.belongs_to for n in (b.owner, b.member))]
        return tuple(dict.fromkeys(names))


class SkillContract(_Strict):
    name: str = Field(
        pattern=r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$",
        description="Any style: `refund.trigger`, `lookup_customer_by_email`.",
    )
    version: str = Field(default="1.0", description="Contract version.")
    description: str = Field(min_length=1, description="What the skill does.")
    handler: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="`module:function` of the in-process backend (also hosted over HTTP).",
    )
    input: dict[str, ParamSpec] = Field(default_factory=dict, description="Parameters.")
    output: OutputSpec = Field(default_factory=OutputSpec, description="Payload and errors.")
    sla: SLASpec = Field(default_factory=SLASpec, description="Service-level agreement.")
    retry: RetrySpec = Field(default_factory=RetrySpec, description="Retry policy.")
    fallback: list[FallbackSpec] = Field(default_factory=list, description="Tried in order after retries.")
    risk: RiskSpec = Field(default_factory=RiskSpec, description="Risk of the action.")
    requires: list[RequirementSpec] = Field(default_factory=list, description="Checked at startup.")
    preconditions: list[PreconditionSpec] = Field(default_factory=list, description="Business rules.")
    allowed: bool = Field(default=True, description="Whether the skill is on the whitelist.")

    def retryable(self, code: str) -> bool:
        """Whether an error code is retryable for this skill (declared errors win over defaults)."""
        for e in self.output.errors:
            if e.code == code:
                return e.retryable
        return DEFAULT_RETRYABLE.get(code, False)


ASK_CUSTOMER = "ask_customer"
"""Name of the generic skill that asks the customer (see :class:`AskCustomerSpec`)."""

CONFIRM_ANSWERS: tuple[str, str] = ("yes", "no")
"""The answers to a confirmation (``kind: confirm``)."""


class QuestionSpec(_Strict):
    """One question the agent may ask the customer: a confirmation (answered ``yes`` or ``no``) or a choice
    between declared options."""

    kind: Literal["confirm", "choose"] = Field(
        description="A yes/no confirmation, or a choice among `options`."
    )
    options: list[str] = Field(
        default_factory=list,
        description="The answers of a choice (at least two); a confirmation's are `yes` and `no` (leave it empty).",
    )
    description: str = ""

    @model_validator(mode="after")
    def _options(self) -> QuestionSpec:
        if self.kind == "confirm" and self.options:
            raise ValueError("a confirmation is answered yes or no: give no options")
        if self.kind == "choose" and (len(self.options) < 2 or len(set(self.options)) != len(self.options)):
            raise ValueError("a choice needs at least two distinct options")
        return self

    @property
    def answers(self) -> tuple[str, ...]:
        """What the customer may answer."""
        return CONFIRM_ANSWERS if self.kind == "confirm" else tuple(self.options)


class AskAboutSpec(_Strict):
    param: str = Field(
        pattern=r"^[a-z][a-z0-9_]*$",
        description="Name of the entity parameter naming what a question is about (e.g. order_id); a "
        "precondition's `same:` matches it by this name.",
    )
    node_type: str = Field(description="Node type of that entity; each answer is revealed as its field.")


class AskCustomerSpec(_Strict):
    """The generic ``ask_customer`` skill, as a domain's contracts file declares it (top-level ``ask_customer:``).

    The skill itself is built by the project (:func:`~agentic_ray.skills.ask_customer.ask_customer_contract`), not
    written per domain: inputs ``question`` (an enum of the declared questions) and the ``about`` entity; output
    ``question`` and ``answer``; the answer is revealed as field ``<question>`` of the ``about``
    entity. A write that needs the customer's consent names it in a precondition::

        - after: ask_customer
          where: {question: cancel_fee, answer: "yes"}
          same: [order_id]
    """

    about: AskAboutSpec = Field(description="The entity a question is about.")
    questions: dict[str, QuestionSpec] = Field(
        min_length=1, description="Question name (an enum value of `question`) -> its kind and options."
    )
    preconditions: list[PreconditionSpec] = Field(
        default_factory=list, description="Business rules before asking (e.g. the customer is identified)."
    )
    description: str = Field(default="", description="Appended to the generic skill's description.")

    @model_validator(mode="after")
    def _names(self) -> AskCustomerSpec:
        bad = [q for q in self.questions if not q.isidentifier() or q in ("question", "answer")]
        if bad:
            raise ValueError(f"question names must be identifiers other than question/answer: {bad}")
        if self.about.param in ("question", "answer"):
            raise ValueError("about.param may not be `question` or `answer`")
        return self


class DomainContracts(_Strict):
    domain: str = Field(description="Domain name, e.g. ecommerce.")
    version: str = Field(default="1", description="Version of this skill set.")
    node_types: list[str] | None = Field(
        default=None,
        description="The domain's entity node types; when given, every entity (or list) parameter and entity "
        "output must name one.",
    )
    skills: list[SkillContract] = Field(min_length=1, description="The skills.")
    ask_customer: AskCustomerSpec | None = Field(
        default=None,
        description="Opt in to the generic `ask_customer` skill (appended after the domain's skills) with the "
        "questions the agent may ask.",
    )
    source: str = Field(default="", description="File it was loaded from (set by the loader).")

    @model_validator(mode="before")
    @classmethod
    def _add_ask_customer(cls, v: Any) -> Any:
        """Append the generic ``ask_customer`` skill built from the ``ask_customer:`` block (once)."""
        if not isinstance(v, dict) or v.get("ask_customer") is None:
            return v
        from agentic_ray.skills.ask_customer import ask_customer_contract

        spec = AskCustomerSpec.model_validate(v["ask_customer"])
        made = ask_customer_contract(spec)
        skills = list(v.get("skills") or [])
        named = [
            s for s in skills if (s.name if isinstance(s, SkillContract) else s.get("name")) == ASK_CUSTOMER
        ]
        rewritten = [SkillContract.model_validate(s) for s in named] != [made]  # a re-validated dump is fine
        if named and rewritten:
            raise ValueError(
                f"{ASK_CUSTOMER!r} is the generic skill the `ask_customer:` block declares: do not write it in "
                "`skills`"
            )
        return {**v, "ask_customer": spec, "skills": skills if named else [*skills, made]}

    @model_validator(mode="after")
    def _cross_refs(self) -> DomainContracts:
        names = [s.name for s in self.skills]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate skill names: {sorted(dup)}")
        by = {s.name: s for s in self.skills}
        problems = [p for i, s in enumerate(self.skills) for p in _skill_problems(i, s, by, self.node_types)]
        if self.ask_customer is not None:
            problems += _answer_problems(self.skills, self.ask_customer)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def check_rules(self, rules: Iterable[str]) -> None:
        """Raises :class:`ContractError` if a fallback names a rule the domain does not define."""
        known = set(rules)
        for s in self.skills:
            for fb in s.fallback:
                if fb.rule is not None and fb.rule not in known:
                    raise ContractError(
                        f"{self.source or self.domain}: skill {s.name}: fallback rule {fb.rule!r} is not defined "
                        f"by the domain (known: {sorted(known)})"
                    )

    def by_name(self) -> dict[str, SkillContract]:
        return {s.name: s for s in self.skills}


def _skill_problems(
    i: int, s: SkillContract, by: dict[str, SkillContract], node_types: list[str] | None
) -> list[str]:
    """What is impossible about skill ``i`` given the other skills: each item names its field. (Fallback rules
    are the domain's; :meth:`DomainContracts.check_rules` checks them.)"""
    at = f"skills.{i} ({s.name})"
    out: list[str] = []
    if node_types is not None:
        for pname, p in s.input.items():
            if isinstance(p, EntityParam | EntityListParam) and p.node_type not in node_types:
                out.append(
                    f"{at}.input.{pname}.node_type: unknown node type {p.node_type!r} (known: {node_types})"
                )
        for pname, p in s.input.items():
            cf = p.copy_field if isinstance(p, StringParam) else None
            if cf is not None and cf[0] not in node_types:
                out.append(f"{at}.input.{pname}.source: unknown node type {cf[0]!r} (known: {node_types})")
        for fname, f in s.output.fields.items():
            if f.node_type is not None and f.node_type not in node_types:
                out.append(
                    f"{at}.output.fields.{fname}.node_type: unknown node type {f.node_type!r} (known: {node_types})"
                )
    for j, fb in enumerate(s.fallback):
        if fb.skill is not None:
            fc = by.get(fb.skill)
            if fc is None:
                out.append(f"{at}.fallback.{j}.skill: unknown skill {fb.skill!r}")
                continue
            if fc.name == s.name:
                out.append(f"{at}.fallback.{j}.skill: a skill cannot fall back to itself")
                continue
            lacking = [k for k in s.input if k not in fc.input]
            if lacking:
                out.append(f"{at}.fallback.{j}.skill: {fb.skill} does not accept input(s) {lacking}")
            wrong = [k for k, t in s.output.fields.items() if fc.output.fields.get(k) != t]
            if wrong:
                out.append(
                    f"{at}.fallback.{j}.skill: {fb.skill} does not return output field(s) {wrong} as typed"
                )
    for j, pc in enumerate(s.preconditions):
        where = f"{at}.preconditions.{j}"
        named = [("after" if pc.after is not None else "any_of", a) for a in pc.skills]
        named += [(f"bind.{fld}", a) for fld, skills in pc.bind.items() for a in skills]
        for key, a in named:
            if a not in by:
                out.append(f"{where}.{key}: unknown skill {a!r}")
            elif a == s.name:
                out.append(f"{where}.{key}: a skill cannot require an earlier call of itself")
        named_in_after = [(f"{where}.same", n) for n in pc.same]
        named_in_after += [
            (f"{where}.belongs_to.{b_i}.owner", b.owner) for b_i, b in enumerate(pc.belongs_to)
        ]
        for key, name in named_in_after:
            if name not in s.input:
                out.append(f"{key}: {name!r} is not an input")
            elif not isinstance(s.input[name], EntityParam):
                out.append(f"{key}: {name!r} is not a single-entity parameter")
            for a in pc.skills:
                after = by.get(a)
                if after is not None and name not in after.input and name not in after.output.fields:
                    out.append(f"{key}: {name!r} is neither an input nor an output of {a}")
        for b_i, b in enumerate(pc.belongs_to):
            key = f"{where}.belongs_to.{b_i}"
            member = s.input.get(b.member)
            if not isinstance(member, EntityParam | EntityListParam):
                out.append(f"{key}.member: {b.member!r} is not an entity or list input")
                continue
            if b.member == b.owner:
                out.append(f"{key}.member: an entity cannot belong to itself")
            for a in pc.skills:
                after = by.get(a)
                via = after.output.fields.get(b.via) if after is not None else None
                if after is None:
                    continue
                if via is None or via.type not in ENTITY_OUTPUTS:
                    out.append(f"{key}.via: {b.via!r} is not an entity output of {a}")
                elif via.node_type != member.node_type:
                    out.append(
                        f"{key}.via: {a}'s {b.via!r} lists {via.node_type} entities, {b.member!r} is a "
                        f"{member.node_type}"
                    )
        for a in pc.skills:
            after = by.get(a)
            if after is None or not after.output.fields:
                continue
            for k, v in pc.where.items():
                typ = after.output.fields.get(k)
                if typ is None:
                    out.append(f"{where}.where: {k!r} is not an output field of {a}")
                elif not _has_type(v, typ.scalar_type):
                    out.append(f"{where}.where.{k}: {v!r} can never equal {a}'s {typ.scalar_type} field")
        for fld, skills in pc.bind.items():
            for a in [*pc.skills, *skills]:
                after = by.get(a)
                if after is not None and after.output.fields and fld not in after.output.fields:
                    out.append(f"{where}.bind: {fld!r} is not an output field of {a}")
    for name, spec in s.input.items():
        if isinstance(spec, EntityListParam) and spec.min_items < 1 and spec.required:
            out.append(f"{at}.input.{name}: a required list needs min_items >= 1")
        if isinstance(spec, EntityListParam) and spec.paired_with is not None:
            out += _pairing_problems(f"{at}.input.{name}.paired_with", name, spec, s.input)
    for name, f in s.output.fields.items():
        if f.of is not None and f.of not in s.input and f.of not in s.output.fields:
            out.append(f"{at}.output.fields.{name}.of: {f.of!r} is neither an input nor an output")
        for ph in _placeholders(f.as_field or ""):
            if ph not in s.input or not s.input[ph].required:
                out.append(f"{at}.output.fields.{name}.as_field: {{{ph}}} is not a required input")
    return out


def _answer_problems(skills: list[SkillContract], spec: AskCustomerSpec) -> list[str]:
    """A precondition on ``ask_customer`` whose ``where`` names a question or an answer that does not exist."""
    out: list[str] = []
    for i, s in enumerate(skills):
        for j, pc in enumerate(s.preconditions):
            if ASK_CUSTOMER not in pc.skills:
                continue
            at = f"skills.{i} ({s.name}).preconditions.{j}.where"
            q = pc.where.get("question")
            if q is not None and q not in spec.questions:
                out.append(f"{at}.question: {q!r} is not an ask_customer question ({sorted(spec.questions)})")
            elif "answer" in pc.where:
                answers = (
                    spec.questions[q].answers
                    if q is not None
                    else {a for x in spec.questions.values() for a in x.answers}
                )
                if pc.where["answer"] not in answers:
                    out.append(
                        f"{at}.answer: {pc.where['answer']!r} is not an answer of {q or 'any question'}"
                    )
    return out


def _pairing_problems(where: str, name: str, spec: EntityListParam, inputs: dict[str, Any]) -> list[str]:
    """What is wrong with list ``name`` being ``paired_with`` another input (its leader)."""
    lead = inputs.get(spec.paired_with or "")
    if not isinstance(lead, EntityListParam):
        return [f"{where}: {spec.paired_with!r} is not a list parameter of this skill"]
    if spec.paired_with == name:
        return [f"{where}: a list cannot be paired with itself"]
    if lead.paired_with is not None:
        return [f"{where}: {spec.paired_with!r} is itself paired (pair each list with one leader)"]
    if not spec.min_items <= lead.min_items <= lead.max_items <= spec.max_items:
        return [
            f"{where}: {spec.paired_with!r} takes {lead.min_items}..{lead.max_items} members, outside this list's "
            f"{spec.min_items}..{spec.max_items}"
        ]
    if lead.required != spec.required:
        return [f"{where}: a paired list and its leader must both be required or both optional"]
    return []


def _placeholders(template: str) -> list[str]:
    """The ``{name}`` fields of a template (``as_field``)."""
    import string

    return [f for _lit, f, _spec, _conv in string.Formatter().parse(template) if f is not None]


def _has_type(v: Any, typ: str) -> bool:
    if typ in ("int", "float"):
        return (
            isinstance(v, int | float) and not isinstance(v, bool) and (typ == "float" or isinstance(v, int))
        )
    py = {"bool": bool, "string": str, "list": list, "dict": dict}[typ]
    return isinstance(v, py)


class ContractError(ValueError):
    """A skill file failed validation. The message names the file, the skill and the field."""


def _skill_name(raw: Any, loc: tuple[Any, ...]) -> str:
    if len(loc) >= 2 and loc[0] == "skills" and isinstance(loc[1], int):
        try:
            return str(raw["skills"][loc[1]].get("name", f"#{loc[1]}"))
        except (KeyError, IndexError, TypeError, AttributeError):
            return f"#{loc[1]}"
    return "-"


def load_contracts(path: str | Path) -> DomainContracts:
    """Load and validate one skill file.

    Args:
        path: a YAML file with ``domain``, ``version`` and ``skills``.

    Returns:
        The validated contracts.

    Raises:
        ContractError: with ``file``, ``skill`` and ``field`` in the message.
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ContractError(f"{path}: cannot read YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ContractError(f"{path}: top level must be a mapping with `domain` and `skills`")
    try:
        dc = DomainContracts.model_validate({**raw, "source": str(path)})
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = tuple(err["loc"])
            if not loc:  # a cross-skill check: its message names skill and field itself
                msg = str(err["msg"]).removeprefix("Value error, ")
                lines += [f"{path}: {m}" for m in msg.split("; ")]
                continue
            field = ".".join(str(p) for p in loc)
            lines.append(f"{path}: skill {_skill_name(raw, loc)}: field {field}: {err['msg']}")
        raise ContractError("\n".join(lines)) from e
    return dc


def domain_file(domain: str, root: str | Path | None = None) -> Path:
    """Path of ``configs/skills/<domain>.yaml`` (repo checkout or installed package data)."""
    base = Path(root) if root is not None else config_root() / "skills"
    return base / f"{domain}.yaml"


def config_root() -> Path:
    """The ``configs/`` folder: ``$AGENTIC_RAY_CONFIGS`` or the one next to the package."""
    import os

    env = os.environ.get("AGENTIC_RAY_CONFIGS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "configs"
