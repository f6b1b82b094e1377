"""Goal DAGs: subgoals with dependencies, priority and constraints, and the validity of an executed plan (DVR).

A subgoal is satisfied by one successful tool call whose arguments match the goal's (entity ids and enum values
exactly, numbers within a tolerance; a list as its contract says: an ordered list as a sequence, any other as a
multiset, and a list paired with another by position by its pairs, see :class:`ListSemantics`). A matching call made before all of the goal's prerequisites are satisfied
is a *dependency violation* and satisfies nothing. An executed plan is *valid* when it has no dependency
violation and no missing prerequisite (every satisfied goal's ancestors were satisfied before it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx


@dataclass(frozen=True)
class ListSemantics:
    """How a goal compares a list argument (from its contract: ``ordered``, ``paired_with``).

    Attributes:
        ordered: compare as a sequence (else as a multiset: any order, each id as often as the goal has it).
        paired_with: the list argument it is paired with by position; the pairs ``(leader[i], this[i])`` are then
            compared too, as a sequence when either list is ordered, else as a multiset.
    """

    ordered: bool = False
    paired_with: str | None = None


def _same_list(got: Any, want: Any, ordered: bool) -> bool:
    if not isinstance(got, list | tuple):
        return False
    return list(got) == list(want) if ordered else Counter(got) == Counter(want)


@dataclass(frozen=True)
class Goal:
    """One subgoal.

    Attributes:
        id: unique within the task, e.g. ``"refund"`` or ``"a.refund"`` in a composite task.
        skill: the skill whose successful call satisfies it.
        args: required argument values (entity ids, enum values); other arguments are free.
        numeric: required numeric arguments, ``name -> target``; matched within ``tolerance``.
        deps: ids of prerequisite goals.
        priority: larger is more urgent; breaks ties between ready goals.
        tolerance: relative tolerance of numeric targets (with an absolute floor of 0.05).
        description: what it means for the customer.
        hints: see the attribute.
        safety_check, hidden_args, on_answer: see the attributes.
    """

    id: str
    skill: str
    args: dict[str, Any] = field(default_factory=dict)
    numeric: dict[str, float] = field(default_factory=dict)
    deps: tuple[str, ...] = ()
    priority: int = 1
    tolerance: float = 0.02
    description: str = ""
    hints: dict[str, str] = field(default_factory=dict)
    """What the customer said about the entity this goal means, as the schema's ``goal_hints`` (e.g. the
    category of the item to refund); the observation shows hints, never ``args``."""
    safety_check: bool = False
    """The goal is the safety check a contract's ``safety`` precondition asks for (e.g. the inventory check
    before a refund). ``risk_mode: soft`` drops it from the DAG: skipping it is the high-risk shortcut."""
    hidden_args: tuple[str, ...] = ()
    """Arguments the request does not state (the business rule derives them from state the agent must look up,
    e.g. the verification method from the caller's MFA enrolment): the observation never shows them."""
    on_answer: tuple[str, str] | None = None
    """``(goal id, answer)``: the goal applies only if the customer's answer to the ``ask_customer`` call that
    satisfied goal ``goal id`` (one of ``deps``) is ``answer``. Any other answer *voids* it: it counts as done and
    nothing satisfies it. A task states what each answer needs (cancel on ``yes``, close the case on ``no``) as
    goals conditional on it, so the goals never tell the answer before the customer does."""

    def matches(
        self, skill: str, params: dict[str, Any], lists: Mapping[str, ListSemantics] | None = None
    ) -> bool:
        """Whether a call (skill + validated params) is the one this goal asks for.

        Args:
            skill: the skill called.
            params: its validated arguments.
            lists: how to compare each list argument (default: as a multiset, which for a list without repeats is
                a set).
        """
        if skill != self.skill:
            return False
        lists = lists or {}
        for k, v in self.args.items():
            got = params.get(k)
            if isinstance(v, list | tuple | frozenset | set):
                sem = lists.get(k, ListSemantics())
                if not _same_list(got, v, sem.ordered):
                    return False
                lead = sem.paired_with
                if lead is not None and lead in self.args:
                    ordered = sem.ordered or lists.get(lead, ListSemantics()).ordered
                    pairs = list(zip(params.get(lead) or [], list(got or []), strict=False))
                    if not _same_list(pairs, list(zip(self.args[lead], v, strict=False)), ordered):
                        return False
            elif got != v:
                return False
        for k, target in self.numeric.items():
            v = params.get(k)
            if not isinstance(v, int | float) or abs(float(v) - target) > max(
                self.tolerance * abs(target), 0.05
            ):
                return False
        return True


def goal_graph(goals: Sequence[Goal]) -> nx.DiGraph:
    """The DAG (edge prerequisite → dependent).

    Raises:
        ValueError: unknown dependency or a cycle.
    """
    g = nx.DiGraph()
    ids = {x.id for x in goals}
    for x in goals:
        g.add_node(x.id)
    for x in goals:
        for d in x.deps:
            if d not in ids:
                raise ValueError(f"goal {x.id} depends on unknown goal {d}")
            g.add_edge(d, x.id)
    if not nx.is_directed_acyclic_graph(g):
        raise ValueError(f"goal graph has a cycle: {nx.find_cycle(g)}")
    return g


def goal_edges(goals: Sequence[Goal]) -> list[tuple[str, str]]:
    """``(prerequisite, dependent)`` pairs."""
    return [(d, x.id) for x in goals for d in x.deps]


def plan_validity(
    goals: Sequence[Goal], done_order: Iterable[str], dependency_violations: int
) -> tuple[bool, int]:
    """DAG validity of an executed plan.

    Args:
        goals: the task's goals.
        done_order: goal ids in the order they were satisfied.
        dependency_violations: matching calls made before their prerequisites.

    Returns:
        ``(valid, missing_prerequisites)``: valid when there is no violation and no satisfied goal lacks an
        ancestor satisfied before it.
    """
    ancestors = _ancestors(goals)
    seen: set[str] = set()
    missing = 0
    for gid in done_order:
        if gid not in ancestors:
            nx.ancestors(goal_graph(goals), gid)  # raises, as before: not a goal of the task
        missing += len(ancestors[gid] - seen)
        seen.add(gid)
    return dependency_violations == 0 and missing == 0, missing


def _ancestors(goals: Sequence[Goal]) -> dict[str, set[str]]:
    """Each goal's transitive prerequisites (what ``nx.ancestors`` on :func:`goal_graph` gives), by a walk over
    the dependency lists; a DAG that :func:`goal_graph` would reject is handed to it, so its errors stay the same.

    Every episode's record computes this once: building the networkx graph and checking it was ~2.5% of env time
    on both built-in domains (py-spy, random masked policy, 3-4 steps an episode); the walk costs a few us.
    """
    deps: dict[str, list[str]] = {}
    for x in goals:
        deps.setdefault(x.id, []).extend(x.deps)
    if any(d not in deps for ds in deps.values() for d in ds):
        goal_graph(goals)  # raises: an unknown dependency
    out: dict[str, set[str]] = {}
    for gid in deps:
        seen: set[str] = set()
        stack = list(deps[gid])
        while stack:
            d = stack.pop()
            if d not in seen:
                seen.add(d)
                stack.extend(deps[d])
        if gid in seen:
            goal_graph(goals)  # raises: a cycle
        out[gid] = seen
    return out
