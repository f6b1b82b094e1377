"""Goal-DAG templates learned from a domain's own tasks, and the DAG built from families and slots.

For each family the build draws tasks (``Domain.make_task``) and lines up each goal's arguments and hints with
the slot values the domain's renderings give for the task (``Renderings.slots``). An argument is

* **bound** to a slot when, in every drawn task that has the slot, it equals the slot's value (an order id, a
  delivery channel);
* **constant** when it has one value across all drawn tasks (an SMS template, a reason code);
* **open** otherwise: the text cannot give it (an id found by a lookup, the price of an item), so the parsed
  goal leaves it out and the agent finds it.

A composite family's rule (each subtask's goal-id prefix and priority offset) is learned the same way, from the
composite tasks' goals against the simple templates. Nothing here names a domain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.goal_dag import Goal, goal_graph
from agentic_ray.domains.protocol import Domain, Task
from agentic_ray.domains.rendering import Renderings

__all__ = ["CompositionRule", "DagTemplates", "FamilyTemplate", "GoalTemplate", "learn_templates"]


@dataclass(frozen=True)
class GoalTemplate:
    """One goal of a family template (see the module docstring for bound, constant and open arguments)."""

    id: str
    skill: str
    deps: tuple[str, ...]
    priority: int
    tolerance: float
    safety_check: bool
    description: str
    bound_args: dict[str, str] = field(default_factory=dict)
    const_args: dict[str, Any] = field(default_factory=dict)
    bound_hints: dict[str, str] = field(default_factory=dict)
    const_hints: dict[str, str] = field(default_factory=dict)

    def build(self, slots: dict[str, str], prefix: str = "", priority_offset: int = 0) -> Goal:
        """The goal for these slot values (a bound argument whose slot is absent is left out)."""
        args = dict(self.const_args)
        args.update({a: slots[s] for a, s in self.bound_args.items() if s in slots})
        hints = dict(self.const_hints)
        hints.update({h: slots[s] for h, s in self.bound_hints.items() if s in slots})
        return Goal(
            id=prefix + self.id,
            skill=self.skill,
            args=args,
            deps=tuple(prefix + d for d in self.deps),
            priority=self.priority + priority_offset,
            tolerance=self.tolerance,
            description=self.description,
            hints=hints,
            safety_check=self.safety_check,
        )


@dataclass(frozen=True)
class FamilyTemplate:
    """A simple family's goal template, the slots its requests need and the fact sets that identify a customer.

    Attributes:
        required_slots: slots every drawn task had (a request without one is clarified).
        optional_slots: slots some drawn tasks had.
        fact_sets: the fact-key sets seen in the family's requests (any one identifies the customer).
    """

    family: str
    goals: tuple[GoalTemplate, ...]
    required_slots: tuple[str, ...]
    optional_slots: tuple[str, ...]
    fact_sets: tuple[tuple[str, ...], ...]

    @property
    def slots(self) -> frozenset[str]:
        return frozenset(self.required_slots) | frozenset(self.optional_slots)


@dataclass(frozen=True)
class CompositionRule:
    """How a composite family's DAG is made from its subtasks: goal-id prefix and priority offset per position."""

    family: str
    prefixes: tuple[str, ...]
    priority_offsets: tuple[int, ...]


