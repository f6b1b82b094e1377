"""The running episode's bookkeeping: counters, the call history, root-cause attribution and the episode record.

Nothing here talks to a tool or a domain world: :class:`EpisodeState` is what the observation builder, the
masks and the experts (through :class:`~agentic_ray.domains.protocol.EpisodeView`) read, and
:func:`attribute_root_cause` is the rule-based failure attribution behind the ``reflection`` input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.goal_dag import ListSemantics
from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import LastStep, Task
from agentic_ray.graph_spec import ROOT_CAUSES, evidence_width
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.skills.contracts import DomainContracts, EntityListParam
from agentic_ray.skills.executor import CALLER_ERRORS
from agentic_ray.skills.preconditions import Call

__all__ = [
    "EpisodeState",
    "attribute_root_cause",
    "episode_record_dict",
    "list_semantics",
    "match_goals",
    "slide_window",
]

CAUSE_INDEX = {c: i for i, c in enumerate(ROOT_CAUSES)}


@dataclass
class EpisodeState:
    """Counters and history of the running episode."""

    budget: int
    num_goals: int
    num_skills: int
    step: int = 0
    goal_done: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    goals_done_order: list[str] = field(default_factory=list)
    goals_void: list[str] = field(default_factory=list)
    """Goals conditional on another answer of the customer (``Goal.on_answer``): done, satisfied by nothing."""
    calls: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    last_ok: bool = False
    last_failed: bool = False
    consecutive_failures: int = 0
    reflection: np.ndarray = field(default_factory=lambda: np.zeros(len(ROOT_CAUSES), dtype=np.float32))
    evidence: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    """``failure_evidence`` of the last step (:func:`~agentic_ray.envs.failure_evidence.failure_evidence`)."""
    history: list[Call] = field(default_factory=list)
    last: LastStep | None = None
    last_call_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    violations: int = 0

    @classmethod
    def new(cls, budget: int, num_goals: int, num_skills: int) -> EpisodeState:
        return cls(
            budget=budget,
            num_goals=num_goals,
            num_skills=num_skills,
            goal_done=np.zeros(num_goals, dtype=bool),
            calls=np.zeros(num_skills, dtype=np.int64),
            last_call_time=np.full(num_skills, -1e9),
            evidence=np.zeros(evidence_width(num_skills), dtype=np.float32),
        )

    def set_cause(self, cause: str | None) -> None:
        """The ``reflection`` label holds the root cause of the LAST step only (zeros after a successful one)."""
        self.reflection[:] = 0.0
        if cause is not None:
            self.reflection[CAUSE_INDEX[cause]] = 1.0


def list_semantics(contracts: DomainContracts) -> dict[str, dict[str, ListSemantics]]:
    """``skill -> list parameter -> how a goal compares it`` (from ``ordered`` and ``paired_with``)."""
    return {
        c.name: {
            n: ListSemantics(p.ordered, p.paired_with)
            for n, p in c.input.items()
            if isinstance(p, EntityListParam)
        }
        for c in contracts.skills
    }


def slide_window(task: Task, steps: int, knowledge: Knowledge) -> None:
    """Move the task's short-term window (:attr:`~agentic_ray.domains.protocol.Task.short_term_window`, ``k``
    turns: the request is turn 0, step ``i``'s result turn ``i + 1``) to ``steps`` steps taken: once
    ``steps >= k`` the request has left it, and so have its marks on the entities it names (and the goals' links to
    them as the request's choice); the entities stay known. The env after each step, and a server replaying a
    transcript, call this alike.
    """
    k = task.short_term_window
    if k is not None and steps >= k and knowledge.mentioned:
        knowledge.forget_mentions()


def match_goals(
    task: Task,
    state: EpisodeState,
    ready: np.ndarray,
    skill: str,
    params: dict[str, Any],
    lists: Mapping[str, Mapping[str, ListSemantics]] | None = None,
    payload: Mapping[str, Any] | None = None,
) -> tuple[list[str], bool]:
    """Apply one successful, non-degraded call to the goal bookkeeping.

    The most urgent ready goal the call matches is satisfied. A call that matches only goals whose prerequisites
    are not done is a dependency violation and satisfies nothing. When the satisfied goal is the question goals
    are conditional on (``Goal.on_answer``), those that need another answer than the call's ``payload["answer"]``
    are voided (done, in :attr:`EpisodeState.goals_void`, never in ``goals_done_order``).

    Args:
        lists: :func:`list_semantics` of the domain's contracts (default: every list compares as a multiset).
        payload: the call's result (read for the customer's answer).

    Returns:
        ``(ids of the goals satisfied, violation)``.
    """
    best, matched = -1, False
    sem = (lists or {}).get(skill)
    for i, g in enumerate(task.goals):
        if state.goal_done[i] or not g.matches(skill, params, sem):
            continue
        matched = True
        if ready[i] and (best < 0 or g.priority > task.goals[best].priority):
            best = i
    if best >= 0:
        state.goal_done[best] = True
        gid = task.goals[best].id
        state.goals_done_order.append(gid)
        answer = (payload or {}).get("answer")
        for j, g in enumerate(task.goals):
            if g.on_answer is not None and g.on_answer[0] == gid and g.on_answer[1] != answer:
                if not state.goal_done[j]:
                    state.goal_done[j] = True
                    state.goals_void.append(g.id)
        return [gid], False
    if matched:
        state.violations += 1
        return [], True
    return [], False


def attribute_root_cause(
    *,
    code: str,
    ok: bool,
    masked: bool,
    soft_masked: bool,
    violation: bool,
    high_risk: bool,
    entities: list[str],
    relevant: set[str],
    stale: bool,
) -> str | None:
    """The step's root cause (one of ``ROOT_CAUSES``), or None for a successful step.

    Args:
        code: the result code.
        ok: the call succeeded.
        masked: the action was masked (never executed); ``soft_masked``: by the soft (health) mask.
        violation: a goal's call ran before its prerequisite goal.
        high_risk: a high-risk action without its safety check.
        entities: the entity ids the call referred to.
        relevant: ids the task is about.
        stale: a referred entity's revealed fields differ from the world now.

    A caller error is a *wrong entity* when an entity argument is not one the task is about, *stale information*
    when the call relied on a revealed value that has changed since, and *bad parameters* otherwise.
    """
    if high_risk:
        return "risk_violation"
    if violation:
        return "dependency_violation"
    if ok:
        return None
    if code == "PRECONDITION_FAILED" or (masked and not soft_masked):
        return "missing_prerequisite"
    if code in CALLER_ERRORS:
        if any(e not in relevant for e in entities):
            return "wrong_entity"
        if stale:
            return "stale_information"
        return "bad_parameters"
    return "tool_error"


def episode_record_dict(rec: EpisodeRecord) -> dict[str, Any]:
    """``rec.to_dict()`` without ``dataclasses.asdict``'s recursive deep copy (5x faster; same result for
    records whose step args hold plain values, which the gateway guarantees)."""
    d = dict(rec.__dict__)
    d["steps"] = [
        {
            **s.__dict__,
            "args": {k: list(v) if isinstance(v, list) else v for k, v in s.args.items()},
            "goals_satisfied": list(s.goals_satisfied),
        }
        for s in rec.steps
    ]
    d["goal_deps"] = [tuple(e) for e in rec.goal_deps]
    for k in ("goals", "goals_done_order", "entities_mentioned", "entities_recalled"):
        d[k] = list(d[k])
    d["context"] = dict(rec.context)
    d["entities_past_cap"] = dict(rec.entities_past_cap)
    d["consequences"] = [dict(c) for c in rec.consequences]
    return d
