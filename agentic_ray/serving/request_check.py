"""Turn a ``/v1/act`` body into the env's own objects, checked against the served domain.

The pydantic schema (:mod:`agentic_ray.serving.schemas`) checks shapes; this module checks meaning against the
domain's contracts and schema, so that a client mistake is a 422 naming the field and never reaches code that
would raise (a goal on an unknown skill, an enum value outside the contract, a cyclic goal graph, transcript
parameters or payloads the contract rejects). It uses the gateway's own checks: ``validate_params`` for goal
arguments and call arguments and ``output_problem`` for success payloads.

What a client sends is checked *strictly*: the gateway clips an out-of-range number the policy proposes, but a
goal target or a transcript argument outside the contract's bounds is an assertion about the world that cannot
be true (a refund of -5 or 1e308, an amount of NaN: the schema refuses non-finite numbers), so it is a 422 naming
the field and the bound. Types are not coerced (the schema is strict: ``"yes"`` is not a boolean, ``"1"`` or
``true`` not an integer). A transcript that has spent the step budget is refused
(:meth:`~agentic_ray.serving.decisions.DecisionBuilder.prepare`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentic_ray.domains.goal_dag import Goal, goal_graph
from agentic_ray.domains.protocol import EntityRef, Request, Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.envs.masks import sla_arrays
from agentic_ray.envs.transcript import TranscriptCall
from agentic_ray.serving.schemas import ActRequest, GoalIn, ToolStatsIn, TranscriptCallIn
from agentic_ray.skills.contracts import ASK_CUSTOMER, FloatParam, IntParam, SkillContract
from agentic_ray.skills.executor import SLAStats
from agentic_ray.skills.param_validation import InvalidParams, output_problem, validate_params

__all__ = ["CheckedRequest", "ClientError", "check_act_request", "sla_from_stats"]

Loc = tuple[str | int, ...]

INVALID_SKILL = "<invalid>"
"""The skill the env's step trace records for an action that decoded to no skill (a failed step, no tool call)."""


class ClientError(ValueError):
    """The request is well-formed JSON but wrong for this domain: ``problems`` are ``(location, message)``,
    answered as a 422 in FastAPI's shape (``{"detail": [{"loc", "msg", "type"}]}``), or with ``status`` (404, 409,
    429) and ``headers`` (a 429's ``Retry-After``)."""

    def __init__(
        self, problems: Sequence[tuple[Loc, str]], status: int = 422, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in problems))
        self.problems = list(problems)
        self.status = status
        self.headers = headers

    def detail(self) -> list[dict[str, Any]]:
        return [{"loc": list(loc), "msg": msg, "type": "value_error"} for loc, msg in self.problems]


@dataclass(frozen=True)
class CheckedRequest:
    """A request in the env's terms."""

    task: Task
    transcript: list[TranscriptCall]
    sla: dict[str, np.ndarray]
    budget: int | None


def check_act_request(body: ActRequest, env: AgentTaskEnv) -> CheckedRequest:
    """Check ``body`` against ``env``'s domain and convert it.

    Raises:
        ClientError: every problem found, each with its location in the body.
    """
    problems: list[tuple[Loc, str]] = []
    if body.domain != env.domain.name:
        raise ClientError([(("body", "domain"), f"this service serves domain {env.domain.name!r}")])
    t = body.task
    schema = env.domain.schema
    if len(t.goals) > schema.max_goals:
        problems.append((("body", "task", "goals"), f"at most {schema.max_goals} goals"))
    ids = [g.id for g in t.goals]
    for i, g in enumerate(t.goals):
        problems += _goal_problems(g, ("body", "task", "goals", i), env, {x.id: x.skill for x in t.goals})
    if len(set(ids)) != len(ids):
        problems.append((("body", "task", "goals"), "goal ids must be unique"))
    for i, m in enumerate(t.request.mentioned):
        if m.type not in schema.type_names:
            problems.append(
                (("body", "task", "request", "mentioned", i, "type"), f"not one of {list(schema.type_names)}")
            )
    for name in body.tool_stats:
        if name not in env.by_name:
            problems.append((("body", "tool_stats", name), "unknown skill"))
    calls = []
    for i, c in enumerate(body.transcript):
        call, errs = _transcript_call(c, ("body", "transcript", i), env)
        problems += errs
        calls.append(call)
    if not problems and (
        cycle := _goal_graph_problem(tuple((g.id, g.skill, tuple(g.deps)) for g in t.goals))
    ):
        problems.append((("body", "task", "goals"), cycle))
    if problems:
        raise ClientError(problems)
    task = Task(
        family=t.family,
        seed=0,
        request=Request(
            text=t.request.text,
            facts={k: v if isinstance(v, str) else tuple(v) for k, v in t.request.facts.items()},
            mentioned=tuple(EntityRef(m.type, m.id) for m in t.request.mentioned),
        ),
        goals=tuple(_goal(g) for g in t.goals),
        optimal_steps=t.optimal_steps or len(t.goals),
        relevant=tuple(t.relevant),
        extra=dict(t.extra),
        short_term_window=t.short_term_window,
    )
    if env.config.risk_mode == "soft":
        task = task.without_safety_checks()
    return CheckedRequest(
        task, [c for c in calls if c is not None], sla_from_stats(body.tool_stats, env), t.budget
    )


@functools.lru_cache(maxsize=4096)
def _goal_graph_problem(goals: tuple[tuple[str, str, tuple[str, ...]], ...]) -> str | None:
    """Why goals ``(id, skill, deps)`` do not make a DAG, or None (cached: a conversation sends its task's goals
    with every step)."""
    try:
        goal_graph([Goal(id=i, skill=skill, deps=deps) for i, skill, deps in goals])
    except ValueError as e:
        return str(e)
    return None


