"""How well a parser reads held-out renderings: family accuracy, slot F1, exact DAG match, clarify rate, latency.

* ``family_acc``: the parsed families (in order) equal the task's (``Task.subtasks`` or its family).
* ``slot_f1``: micro F1 over ``(slot, value)`` pairs of each conversation, where the gold pairs are the task's
  facts and the renderings' slot values (entity ids, enum values) and the parsed pairs are every extracted slot.
* ``dag_exact``: the parsed goals equal the gold DAG as text can state it (:func:`~agentic_ray.parser.
  dag_template.known_goals`: ids, skills, dependencies, priorities, hints and the arguments the text or the
  family fixes; the arguments a lookup finds are open on both sides). A clarified parse counts as a miss.
* ``clarify_rate``: the share of these complete requests answered with a clarification (lower is better).
* ``p50_ms`` / ``p99_ms``: wall time of one parse (embedding included), the parser and embedder warm.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.rendering import Renderings
from agentic_ray.parser.corpus import Example
from agentic_ray.parser.dag_template import known_goals
from agentic_ray.parser.goal_parser import GoalParser
from agentic_ray.parser.parsed_request import ParsedRequest

__all__ = ["EvalResult", "evaluate", "goal_key", "slot_pairs"]


def goal_key(g: Goal) -> tuple[Any, ...]:
    """What ``dag_exact`` compares of a goal."""
    args = tuple(sorted((k, str(v)) for k, v in g.args.items()))
    return (
        g.id,
        g.skill,
        tuple(sorted(g.deps)),
        g.priority,
        args,
        tuple(sorted(g.hints.items())),
        g.safety_check,
    )


def gold_pairs(ex: Example) -> set[tuple[str, str]]:
    """The gold ``(slot, value)`` pairs of a rendered example."""
    # a fact with several values reads as the parser would write it: the values joined by " or "
    pairs = {(k, v if isinstance(v, str) else " or ".join(v)) for k, v in ex.task.request.facts.items()}
    for s in ex.slots:
        pairs |= set(s.items())
    return pairs


def slot_pairs(p: ParsedRequest) -> set[tuple[str, str]]:
    """The parsed ``(slot, value)`` pairs."""
    return {(s.slot, s.value) for s in p.slots}


@dataclass(frozen=True)
class EvalResult:
    """Scores on a set of examples (see the module docstring)."""

    n: int
    family_acc: float
    slot_f1: float
    dag_exact: float
    clarify_rate: float
    p50_ms: float
    p99_ms: float
    failures: tuple[str, ...]


def evaluate(parser: GoalParser, examples: Sequence[Example], renderings: Renderings) -> EvalResult:
    """Parse every example (its last turn, with the earlier ones as history) and score it."""
    fam_ok = dag_ok = clar = tp = fp = fn = 0
    times = []
    fails: list[str] = []
    for ex in examples:
        t0 = time.perf_counter()
        p = parser.parse(ex.turns[-1], ex.turns[:-1])
        times.append((time.perf_counter() - t0) * 1000.0)
        gold_fams = ex.task.subtasks or (ex.task.family,)
        fam_ok += tuple(p.families) == tuple(gold_fams)
        gold = gold_pairs(ex)
        got = slot_pairs(p)
        tp += len(gold & got)
        fp += len(got - gold)
        fn += len(gold - got)
        clar += p.clarify is not None
        want = sorted(goal_key(g) for g in known_goals(parser.templates, ex.task, renderings))
        ok = p.clarify is None and sorted(goal_key(g) for g in p.goals) == want
        dag_ok += ok
        if not ok and len(fails) < 20:
            fails.append(f"{gold_fams} -> {p.families} clarify={p.clarify} | {' // '.join(ex.turns)}")
    n = max(len(examples), 1)
    prec = tp / max(tp + fp, 1)
    rec = tp / max(tp + fn, 1)
    return EvalResult(
        n=len(examples),
        family_acc=fam_ok / n,
        slot_f1=2 * prec * rec / max(prec + rec, 1e-12),
        dag_exact=dag_ok / n,
        clarify_rate=clar / n,
        p50_ms=float(np.percentile(times, 50)) if times else 0.0,
        p99_ms=float(np.percentile(times, 99)) if times else 0.0,
        failures=tuple(fails),
    )
