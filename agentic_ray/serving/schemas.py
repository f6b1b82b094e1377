"""Request and response bodies of the policy service (the OpenAPI schema at ``/openapi.json``).

Every request model forbids unknown fields, so a misspelt field is a 422 that names it, and is *strict*: no
coercion (``"yes"`` is not a boolean, ``"1"``, ``1.0`` or ``false`` not an integer) and no non-finite number
(``NaN``, ``Infinity``, or ``1e400``, which parses as infinity), in typed fields and in the free-form JSON ones
(:data:`JsonObject`) alike. The structured goal of a request maps one to one onto
:class:`~agentic_ray.domains.protocol.Task` (see :mod:`agentic_ray.serving.request_check`, which also checks it
against the served domain's contracts and schema).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from agentic_ray.serving.settings import StrategyMode

ArgValue = str | int | float | bool | list[str]
FeedbackReason = Literal["wrong_steps", "outdated", "not_solved", "other"]


def _finite_json(value: dict[str, Any]) -> dict[str, Any]:
    """Refuse non-finite numbers anywhere in a free-form JSON object, naming where (the nesting depth is already
    bounded when the body is parsed: ``http_guards``)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{path.lstrip('.') or 'value'}: not a finite number ({v})")
        if isinstance(v, dict):
            stack.extend((f"{path}.{k}", x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_finite_json)]
"""A free-form JSON object (tool parameters and payloads, domain data) without non-finite numbers."""


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


MAX_TEXT_CHARS = 4000
"""Longest customer turn the service reads (a longer one is a 422)."""
MAX_HISTORY_TURNS = 16
"""Most earlier turns a request may carry."""

CustomerText = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
"""One customer turn: at most :data:`MAX_TEXT_CHARS` characters (pydantic refuses a lone surrogate, which no
tokenizer takes)."""