_HEALTHY: dict[tuple[str, ...], dict[str, np.ndarray]] = {}
"""The SLA arrays of a request without tool statistics, per skill tuple (copied for each request)."""


def sla_from_stats(stats: dict[str, ToolStatsIn], env: AgentTaskEnv) -> dict[str, np.ndarray]:
    """The SLA arrays the observation reads, from the client's tool statistics (missing: healthy, no history)."""
    if not stats:
        if env.skills not in _HEALTHY:
            _HEALTHY[env.skills] = _sla_arrays(stats, env)
        return {k: v.copy() for k, v in _HEALTHY[env.skills].items()}
    return _sla_arrays(stats, env)


def _sla_arrays(stats: dict[str, ToolStatsIn], env: AgentTaskEnv) -> dict[str, np.ndarray]:
    healthy = ToolStatsIn()
    return sla_arrays(
        {
            s: SLAStats(
                calls=x.calls,
                p50_ms=x.p50_ms,
                p95_ms=x.p95_ms,
                error_rate=x.error_rate,
                attempt_error_rate=x.attempt_error_rate,
                breaker_state=x.breaker,
                p95_target_ms=0.0,
                error_budget=0.0,
            )
            for s in env.skills
            for x in (stats.get(s, healthy),)
        },
        env.skills,
    )


def _goal(g: GoalIn) -> Goal:
    return Goal(
        id=g.id,
        skill=g.skill,
        args={k: list(v) if isinstance(v, list) else v for k, v in g.args.items()},
        numeric=dict(g.numeric),
        deps=tuple(g.deps),
        priority=g.priority,
        tolerance=g.tolerance,
        description=g.description,
        hints=dict(g.hints),
        safety_check=g.safety_check,
        on_answer=(g.on_answer[0], g.on_answer[1]) if g.on_answer is not None else None,
    )


def _goal_problems(g: GoalIn, loc: Loc, env: AgentTaskEnv, ids: dict[str, str]) -> list[tuple[Loc, str]]:
    """A goal's skill, its arguments and numeric targets checked by the contract, strictly (the gateway's own
    :func:`validate_params`: enums, types, bounds; a value outside the bounds is named, not clipped), its hints by
    the domain schema, its dependencies by the goal ids (``ids``: goal id -> skill) and the question it may be
    conditional on (an ``ask_customer`` goal among its deps)."""
    out: list[tuple[Loc, str]] = []
    c = env.by_name.get(g.skill)
    if c is None:
        return [((*loc, "skill"), f"unknown skill {g.skill!r}")]
    for name, v in g.args.items():
        where = (*loc, "args", name)
        if isinstance(c.input.get(name), FloatParam | IntParam):
            out.append((where, "numeric targets go under `numeric`"))
        elif problem := _param_problem(c, name, v):
            out.append((where, problem))
    for name, x in g.numeric.items():
        p = c.input.get(name)
        where = (*loc, "numeric", name)
        if not isinstance(p, FloatParam | IntParam):
            out.append((where, f"{g.skill} has no numeric parameter {name!r}"))
        # a numeric target is a float by the schema (matched with tolerance): an integral one checks as an int
        elif problem := _param_problem(c, name, int(x) if isinstance(p, IntParam) and x.is_integer() else x):
            out.append((where, problem))
    hints = {h.name: h for h in env.domain.schema.goal_hints}
    for name, v in g.hints.items():
        h = hints.get(name)
        if h is None:
            out.append(((*loc, "hints", name), f"not one of {sorted(hints)}"))
        elif h.choices and v not in h.choices:
            out.append(((*loc, "hints", name), f"not one of {list(h.choices)}"))
    for j, d in enumerate(g.deps):
        if d not in ids:
            out.append(((*loc, "deps", j), f"unknown goal {d!r}"))
    if g.on_answer is not None and (g.on_answer[0] not in g.deps or ids.get(g.on_answer[0]) != ASK_CUSTOMER):
        out.append(
            ((*loc, "on_answer", 0), f"{g.on_answer[0]!r} is not an {ASK_CUSTOMER} goal among its deps")
        )
    return out


def _param_problem(contract: SkillContract, name: str, value: Any) -> str | None:
    """Why one parameter value breaks the contract (strict), or None."""
    try:
        validate_params(contract, {name: value}, strict=True, partial=True)
    except InvalidParams as e:
        return str(e).removeprefix(f"{name}: ")
    return None


def _transcript_call(
    c: TranscriptCallIn, loc: Loc, env: AgentTaskEnv
) -> tuple[TranscriptCall | None, list[tuple[Loc, str]]]:
    ok = c.result_code == "OK"
    if c.skill == INVALID_SKILL and not ok:
        return TranscriptCall(c.skill, dict(c.params), c.result_code), []
    contract = env.by_name.get(c.skill)
    if contract is None:
        return None, [((*loc, "skill"), f"unknown skill {c.skill!r}")]
    if (
        not ok
    ):  # a rejected call's arguments may be exactly what was wrong with it; only its entities are read
        return TranscriptCall(c.skill, dict(c.params), c.result_code, {}, c.fallback_used), []
    try:
        params, _warnings = validate_params(contract, c.params, strict=True)
    except InvalidParams as e:  # each bad parameter named, else a missing one
        problems = [
            ((*loc, "params", k), p) for k, v in c.params.items() if (p := _param_problem(contract, k, v))
        ]
        return None, problems or [((*loc, "params"), str(e))]
    if c.fallback_used is None:
        problem = output_problem(contract, c.payload)
        if problem is not None:
            return None, [((*loc, "payload"), problem)]
    return TranscriptCall(c.skill, params, c.result_code, dict(c.payload), c.fallback_used), []