@dataclass(frozen=True)
class DagTemplates:
    """Every family template of a domain plus its composition rule (if it has a composite family)."""

    families: dict[str, FamilyTemplate]
    composition: CompositionRule | None

    def build(self, families: Sequence[str], slots: Sequence[dict[str, str]]) -> tuple[Goal, ...]:
        """The goal DAG of these (simple) families with these slots, one slot dict per family.

        Raises:
            ValueError: several families but no composition rule (or more than it covers).
        """
        if len(families) == 1:
            goals = tuple(g.build(slots[0]) for g in self.families[families[0]].goals)
        else:
            rule = self.composition
            if rule is None or len(families) > len(rule.prefixes):
                raise ValueError(
                    f"{len(families)} families in one request, the domain composes none that many"
                )
            goals = tuple(
                g.build(s, rule.prefixes[k], rule.priority_offsets[k])
                for k, (fam, s) in enumerate(zip(families, slots, strict=True))
                for g in self.families[fam].goals
            )
        goal_graph(goals)  # acyclic and closed, or ValueError
        return goals

    def family_label(self, families: Sequence[str]) -> str:
        """The task family label of a request raising these families."""
        if len(families) > 1 and self.composition is not None:
            return self.composition.family
        return families[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "families": {k: dataclasses.asdict(v) for k, v in self.families.items()},
            "composition": None if self.composition is None else dataclasses.asdict(self.composition),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DagTemplates:
        fams = {}
        for k, v in d["families"].items():
            goals = tuple(GoalTemplate(**{**g, "deps": tuple(g["deps"])}) for g in v["goals"])
            fams[k] = FamilyTemplate(
                family=v["family"],
                goals=goals,
                required_slots=tuple(v["required_slots"]),
                optional_slots=tuple(v["optional_slots"]),
                fact_sets=tuple(tuple(s) for s in v["fact_sets"]),
            )
        c = d["composition"]
        comp = (
            None
            if c is None
            else CompositionRule(c["family"], tuple(c["prefixes"]), tuple(c["priority_offsets"]))
        )
        return cls(fams, comp)


def _bound_slot(vals: list[Any], slots: list[dict[str, str]]) -> str | None:
    """The slot these argument values are bound to: equal to it in every task that has it, in at least one."""
    if any(v is None or isinstance(v, list | tuple) for v in vals):
        return None
    cands: set[str] | None = None
    for v, s in zip(vals, slots, strict=True):
        here = {k for k, sv in s.items() if sv == str(v)}
        if here:
            cands = here if cands is None else cands & here
    if not cands:
        return None
    for name in sorted(cands):
        if all(name not in s or s[name] == str(v) for v, s in zip(vals, slots, strict=True)):
            return name
    return None


def _learn_goal(idx: int, samples: list[tuple[Task, dict[str, str]]]) -> GoalTemplate:
    first = samples[0][0].goals[idx]
    for t, _ in samples:
        g = t.goals[idx]
        if (g.id, g.skill, g.deps, g.priority, g.safety_check) != (
            first.id,
            first.skill,
            first.deps,
            first.priority,
            first.safety_check,
        ):
            raise ValueError(f"family {t.family}: goal {idx} differs between tasks ({first.id} vs {g.id})")

    def classify(get: str) -> tuple[dict[str, str], dict[str, Any]]:
        names = sorted({k for t, _ in samples for k in getattr(t.goals[idx], get)})
        bound: dict[str, str] = {}
        const: dict[str, Any] = {}
        for name in names:
            vals = [getattr(t.goals[idx], get).get(name) for t, _ in samples]
            bound_to = _bound_slot(vals, [s for _, s in samples])
            if bound_to is not None:
                bound[name] = bound_to
                continue
            if all(v == vals[0] for v in vals) and vals[0] is not None:
                const[name] = list(vals[0]) if isinstance(vals[0], tuple) else vals[0]
        return bound, const

    bound_args, const_args = classify("args")
    bound_hints, const_hints = classify("hints")
    return GoalTemplate(
        id=first.id,
        skill=first.skill,
        deps=tuple(first.deps),
        priority=first.priority,
        tolerance=first.tolerance,
        safety_check=first.safety_check,
        description=first.description
        if all(t.goals[idx].description == first.description for t, _ in samples)
        else "",
        bound_args=bound_args,
        const_args=const_args,
        bound_hints=bound_hints,
        const_hints={k: str(v) for k, v in const_hints.items()},
    )


def draw_tasks(domain: Domain, family: str, n: int, seed: int) -> list[Task]:
    """``n`` training tasks of a family (training seeds, drawn from ``seed``)."""
    rng = np.random.default_rng([seed, domain.families.index(family)])
    return [domain.make_task(family, domain.draw_training_seed(rng))[1] for _ in range(n)]


def learn_templates(domain: Domain, renderings: Renderings, n: int = 40, seed: int = 0) -> DagTemplates:
    """Learn the family templates and composition rule of ``domain`` from ``n`` drawn tasks per family.

    Raises:
        ValueError: a family whose goal structure varies between tasks, or an inconsistent composite.
    """
    fams: dict[str, FamilyTemplate] = {}
    simple = [f for f in domain.families if f not in renderings.composite_families]
    for fam in simple:
        tasks = draw_tasks(domain, fam, n, seed)
        samples = [(t, renderings.slots(t)[0]) for t in tasks]
        lengths = {len(t.goals) for t in tasks}
        if len(lengths) != 1:
            raise ValueError(f"family {fam}: goal count varies between tasks {sorted(lengths)}")
        keys = [frozenset(s) for _, s in samples]
        every = frozenset.intersection(*keys)
        some = frozenset.union(*keys) - every
        fact_sets = sorted({tuple(sorted(t.request.facts)) for t in tasks})
        fams[fam] = FamilyTemplate(
            family=fam,
            goals=tuple(_learn_goal(i, samples) for i in range(len(tasks[0].goals))),
            required_slots=tuple(sorted(every)),
            optional_slots=tuple(sorted(some)),
            fact_sets=tuple(fact_sets),
        )
    comp = None
    for fam in sorted(renderings.composite_families):
        prefixes: dict[int, set[str]] = {}
        offsets: dict[int, set[int]] = {}
        for t in draw_tasks(domain, fam, n, seed):
            pos = 0
            for k, sub in enumerate(t.subtasks):
                for gt in fams[sub].goals:
                    g = t.goals[pos]
                    pos += 1
                    if not g.id.endswith(gt.id) or g.skill != gt.skill:
                        raise ValueError(f"composite {fam}: goal {g.id} does not line up with {sub}/{gt.id}")
                    prefixes.setdefault(k, set()).add(g.id[: len(g.id) - len(gt.id)])
                    offsets.setdefault(k, set()).add(g.priority - gt.priority)
        if any(len(v) != 1 for v in prefixes.values()) or any(len(v) != 1 for v in offsets.values()):
            raise ValueError(f"composite {fam}: prefixes {prefixes} or offsets {offsets} vary")
        ks = sorted(prefixes)
        comp = CompositionRule(fam, tuple(prefixes[k].pop() for k in ks), tuple(offsets[k].pop() for k in ks))
    return DagTemplates(fams, comp)


def known_goals(templates: DagTemplates, task: Task, renderings: Renderings) -> tuple[Goal, ...]:
    """The gold goal DAG of ``task`` as text can state it: the template with the task's own slot values (open
    arguments left out). The parser's output is compared with this (``dag_exact``)."""
    fams = task.subtasks or (task.family,)
    return templates.build(fams, renderings.slots(task))
