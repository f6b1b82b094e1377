"""The ``Domain`` protocol: the only thing the env, the models, the evaluator, the CLI and serving know of a domain.

A domain is one package, ``agentic_ray/domains/<name>/`` (or any installed package registered under the
``agentic_ray.domains`` entry-point group), plus its skill contracts in ``configs/skills/<name>.yaml``. It holds:

* its **world** (any object with ``to_dict()``; ``world_from_dict`` rebuilds it) and tool handlers (named by the
  contracts' ``handler: module:function``);
* its **task families**: :meth:`Domain.make_task` draws a world and a :class:`Task` (goal DAG, the customer's
  :class:`Request` with its text, facts and mentioned entities, optimal steps, how the task ends);
* its **graph schema** (:class:`DomainSchema`: entity node types with feature columns, links between them, the
  hints a goal can carry) and ground truth (:meth:`Domain.entity_fields`); the generic observation builder turns
  :class:`Knowledge` (what tool results revealed) into features from this schema, so a new node type is encoded
  with no change to generic code;
* its **hard mask rules** (:meth:`Domain.hard_rules`), **scripted expert** (:meth:`Domain.expert`, reading an
  :class:`EpisodeView`, never the env) and **fallback rules** (:meth:`Domain.fallback_rules`).

Partial information: at reset the agent knows the request (goals, facts such as an email, the entities it names
by id). Every other entity, and every field, enters :class:`Knowledge` when a tool result reveals it, as the
contracts' output fields declare (``type: entity``, ``entity_list``, ``of:``). Nothing is pre-filled.

What a third-party domain may rely on (issue 26; the contracts reference in ``docs/`` has the YAML side):

* **Copy any revealed field**: a string argument copies a request fact (``source: request.<fact>``) or a revealed
  field of a revealed entity (``source: <type>.<field>``, e.g. the address a lookup showed, a tracking number as
  an answer): the policy chooses the entity with a pointer over the entities of that type whose field is revealed
  (the mask allows no other), as numeric arguments copy revealed numbers (:class:`FieldSpec` ``copy``). The field
  is declared in the schema (a ``text`` field is seen only as known / unknown). A fact may hold several values
  (:class:`Request` ``facts``), chosen by position (``StringParam.max_values``).
* **Membership preconditions** (``belongs_to:``) and several entity parameters per precondition
  (:class:`~agentic_ray.skills.contracts.PreconditionSpec`); the gateway and the action mask read one definition
  (:mod:`agentic_ray.skills.preconditions`).
* **Outputs keyed by id** (``type: entity_map``) and **nested entity objects** with a declared ``id_field``
  (:class:`~agentic_ray.skills.contracts.OutputField`), revealed by :func:`~agentic_ray.domains.knowledge.
  reveal_result`.
* **Domain options**: a domain may declare ``options_model`` (a pydantic model); ``env.domain_options`` is
  validated by it (:func:`domain_options`) and the instance is passed to ``make_task(family, seed, options=...)``.
  A domain without ``options_model`` takes no options and is called as ``make_task(family, seed)``.
* **Generic caller errors**: a domain that defines no ``caller_error`` / ``caller_error_setup`` hooks still gets
  the three injected caller errors, derived from its contracts (:mod:`agentic_ray.domains.caller_errors`); the
  hooks (:class:`CallerErrorRefinement`) refine them, returning :data:`GENERIC` for a cause they leave generic.
* **Explicit ends**: a :class:`Task` with no goal must declare its end (``end_skill``: an answer or a terminal
  skill), or constructing it (and so ``make_task``) is refused.
* **Demonstrations checked against the masks**: the expert's actions must be allowed by the masks of the step
  they are taken in; ``collect_demos`` drops (and counts) demonstrations where they are not.
* **Asking the customer**: a contracts file's ``ask_customer:`` block adds the generic ``ask_customer`` skill
  (:mod:`agentic_ray.skills.ask_customer`: a confirmation or a choice about one entity, its answer revealed as a
  field of that entity, which the schema encodes as a category). The answer comes from the world's simulated
  customer (:class:`SimulatedCustomer`, optional; the default says yes, or picks a choice's first option). A write
  that needs consent has a precondition ``after: ask_customer, where: {question: ..., answer: "yes"}``, so the mask
  and the gateway forbid it until then; goals conditional on the answer (``Goal.on_answer``) say what a no needs
  instead. An ask is a step (efficiency and the metrics count it; ``optimal_steps`` includes it), and neither the
  goals nor ``optimal_steps`` may depend on the answer (the step budget is observed).
* **No stage ships a worse policy**: the pipeline judges each stage on the domain's validation tasks, paired task
  by task with the policy the stage received (:mod:`agentic_ray.stages.stage_guard`), so
  :meth:`Domain.validation_seeds` must return the same seeds for the same ``(family, n)``.

Dependencies point one way: ``envs/``, ``models/``, ``eval/``, ``stages/`` and ``serve_apps/`` import
``domains/``; a domain imports only ``domains.protocol``, ``domains.goal_dag``, ``domains.quantile_map``,
``domains.knowledge`` and ``skills/`` (backends' ``ToolError``). A third-party domain needs no more than this
module, :mod:`agentic_ray.skills.contracts` and :mod:`agentic_ray.domains.knowledge`: ``Goal``, ``QuantileMap``,
``ToolError`` and ``GENERIC`` are re-exported here (``tests/plugin_domain`` is written that way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ValidationError

from agentic_ray.domains.caller_errors import GENERIC
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.skills.backends import ToolError
from agentic_ray.skills.contracts import ASK_CUSTOMER, DomainContracts, SkillContract
from agentic_ray.skills.preconditions import Call

__all__ = [
    "GENERIC",
    "CallerErrorRefinement",
    "Domain",
    "DomainSchema",
    "EntityRef",
    "EntityTypeSchema",
    "EpisodeView",
    "Expert",
    "FieldSpec",
    "Goal",
    "LastStep",
    "LinkSchema",
    "QuantileMap",
    "Request",
    "RuleFn",
    "SimulatedCustomer",
    "Task",
    "ToolError",
    "domain_options",
]

RuleFn = Callable[[str, dict[str, Any]], dict[str, Any]]
"""A named rule-based degrade: ``(skill, params) -> payload`` (marked degraded by the gateway)."""


# ---------------------------------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class FieldSpec:
    """One entity field as a node feature: a "known" column plus its value columns.

    Attributes:
        name: the field name, as tool results reveal it.
        kind: ``category`` (one-hot over ``choices``), ``number`` (quantile-mapped through the domain's table
            entry ``<type>.<name>``), ``flag`` (0/1) or ``text`` (a free string such as an address or a tracking
            number: only its known column; its value is never a feature, and string arguments copy it with
            ``source: <type>.<name>``).
            A ``text`` field with ``size > 0`` is also a **text modality**: its first ``size`` tokens as hashed ids
            and per-token weights (:mod:`agentic_ray.text.tokens`), read by the encoder's text sub-encoder.
            ``image``: an **image modality**, a square grayscale image of side ``size`` revealed as a flat list of
            ``size * size`` values in [0, 1] (row-major), plus its focus mask.
        choices: categories.
        copy: a number that numeric arguments may copy (a :class:`~agentic_ray.graph_spec.NumericSource`).
        size: an ``image``'s side in pixels; a ``text`` field's token count (0: no token columns).

    The focus mask (seed 000's): an image's attention mask is the revealed field ``<name>_focus`` (a list of
    ``size * size`` values in [0, 1]; all ones until revealed), a text's token weights the revealed field
    ``<name>_weights`` (a list of ``size`` values; uniform over its tokens until revealed). Both are feature columns
    beside the pixels or token ids, so they are part of the state.
    """

    name: str
    kind: Literal["category", "number", "flag", "text", "image"]
    choices: tuple[str, ...] = ()
    copy: bool = False
    size: int = 0

    def __post_init__(self) -> None:
        if self.kind == "image" and self.size < 1:
            raise ValueError(f"image field {self.name!r} needs size >= 1 (its side in pixels)")
        if self.size and self.kind not in ("image", "text"):
            raise ValueError(f"field {self.name!r}: size is for image and text fields, not {self.kind!r}")

    @property
    def width(self) -> int:
        """Value columns (the known column not included): an image's pixels and focus mask, a text's token ids and
        weights."""
        if self.kind == "category":
            return len(self.choices)
        if self.kind == "image":
            return 2 * self.size * self.size
        if self.kind == "text":
            return 2 * self.size
        return 1

    @property
    def modality(self) -> str | None:
        """``image`` or ``text`` for a field the encoder reads with a modality sub-encoder, else None."""
        return self.kind if self.kind == "image" or (self.kind == "text" and self.size) else None


@dataclass(frozen=True)
class EntityTypeSchema:
    """A domain node type: at most ``max_nodes`` revealed entities, encoded by ``fields``.

    ``max_nodes`` is also the type's pointer width: every entity argument and list over the type chooses among
    that many nodes (``ActionLayout.width``), whatever the other types' caps. Entities the agent knows past it are
    left out of the observation; the env counts them per episode (``ENTITIES_PAST_CAP`` in the step info, the
    episode record and the ``entities_past_cap`` metric) and logs the first time per type."""

    name: str
    max_nodes: int
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True)
class LinkSchema:
    """A domain relation ``src -rel-> dst``: field ``field`` of a revealed ``src`` entity holds the id (or ids) of
    ``dst`` entities (an order's ``items``, an order's ``user_id``); an edge exists once both are revealed."""

    src: str
    rel: str
    dst: str
    field: str
    max_edges: int


@dataclass(frozen=True)
class DomainSchema:
    """The graph schema of a domain.

    Attributes:
        entity_types: domain node types (the env adds the generic ``tool``, ``goal`` and ``session`` types).
        links: relations between domain entities, from revealed fields.
        goal_hints: categorical facts a goal may carry about the entity it means (what the customer said, e.g. the
            item's category), one-hot blocks of the goal features.
        max_goals: most subgoals of one task.
        terminal_skills: skills whose successful call ends the session (a handoff, an answer, closing the case):
            success if every goal is satisfied by then, else an explicit failure.
        task_text_tokens: > 0 adds the request's text to the session node as a text modality of that many tokens:
            the query of the encoder's cross-attention fusion over the modalities of the other nodes (0: none, and
            the session node is as before).
    """

    entity_types: tuple[EntityTypeSchema, ...]
    links: tuple[LinkSchema, ...] = ()
    goal_hints: tuple[FieldSpec, ...] = ()
    max_goals: int = 10
    terminal_skills: tuple[str, ...] = ()
    task_text_tokens: int = 0

    def entity_type(self, name: str) -> EntityTypeSchema:
        for t in self.entity_types:
            if t.name == name:
                return t
        raise KeyError(f"unknown entity type {name!r}; known: {[t.name for t in self.entity_types]}")

    @property
    def type_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.entity_types)


# ---------------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class EntityRef:
    """An entity by type and id."""

    type: str
    id: str


@dataclass(frozen=True)
class Request:
    """What the customer said.

    Attributes:
        text: the request in natural language (for serving and the goal parser).
        facts: values the customer gave that string arguments may copy (``StringParam.source: request.<fact>``),
            e.g. an email, a name, a zip code. A fact may hold several values, as a tuple (a list is stored as
            one): "it is under old@x.com or new@x.com". An argument that copies such a fact chooses one by
            position (``StringParam.max_values``); :meth:`values` reads either form.
        mentioned: entities the request names by id (known, without fields, from step 0).
    """

    text: str
    facts: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)
    mentioned: tuple[EntityRef, ...] = ()

    def __post_init__(self) -> None:
        if any(isinstance(v, list) for v in self.facts.values()):
            object.__setattr__(
                self, "facts", {k: tuple(v) if isinstance(v, list) else v for k, v in self.facts.items()}
            )
        for k, v in self.facts.items():
            if isinstance(v, tuple) and (not v or not all(isinstance(x, str) for x in v)):
                raise ValueError(
                    f"fact {k!r}: several values must be a non-empty tuple of strings, got {v!r}"
                )

    def values(self, fact: str) -> tuple[str, ...]:
        """The values the request gives for ``fact``, in order (``()`` when it gives none)."""
        v = self.facts.get(fact)
        return () if v is None else v if isinstance(v, tuple) else (v,)


@dataclass(frozen=True)
class Task:
    """One customer request and how it is judged.

    Attributes:
        family: the task family.
        seed: the task seed (world and task are a pure function of ``(family, seed)``).
        request: what the customer said.
        goals: the goal DAG (each goal's ``args`` hold the ground truth; the observation shows only the skill,
            its enum constraints, its hints and edges to the entities it names once they are revealed). A list
            argument is compared as its contract says: an ``ordered`` list as a sequence, any other as a multiset,
            a ``paired_with`` list by its pairs (``Goal.matches``).
        optimal_steps: fewest calls that solve the task without faults, lookups and questions to the customer
            included; the same whatever the customer will answer (the step budget derives from it).
        relevant: ids of the entities the task is about (a call on another one is a ``wrong_entity`` error).
        end: ``goals``: success when every goal is satisfied; ``world_state``: success when
            :meth:`Domain.final_check` accepts the world when the session ends.
        end_skill: the task's declared end: the skill (an answer, closing the case, a handoff) whose successful
            call ends the session. The task then completes only on that call, with every goal satisfied by then
            (and, for ``end: world_state``, the final check passing); the call with a goal pending is a failure.
            Required when ``goals`` is empty: an empty DAG is satisfied by any first step, so a task whose right
            outcome is "change nothing, tell the customer" must say how it ends (a :class:`Task` without goals
            and without ``end_skill`` is refused with ``ValueError``).
        optimal_steps_soft: fewest calls when safety checks may be skipped (``risk_mode: soft``: the
            ``safety_check`` goals and the lookups only a safety precondition needs); None = ``optimal_steps``.
        subtasks: families of a composite task.
        extra: domain data the generic code never reads (e.g. products whose stock must not drift to 0).
        key_facts: facts the customer gave (in this conversation or an earlier one, which memory holds) that a
            later call needs, each a :class:`~agentic_ray.memory.memory_episode.KeyFact` as a dict (``slot``: the
            argument it fills, ``value``, ``stated_turn``, ``needed_turn``, ``confirmed_at_h``: hours from the
            episode's start, negative for an earlier conversation). Ground truth for the L4 memory reward and the
            Entity Recall@5 / forgetting metrics, never observed: the env records each call's use of a slot and
            writes both into the episode record's context.
        short_term_window: ``k``, the conversation's short-term window in turns (the request is turn 0, each step
            adds one): once ``k`` steps have passed, the request has left the window and what it said leaves the
            observation: the entities it names are no longer marked as named and no goal links to them as the
            request's choice. They stay known (their ids were seen); which of them a goal means must then be
            recalled (a memory search). What tools revealed stays, and so do masks that follow the call history
            (see :func:`~agentic_ray.envs.episode.slide_window`). None (every task without memory): the request
            stays in the observation for the whole episode.
    """

    family: str
    seed: int
    request: Request
    goals: tuple[Goal, ...]
    optimal_steps: int
    relevant: tuple[str, ...] = ()
    end: Literal["goals", "world_state"] = "goals"
    optimal_steps_soft: int | None = None
    subtasks: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    end_skill: str | None = None
    key_facts: tuple[Mapping[str, Any], ...] = ()
    short_term_window: int | None = None

    def __post_init__(self) -> None:
        if self.short_term_window is not None and self.short_term_window < 1:
            raise ValueError(
                f"task {self.family}/{self.seed}: short_term_window must be >= 1, got {self.short_term_window}"
            )
        if not self.goals and self.end_skill is None:
            raise ValueError(
                f"task {self.family}/{self.seed} has no goal and declares no end: give it an end_skill (the answer "
                "or terminal skill that ends it), or it would complete after any first step"
            )
        by_id = {g.id: g for g in self.goals}
        for g in self.goals:
            if g.on_answer is None:
                continue
            anchor = by_id.get(g.on_answer[0])
            if anchor is None or anchor.skill != ASK_CUSTOMER or anchor.id not in g.deps:
                raise ValueError(
                    f"task {self.family}/{self.seed}: goal {g.id!r} is conditional on the answer of goal "
                    f"{g.on_answer[0]!r}, which must be an {ASK_CUSTOMER} goal among its deps"
                )

    def goal_index(self) -> dict[str, int]:
        return {g.id: i for i, g in enumerate(self.goals)}

    def without_safety_checks(self) -> Task:
        """The task as ``risk_mode: soft`` sees it: ``safety_check`` goals dropped (and edges to them)."""
        import dataclasses

        drop = {g.id for g in self.goals if g.safety_check}
        if not drop and self.optimal_steps_soft is None:
            return self
        goals = tuple(
            dataclasses.replace(g, deps=tuple(d for d in g.deps if d not in drop))
            for g in self.goals
            if g.id not in drop
        )
        return dataclasses.replace(
            self,
            goals=goals,
            optimal_steps=self.optimal_steps_soft or self.optimal_steps,
            optimal_steps_soft=None,
        )


# ---------------------------------------------------------------------------------------------------- views
@dataclass(frozen=True)
class LastStep:
    """The last executed step as the agent saw it."""

    skill: str
    params: dict[str, Any]
    code: str
    root_cause: str | None


@dataclass
class EpisodeView:
    """The episode state through the protocol: what an expert, a prototype miner or a rule policy may read.

    Attributes:
        task: the task (an expert may read the goals' ground truth; a policy reads only the observation).
        knowledge: what has been revealed.
        skills: skill names in layout order.
        contracts: skill contracts by name.
        goal_done: ``(num_goals,)`` bool.
        ready: ``(num_goals,)`` bool, pending goals whose prerequisites are done.
        history: successful, non-degraded calls, in order.
        last: the last step, or None at the start.
        skill_mask: ``(K,)`` int8, the mask of the current observation.
        step: steps taken.
        budget: the step budget.
    """

    task: Task
    knowledge: Knowledge
    skills: tuple[str, ...]
    contracts: dict[str, SkillContract]
    goal_done: np.ndarray
    ready: np.ndarray
    history: list[Call]
    last: LastStep | None
    skill_mask: np.ndarray
    step: int = 0
    budget: int = 0

    def allowed(self, skill: str) -> bool:
        """Whether the mask allows ``skill`` now."""
        return bool(self.skill_mask[self.skills.index(skill)])

    def succeeded(self, skill: str, **params: Any) -> bool:
        """Whether a successful call of ``skill`` with these parameter values is in the history."""
        return any(c.skill == skill and all(c.value(k) == v for k, v in params.items()) for c in self.history)


@runtime_checkable
class Expert(Protocol):
    """A scripted policy: the next call as ``(skill, params)`` from the episode view."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]: ...


# ---------------------------------------------------------------------------------------------------- domain
@runtime_checkable
class Domain(Protocol):
    """A task domain (see the module docstring). Attributes are read-only; methods are pure unless noted.

    Optional members, read with ``getattr``: ``options_model`` (a pydantic model class validating
    ``env.domain_options``, see :func:`domain_options`), the caller-error hooks of
    :class:`CallerErrorRefinement`, and, for a domain whose worlds keep a memory, ``open_memory(config)`` (a
    long-term store for a :class:`~agentic_ray.memory.memory_config.MemoryConfig`) and
    ``attach_memory(world, store, episode, start_h)`` (the world's memory reads and writes that store, as
    conversation ``episode`` starting at ``start_h`` hours on the store's clock): Serve's agent-mode sessions
    share one store through them (``agent.memory``)."""

    name: str
    """Registry name, e.g. ``ecommerce`` (env id ``agentic_ray/<name>-v1``)."""
    contracts_path: Path
    """Its skill contracts (``configs/skills/<name>.yaml``)."""
    families: tuple[str, ...]
    """Task families, in validation round-robin order."""
    schema: DomainSchema
    """The graph schema."""
    data_dir: Path
    """The domain's data folder: ``quantiles.json`` and, for prototype actions, ``prototypes.json``."""

    def contracts(self) -> DomainContracts:
        """The loaded, validated contracts (fallback rules checked against :meth:`fallback_rules`)."""
        ...

    def make_task(self, family: str, seed: int, options: Any = None) -> tuple[Any, Task]:
        """A fresh world and the task of ``(family, seed)``; deterministic.

        ``options`` is passed only to a domain that declares ``options_model`` (the validated instance, see
        :func:`domain_options`); a domain without it may leave the parameter out, and is called
        ``make_task(family, seed)``. The world and task are a pure function of the arguments. What else the options
        decide (a judging regime for :meth:`final_check`, a split) travels in ``Task.extra``."""
        ...

    def validation_seeds(self, family: str, n: int) -> list[int]:
        """The fixed validation seeds of a family (disjoint from training seeds)."""
        ...

    def draw_training_seed(self, rng: np.random.Generator) -> int:
        """A training task seed."""
        ...

    def world_from_dict(self, d: dict[str, Any]) -> Any:
        """Rebuilds a world from ``world.to_dict()`` (HTTP backends)."""
        ...

    def entity_ids(self, world: Any, entity_type: str) -> list[str]:
        """Ids of every entity of a type in the world (ground truth; for skill checks and quantile fitting)."""
        ...

    def entity_fields(self, world: Any, entity_type: str, entity_id: str) -> dict[str, Any] | None:
        """The fields a full lookup would reveal now (ground truth; None if there is no such entity). The env
        compares them with what was revealed to attribute ``stale_information``."""
        ...

    def step_world(self, world: Any, rng: np.random.Generator, task: Task) -> None:
        """One tick of background change (drift); mutates the world."""
        ...

    def tool_health(self, world: Any) -> dict[str, tuple[float, float, float]]:
        """Simulated per-skill ``(latency_ms, latency_std_ms, failure_rate)`` ({} when the domain has none)."""
        ...

    def goal_feasible(self, world: Any, task: Task, goal: Goal, done: set[str]) -> bool:
        """Whether a pending goal can still be satisfied (False = the task failed unrecoverably)."""
        ...

    def final_check(self, world: Any, task: Task) -> bool:
        """For ``task.end == "world_state"``: whether the final world is the one the gold actions produce.

        Checked when every goal is satisfied or a terminal skill succeeds, so such a task still lists its
        changes as goals (the goals drive DVR and the ready features; the check judges the outcome)."""
        ...

    def hard_rules(self, knowledge: Knowledge, skills: Sequence[str]) -> dict[str, str]:
        """Hard mask rules from what is known: ``skill -> reason`` for each skill that may not run now.

        These shape the action mask only; the gateway never sees them, so the tool handler must enforce the same
        business rule itself (e.g. raise ``PRECONDITION_FAILED`` for an unverified customer)."""
        ...

    def fallback_rules(self) -> dict[str, RuleFn]:
        """Named rule-based degrades the contracts' fallbacks may name."""
        ...

    def expert(self) -> Expert:
        """The scripted expert (solves every validation task with faults off)."""
        ...

    reward_context_keys: tuple[str, ...]
    """The case facts :meth:`reward_context` gives the reward layers (may be empty). A reward layer that reads a
    fact not listed here is off for this domain (one warning), never fed a default."""

    def reward_context(self, world: Any) -> dict[str, float]:
        """The case facts the reward layers receive (``EpisodeRecord.context``): exactly
        :attr:`reward_context_keys`. Ground truth: reward layers may read it, the policy never does."""
        ...

    def perturb_hidden(self, world: Any, rng: np.random.Generator) -> Any:
        """A copy of ``world`` that differs from it only in state the agent has not revealed at the start of an
        episode (another order total, another item status, another customer tier, ...): never an entity id, a
        fact the request gives, or anything the request states. ``world`` is left unchanged.

        The information-flow test (``tests/unit/envs/test_information_flow.py``) rolls both worlds along the same
        actions: observations, masks and action layouts must stay equal until a tool result reveals the
        difference."""
        ...

    def quantiles(self) -> QuantileMap:
        """Quantile tables of every ``number`` field (``<type>.<field>``) plus ``tool.latency_ms`` and
        ``tool.error_rate``."""
        ...


@runtime_checkable
class SimulatedCustomer(Protocol):
    """The optional hook of a domain's *world* that answers the generic ``ask_customer`` skill (the handler sees
    only ``(world, params)``, on the in-process backend and on a skill server alike, so the customer travels with
    the world). A world without it gets the default customer: ``yes`` to a confirmation, the first option of a
    choice."""

    def answer_customer(self, question: str, about: str) -> str | None:
        """The customer's answer to ``question`` (a name the contracts' ``ask_customer:`` block declares) about
        entity ``about`` (an id): one of the question's answers, or None for the default. Hidden world state
        (:meth:`Domain.perturb_hidden` may change it) until asked. It may raise ``ToolError`` as a tool does
        (``NOT_FOUND`` for an entity the customer does not have, such as an injected look-alike id)."""
        ...


@runtime_checkable
class CallerErrorRefinement(Protocol):
    """Optional hooks of a :class:`Domain` that refine the generic, contract-derived caller errors
    (:mod:`agentic_ray.domains.caller_errors`). A domain without them gets the generic ones; either hook may
    return :data:`GENERIC` for a cause it leaves to the generic form."""

    def caller_error(
        self,
        world: Any,
        task: Task,
        skill: str,
        params: dict[str, Any],
        cause: str,
        rng: np.random.Generator,
    ) -> dict[str, Any] | str | None:
        """The call ``(skill, params)`` made wrong so that it fails with root cause ``cause`` (one of
        :data:`~agentic_ray.domains.caller_errors.CALLER_ERROR_CAUSES`), None when this call cannot carry it, or
        :data:`GENERIC`.

        Error injection (issue 13): the env calls it, for an episode drawn to carry a caller error, on each call
        until one is accepted, then runs the returned params instead. ``stale_information`` may change the world
        (the entity is modified by someone else between the agent's read and its call); the helpers of
        :mod:`agentic_ray.domains.caller_errors` make the other two from the contracts. For ``wrong_entity`` the
        env keeps sending the look-alike id in place of the real one until a lookup reveals the real one again."""
        ...

    def caller_error_setup(
        self, world: Any, task: Task, cause: str, rng: np.random.Generator
    ) -> Task | str | None:
        """Prepare a fresh episode to carry a caller error of ``cause``: the task to run (changed when the set-up
        changes what the goals ask), None when this task cannot carry the cause (the env then draws another), or
        :data:`GENERIC`.

        Called at reset, before the world reaches the backend. It may change the world so that the error, once
        injected, persists for the agent's own next call (``bad_parameters``: a limit that binds, so that the
        value the call usually takes is above it too); the task's goals then ask for what the fix achieves."""
        ...


def domain_options(domain: Domain, raw: dict[str, Any] | None) -> BaseModel | None:
    """``env.domain_options`` validated by the schema ``domain`` declares (its ``options_model`` attribute, a
    pydantic model class; ``extra="forbid"`` recommended): the instance ``make_task`` receives, or None for a
    domain that declares no options.

    Raises:
        ValueError: options for a domain that declares none, or options its model rejects (the message names
            the domain and the field).
    """
    model = getattr(domain, "options_model", None)
    if model is None:
        if raw:
            raise ValueError(f"domain {domain.name!r} declares no options (options_model), got {sorted(raw)}")
        return None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(
            f"domain {domain.name!r}: options_model must be a pydantic model class, got {model!r}"
        )
    try:
        return model.model_validate(raw or {})
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or '-'}: {err['msg']}" for err in e.errors()
        )
        raise ValueError(f"domain {domain.name!r} options: {problems}") from None


def entity_refs(ids: Iterable[tuple[str, str]]) -> tuple[EntityRef, ...]:
    """``[(type, id)] -> (EntityRef, ...)``."""
    return tuple(EntityRef(t, i) for t, i in ids)