JsonInt = Annotated[int, BeforeValidator(_integral)]
"""An integer as JSON Schema reads one: ``3`` or ``3.0``, but not ``3.5``, ``"3"`` or ``true`` (the models are
strict, and pydantic's lax int would take the string and the boolean)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------------------------------------------- requests
class EntityRefIn(_Body):
    """An entity the request names by id."""

    type: str = Field(min_length=1, max_length=64, description="Entity type of the domain schema.")
    id: str = Field(min_length=1, max_length=128, description="Entity id.")


class RequestIn(_Body):
    """What the customer said."""

    text: CustomerText = Field(
        default="",
        description="The request in natural language: the customer's latest turn. With no `goals`, the served "
        "domain's goal parser reads the goal DAG, the facts and the entities from it (and `history`).",
    )
    history: list[CustomerText] = Field(
        default_factory=list,
        max_length=MAX_HISTORY_TURNS,
        description="The customer's earlier turns of the conversation, oldest first (read with `text` by the goal "
        "parser).",
    )
    facts: dict[str, str | Annotated[list[str], Field(min_length=1, max_length=8)]] = Field(
        default_factory=dict,
        max_length=32,
        description="Values the customer gave that arguments may copy (e.g. email, name, zip); a list when the "
        "customer gave several values for one fact (an argument then chooses one by position).",
    )
    mentioned: list[EntityRefIn] = Field(
        default_factory=list, max_length=64, description="Entities the request names by id."
    )


class GoalIn(_Body):
    """One subgoal: the skill whose successful call satisfies it, with the constraints the client states."""

    id: str = Field(min_length=1, max_length=64, description="Unique within the task.")
    skill: str = Field(min_length=1, max_length=128, description="Skill that satisfies the goal.")
    args: dict[str, ArgValue] = Field(
        default_factory=dict,
        max_length=32,
        description="Required argument values the client knows: enum values, entity ids the customer named.",
    )
    numeric: dict[str, float] = Field(
        default_factory=dict,
        max_length=16,
        description="Required numeric arguments (matched with tolerance).",
    )
    deps: list[str] = Field(default_factory=list, max_length=32, description="Ids of prerequisite goals.")
    priority: JsonInt = Field(default=1, ge=0, le=100, description="Larger is more urgent.")
    tolerance: float = Field(default=0.02, ge=0, le=1, description="Relative tolerance of numeric targets.")
    description: str = Field(default="", max_length=1000, description="What the goal means for the customer.")
    hints: dict[str, str] = Field(
        default_factory=dict, max_length=16, description="Facts about the entity the goal means (goal hints)."
    )
    safety_check: bool = Field(default=False, description="The goal is a safety check of a high-risk skill.")
    on_answer: list[Annotated[str, Field(max_length=64)]] | None = Field(
        default=None,
        min_length=2,
        max_length=2,
        description="`[goal id, answer]`: the goal applies only if the customer's answer to that ask_customer goal "
        "(one of `deps`) is `answer`; another answer voids it.",
    )


class TaskIn(_Body):
    """The request as a task: the customer's words and facts, plus the structured goal DAG or, without one, the
    goal parser's reading of the words."""

    request: RequestIn = Field(default_factory=RequestIn, description="What the customer said.")
    goals: list[GoalIn] = Field(
        default_factory=list,
        max_length=64,
        description="The goal DAG (structured). Empty: the goal parser reads it from `request.text`.",
    )
    optimal_steps: Annotated[int, Field(ge=1, le=256), BeforeValidator(_integral)] | None = Field(
        default=None, description="Fewest calls that solve the task (default: one per goal)."
    )
    budget: Annotated[int, Field(ge=1, le=512), BeforeValidator(_integral)] | None = Field(
        default=None, description="Step budget (default: the env's rule on optimal_steps)."
    )
    relevant: list[str] = Field(
        default_factory=list, max_length=64, description="Ids of the entities the task is about."
    )
    family: str = Field(default="request", max_length=64, description="Task family label (free text).")
    short_term_window: Annotated[int, Field(ge=1, le=256), BeforeValidator(_integral)] | None = Field(
        default=None,
        description="Turns the request stays in the observation (the task's short-term window, as the env "
        "applies it in training: after that many calls, the entities it names are no longer marked as named). "
        "Absent: the whole conversation.",
    )
    extra: JsonObject = Field(
        default_factory=dict, description="Domain data for the rule-based policy (never read by the model)."
    )

    @model_validator(mode="after")
    def _structured(self) -> TaskIn:
        if not self.goals and not self.request.text.strip():
            raise ValueError(
                "goals: give the goal DAG, or the customer's words in request.text for the goal parser"
            )
        return self


class ToolStatsIn(_Body):
    """Live health of one tool, as the client's gateway measures it (absent: a healthy tool with no history)."""

    p50_ms: float = Field(default=0.0, ge=0, le=1e7, description="Median latency.")
    p95_ms: float = Field(default=0.0, ge=0, le=1e7, description="95th percentile latency.")
    error_rate: float = Field(default=0.0, ge=0, le=1, description="Failed calls / calls (after retries).")
    attempt_error_rate: float = Field(default=0.0, ge=0, le=1, description="Failed attempts / attempts.")
    calls: JsonInt = Field(default=0, ge=0, le=10**9, description="Calls in the window.")
    breaker: Literal["closed", "open", "half_open"] = Field(default="closed", description="Breaker state.")


class TranscriptCallIn(_Body):
    """One executed call and its result."""

    skill: str = Field(min_length=1, max_length=128, description="Skill called.")
    params: JsonObject = Field(default_factory=dict, description="Arguments as sent to the tool.")
    result_code: str = Field(
        default="OK", pattern=r"^[A-Z][A-Z_]{0,39}$", description="OK or the gateway's error code."
    )
    payload: JsonObject = Field(default_factory=dict, description="The success payload (OK calls).")
    fallback_used: str | None = Field(
        default=None, max_length=128, description="The fallback that answered, if any (a degraded result)."
    )
    trace_id: str | None = Field(
        default=None,
        max_length=128,
        description="trace_id of the /v1/act decision that proposed this call (reports its outcome to the "
        "canary's live TCSR).",
    )


class ActRequest(_Body):
    """``POST /v1/act``: decide the next call from the request and the transcript so far."""

    domain: str = Field(min_length=1, max_length=64, description="The served domain.")
    task: TaskIn = Field(description="The request and its structured goal.")
    transcript: list[TranscriptCallIn] = Field(
        default_factory=list, max_length=256, description="Calls so far, in order."
    )
    tool_stats: dict[str, ToolStatsIn] = Field(
        default_factory=dict,
        max_length=256,
        description="Live tool health by skill (default: healthy, no history).",
    )
    conversation_id: str | None = Field(
        default=None,
        max_length=128,
        description="Keeps a conversation on one policy version during a canary (default: a hash of the task).",
    )


class SessionCreate(_Body):
    """``POST /v1/sessions`` or ``/v1/episodes``: start an agent-mode episode on a task the server draws, or on
    the customer's words (``text``) in the world of one."""

    model_config = ConfigDict(
        json_schema_extra={  # the `_history_needs_text` rule, for clients and fuzzers
            "if": {"required": ["history"]},
            "then": {"required": ["text"], "properties": {"text": {"type": "string"}}},
        }
    )

    domain: str = Field(min_length=1, max_length=64, description="The served domain.")
    family: str | None = Field(
        default=None,
        max_length=64,
        description="Task family (default: round-robin; with `text`, the parsed family). With `text` it picks only "
        "the simulated world, with `seed`.",
    )
    seed: Annotated[int, Field(ge=0, lt=2**31), BeforeValidator(_integral)] | None = Field(
        default=None, description="Task seed (default: the family's next validation seed)."
    )
    text: CustomerText | None = Field(
        default=None,
        description="The customer's latest turn: the goal parser reads the task's goals, facts and entities from "
        "it (and `history`) instead of the drawn task's. An uncertain or incomplete parse answers a `clarify` and "
        "starts no episode.",
    )
    history: list[CustomerText] = Field(
        default_factory=list,
        max_length=MAX_HISTORY_TURNS,
        description="The customer's earlier turns, oldest first (with `text`).",
    )

    @model_validator(mode="after")
    def _history_needs_text(self) -> SessionCreate:
        if "history" in self.model_fields_set and self.text is None:
            raise ValueError("history: only read with text")
        return self


class SessionStepIn(_Body):
    """``POST /v1/sessions/{id}/step``: one decision, executed through the ToolExecutor. No call can be
    injected: the policy (or the rule-based fallback) chooses, the executor's whitelist guards."""


class FeedbackIn(_Body):
    """``POST /v1/feedback``."""

    model_config = ConfigDict(
        json_schema_extra={  # the `_reason` rule, for clients and fuzzers
            "if": {"properties": {"outcome": {"const": "failure"}}, "required": ["outcome"]},
            "then": {"properties": {"reason": {"type": "string"}}, "required": ["reason"]},
        }
    )

    trace_id: str = Field(min_length=1, max_length=128, description="A decision's or an episode's trace_id.")
    outcome: Literal["success", "failure"] = Field(description="How it went for the user.")
    reason: FeedbackReason | None = Field(default=None, description="Why it failed (required for failure).")
    comment: str = Field(default="", max_length=2000, description="Free text.")

    @model_validator(mode="after")
    def _reason(self) -> FeedbackIn:
        if self.outcome == "failure" and self.reason is None:
            raise ValueError("reason: required when outcome is failure")
        return self


class StrategyIn(_Body):
    """``PUT /v1/strategy``."""

    strategy_mode: StrategyMode = Field(
        description="learned: the policy modules decide; rules: the domain's scripted expert decides."
    )


# ---------------------------------------------------------------------------------------------------- responses
class GoalOut(_Out):
    """One goal of a parsed goal DAG (the arguments the text states; those a lookup finds are left out)."""

    id: str = Field(description="Unique within the task.")
    skill: str = Field(description="Skill that satisfies the goal.")
    args: dict[str, Any] = Field(description="Required argument values the text states.")
    deps: list[str] = Field(description="Ids of prerequisite goals.")
    priority: int = Field(description="Larger is more urgent.")
    hints: dict[str, str] = Field(description="Facts about the entity the goal means.")
    safety_check: bool = Field(description="The goal is a safety check of a high-risk skill.")


class EntityRefOut(_Out):
    """An entity named by id."""

    type: str = Field(description="Entity type of the domain schema.")
    id: str = Field(description="Entity id.")


class SlotSpanOut(_Out):
    """Where one slot value came from."""

    slot: str = Field(description="The slot (an entity slot, an enum slot or a fact key).")
    value: str = Field(description="The normalised value.")
    turn: int = Field(description="Turn index: 0.. for `history`, len(history) for `text`.")
    start: int = Field(description="First character of the span in that turn.")
    end: int = Field(description="One past its last character.")
    subtask: int | None = Field(description="The request (of a composite one) the slot fills.")
    confidence: float = Field(description="The tagger's mean probability over the span.")


class ClarifyOut(_Out):
    """What to ask the customer before acting (the parse is unsure, or lacks a slot or the identity)."""

    reason: Literal["missing_slots", "unsure"] = Field(
        description="missing_slots: a needed slot or the identity was not given; unsure: the family is uncertain."
    )
    missing: list[str] = Field(description="Slots to ask for (e.g. `order`, `email`).")
    identity_options: list[list[str]] = Field(
        description="For a missing identity: the fact sets any one of which identifies the customer."
    )
    families: list[str] = Field(
        description="The family (or families) the parser believes the request is about."
    )


class ParsedOut(_Out):
    """The goal parser's reading of the customer's words."""

    families: list[str] = Field(description="Task families, in the order the customer raised them.")
    family: str = Field(description="The task family label (the composite family for several).")
    goals: list[GoalOut] = Field(description="The goal DAG (empty with a clarification).")
    facts: dict[str, str | list[str]] = Field(
        description="Values the customer gave (email, name, zip...); a list for a fact with several values."
    )
    mentioned: list[EntityRefOut] = Field(description="Entities named by id.")
    slots: list[SlotSpanOut] = Field(description="Every extracted slot with its span.")
    confidence: float = Field(description="The chosen families' share of the classifier's probability mass.")
    parse_ms: float = Field(description="Wall time of the parse in the gateway.")


class ClarifyResponse(_Out):
    """The answer to a text request that cannot be acted on yet: what to ask, never a guessed action."""

    kind: Literal["clarify"] = Field(description="Always `clarify`.")
    trace_id: str = Field(description="Identifies this answer in logs and feedback.")
    clarify: ClarifyOut = Field(description="What to ask the customer.")
    parsed: ParsedOut = Field(description="What the parser read.")


class CallOut(_Out):
    """A call: skill and arguments."""

    skill: str = Field(description="Skill name.")
    arguments: dict[str, Any] = Field(description="Arguments (validated against the contract when valid).")


class Alternative(_Out):
    """A skill the policy also considered."""

    skill: str = Field(description="Skill name.")
    probability: float = Field(description="The policy's probability of choosing it.")


class ActResponse(_Out):
    """A decision."""

    kind: Literal["decision"] = Field(description="Always `decision` (a text request may get a `clarify`).")
    trace_id: str = Field(description="Identifies this decision in logs, metrics and feedback.")
    model_version: str = Field(description="Policy version that decided (or 'rules').")
    arm: Literal["stable", "candidate", "rules"] = Field(description="Who decided.")
    strategy_mode: Literal["learned", "rules"] = Field(description="The strategy in force.")
    skill: str = Field(description="The skill to call next.")
    arguments: dict[str, Any] = Field(description="Its arguments (contract-validated when valid).")
    confidence: float = Field(description="Probability of the chosen skill (1.0 for rules).")
    valid: bool = Field(description="The call passes the contract and the action masks.")
    problems: list[str] = Field(description="Why it is not valid (empty when valid).")
    warnings: list[str] = Field(description="Contract clipping warnings.")
    fallback_action: CallOut | None = Field(
        description="The rule-based policy's call on the same state (what strategy_mode=rules would do)."
    )
    alternatives: list[Alternative] = Field(description="Top-k skills with probabilities.")
    mask_reasons: dict[str, list[str]] = Field(description="Why each masked skill is masked now.")
    step: int = Field(description="Steps taken so far.")
    budget: int = Field(description="The step budget.")
    degraded: bool = Field(
        description="strategy_mode is learned but no policy answered within the SLA (a replica restarting, a slow "
        "or failing policy, its breaker open): the rule-based policy decided instead (arm rules)."
    )
    degraded_reason: str | None = Field(description="Why, when degraded.")
    parsed: ParsedOut | None = Field(
        description="The goal parser's reading, when the request sent text, no goals."
    )


class StepOut(_Out):
    """One executed agent-mode step."""

    trace_id: str = Field(description="This step's trace_id (the executor's trace id of the call).")
    session_id: str = Field(description="The episode.")
    t: int = Field(description="Step index.")
    arm: str = Field(description="Who decided.")
    skill: str = Field(description="Skill called.")
    arguments: dict[str, Any] = Field(description="Arguments as executed.")
    result_code: str = Field(description="OK or the error code.")
    fallback_used: str | None = Field(description="The fallback that answered, if any.")
    payload: dict[str, Any] = Field(description="The tool's success payload ({} otherwise).")
    executor_trace_id: str = Field(description="The ToolExecutor's trace id of the call (its audit log).")
    reward: float = Field(description="The env's step reward.")
    done: bool = Field(description="The episode ended.")
    completed: bool | None = Field(description="At the end: every goal was satisfied.")
    dag_valid: bool | None = Field(description="At the end: the executed plan respected the goal DAG.")
    degraded: bool = Field(
        description="strategy_mode is learned but no policy answered within the SLA (a replica restarting, a slow "
        "or failing policy, its breaker open): the rule-based policy decided instead (arm rules)."
    )
    degraded_reason: str | None = Field(description="Why, when degraded.")


class SessionOut(_Out):
    """A started session."""

    session_id: str = Field(description="Session id (also the episode's trace_id for feedback).")
    arm: str = Field(description="Policy version that serves it.")
    family: str = Field(description="Task family.")
    seed: int = Field(description="Task seed.")
    request: str = Field(description="The customer's request text.")
    goals: list[str] = Field(description="Goal ids.")
    budget: int = Field(description="Step budget.")
    parsed: ParsedOut | None = Field(
        description="The goal parser's reading, for a session started from text."
    )


class FeedbackOut(_Out):
    """Stored feedback."""

    feedback_id: int = Field(description="Row id in the feedback store.")
    trace_id: str = Field(description="The decision or episode it is about.")


class StrategyOut(_Out):
    """The strategy in force after a ``PUT /v1/strategy``."""

    strategy_mode: StrategyMode = Field(description="The mode now deciding every new request.")
    previous: StrategyMode = Field(description="The mode before this call.")
    source: Literal["user_config", "request"] = Field(
        description="Who set it: the gateway's Serve user_config (at start or on a redeploy) or this endpoint. A "
        "mode set here lasts until the next user_config change or a gateway restart."
    )


class ClosedOut(_Out):
    """A closed session."""

    closed: bool = Field(description="Always true.")


class HealthOut(_Out):
    """Liveness."""

    ok: bool = Field(description="Always true: the replica answers.")


class ReadyOut(_Out):
    """Readiness of the service and of each policy arm."""

    ready: bool = Field(description="Every policy answers with the served env's observation space.")
    strategy_mode: StrategyMode | None = Field(default=None, description="The strategy in force.")
    policies: dict[str, str] = Field(
        default_factory=dict,
        description="Per arm: its version when ready, `restarting: ...` while Serve replaces its replica, or why "
        "it is not ready.",
    )
