"""The five-metric evaluation (seed 000) plus completion and risk, as pure functions of finished episodes.

All functions take :class:`~agentic_ray.rewards.episode_record.EpisodeRecord` objects (or their dicts) and hold
no training code.

* **TCSR** (tool-call success rate): successful tool calls ÷ calls, over every step of every episode. A step that
  the gateway answered with an error code (including an invalid or masked action sent anyway) is a failed call.
* **DVR** (DAG validity rate): episodes whose executed plan has no dependency violation and no missing
  prerequisite ÷ episodes.
* **Entity Recall@5**: ``None`` ("n/a") until long-term memory lands; then recalled ÷ mentioned entities.
* **CU** (correction uplift): success rate of the first action after a failed step with the reflection input on,
  minus the same rate with it off, on the same validation failures (an ablation; see :func:`correction_uplift`).
* **SPT** (steps per task): mean env steps per episode; ``spt_over_optimal`` divides each episode's steps by the
  task's optimal step count first.
* ``completion``: share of episodes with every goal satisfied; ``high_risk_share``: high-risk steps ÷ steps.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx

from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.rewards.episode_record import EpisodeRecord

TIMEOUT_CODES = frozenset(
    {"TOOL_TIMEOUT", "CIRCUIT_OPEN", "RATE_LIMITED", "UPSTREAM_ERROR", "INVALID_OUTPUT"}
)
BAD_PARAM_CODES = frozenset({"INVALID_INPUT", "NOT_FOUND", "CONFLICT", "NOT_WHITELISTED"})


def as_records(episodes: Iterable[EpisodeRecord | dict[str, Any]]) -> list[EpisodeRecord]:
    return [e if isinstance(e, EpisodeRecord) else EpisodeRecord.from_dict(e) for e in episodes]


@dataclass
class EvalMetrics:
    episodes: int
    tcsr: float
    dvr: float
    entity_recall_at_5: float | None
    cu: float | None
    spt: float
    spt_over_optimal: float
    completion: float
    high_risk_share: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tcsr(episodes: Sequence[EpisodeRecord]) -> float:
    calls = [s.ok for e in episodes for s in e.steps]
    return sum(calls) / len(calls) if calls else 0.0


def dvr(episodes: Sequence[EpisodeRecord]) -> float:
    return sum(e.dag_valid for e in episodes) / len(episodes) if episodes else 0.0


def entity_recall_at_5(episodes: Sequence[EpisodeRecord]) -> float | None:
    """Recalled ÷ mentioned entities (top-5 recall is decided by the memory layer). None while nothing is tracked."""
    mentioned = sum(len(e.entities_mentioned) for e in episodes)
    if mentioned == 0:
        return None
    hits = sum(len(set(e.entities_recalled[:5]) & set(e.entities_mentioned)) for e in episodes)
    return hits / mentioned


def spt(episodes: Sequence[EpisodeRecord]) -> float:
    return sum(e.num_steps for e in episodes) / len(episodes) if episodes else 0.0


def spt_over_optimal(episodes: Sequence[EpisodeRecord]) -> float:
    r = [e.num_steps / max(1, e.optimal_steps) for e in episodes]
    return sum(r) / len(r) if r else 0.0


def completion(episodes: Sequence[EpisodeRecord]) -> float:
    return sum(e.completed for e in episodes) / len(episodes) if episodes else 0.0


def high_risk_share(episodes: Sequence[EpisodeRecord]) -> float:
    steps = [s.high_risk for e in episodes for s in e.steps]
    return sum(steps) / len(steps) if steps else 0.0


def first_action_after_failure(episodes: Sequence[EpisodeRecord], first_only: bool = False) -> list[bool]:
    """For every failed step that is not the last one, whether the next step succeeded.

    With ``first_only`` only each episode's first failure counts. That is what the CU ablation compares: before
    the first failure the reflection input is empty, so with the same task seeds a run with reflection on and a
    run with it off reach the very same first failure, and only the next action can differ.
    """
    out = []
    for e in episodes:
        for a, b in itertools.pairwise(e.steps):
            if not a.ok:
                out.append(b.ok)
                if first_only:
                    break
    return out


def correction_uplift(with_reflection: Sequence[bool], without_reflection: Sequence[bool]) -> float | None:
    """P(first action after a failure succeeds | reflection on) − P(... | off). None when either side is empty."""
    if not with_reflection or not without_reflection:
        return None
    return sum(with_reflection) / len(with_reflection) - sum(without_reflection) / len(without_reflection)


def evaluate(
    episodes: Iterable[EpisodeRecord | dict[str, Any]], cu: float | None = None, memory: bool = False
) -> EvalMetrics:
    """All metrics at once. ``cu`` comes from the reflection ablation (it needs two rollouts).

    Entity Recall@5 is reported only with ``memory=True``: until long-term memory lands, the env's entity
    bookkeeping measures whether a call used the request's entities, which is not recall from memory.
    """
    eps = as_records(episodes)
    return EvalMetrics(
        episodes=len(eps),
        tcsr=tcsr(eps),
        dvr=dvr(eps),
        entity_recall_at_5=entity_recall_at_5(eps) if memory else None,
        cu=cu,
        spt=spt(eps),
        spt_over_optimal=spt_over_optimal(eps),
        completion=completion(eps),
        high_risk_share=high_risk_share(eps),
    )


# ---------------------------------------------------------------------------------------------- attribution
def plan_violations(e: EpisodeRecord) -> dict[str, list[tuple[str, str]]]:
    """Dependency violations and missing prerequisites of the executed plan, and cycles in the goal DAG.

    Returns ``{"violations": [(prereq, goal)], "missing": [(prereq, goal)], "cycles": [(a, b)]}``: a *violation*
    is a goal satisfied before one of its prerequisites; a *missing* prerequisite was never satisfied although
    the goal was.
    """
    g = nx.DiGraph()
    g.add_nodes_from(e.goals)
    g.add_edges_from(e.goal_deps)
    order = {goal: i for i, goal in enumerate(e.goals_done_order)}
    violations, missing = [], []
    for pre, goal in g.edges:
        if goal in order:
            if pre not in order:
                missing.append((pre, goal))
            elif order[pre] > order[goal]:
                violations.append((pre, goal))
    cycles = [(a, b) for c in nx.simple_cycles(g) for a, b in zip(c, c[1:] + c[:1], strict=True)]
    return {"violations": violations, "missing": missing, "cycles": cycles}


def root_cause(e: EpisodeRecord) -> str | None:
    """The root-cause class of a failed episode (one of ``ROOT_CAUSES``), or None for a completed one.

    Checked in order of how directly the trace shows the cause: a risk violation, a dependency violation, a
    missing prerequisite, a wrong entity, then the dominant error (tool errors vs bad parameters).
    """
    if e.completed:
        return None
    pv = plan_violations(e)
    if any(s.high_risk for s in e.steps):
        return "risk_violation"
    if pv["violations"] or e.dependency_violations:
        return "dependency_violation"
    if pv["missing"] or any(s.result_code == "PRECONDITION_FAILED" for s in e.steps):
        return "missing_prerequisite"
    if e.entities_mentioned and not set(e.entities_mentioned) <= set(e.entities_recalled):
        return "wrong_entity"
    codes = Counter(s.result_code for s in e.steps if not s.ok)
    t = sum(v for k, v in codes.items() if k in TIMEOUT_CODES)
    b = sum(v for k, v in codes.items() if k in BAD_PARAM_CODES)
    if t and t >= b:
        return "tool_error"
    if b:
        return "bad_parameters"
    return "missing_prerequisite"  # ran out of steps without the goals: the plan lacked a needed step


def root_cause_index(e: EpisodeRecord) -> int:
    rc = root_cause(e)
    return -1 if rc is None else ROOT_CAUSES.index(rc)


def attribute_failures(episodes: Iterable[EpisodeRecord | dict[str, Any]]) -> dict[str, Any]:
    """Failure attribution per metric (seed 000): tool logs for TCSR, plan structure for DVR, causes overall.

    ``errors`` splits the failed calls by error code into injected faults (``StepRecord.injected``) and the
    policy's own errors; ``root_causes_injected`` counts the failed episodes whose every failed call was an
    injected fault (a subset of ``root_causes``).
    """
    eps = as_records(episodes)
    codes = Counter(s.result_code for e in eps for s in e.steps if not s.ok)
    by_skill = Counter((s.skill, s.result_code) for e in eps for s in e.steps if not s.ok)
    viol: Counter[str] = Counter()
    miss: Counter[str] = Counter()
    for e in eps:
        pv = plan_violations(e)
        viol.update(f"{a}->{b}" for a, b in pv["violations"])
        miss.update(f"{a}->{b}" for a, b in pv["missing"])
    causes = Counter(rc for e in eps if (rc := root_cause(e)) is not None)
    # Injected faults apart from the policy's own errors: by error code, and the failed episodes whose every
    # failed step was an injected fault (their root cause is the fault, not a decision).
    injected = Counter(s.result_code for e in eps for s in e.steps if not s.ok and s.injected)
    own = Counter(s.result_code for e in eps for s in e.steps if not s.ok and not s.injected)
    fault_only = Counter(
        rc
        for e in eps
        if (rc := root_cause(e)) is not None
        and any(not s.ok for s in e.steps)
        and all(s.injected for s in e.steps if not s.ok)
    )
    return {
        "tcsr": {
            "timeouts": sum(v for k, v in codes.items() if k in TIMEOUT_CODES),
            "bad_parameters": sum(v for k, v in codes.items() if k in BAD_PARAM_CODES),
            "preconditions": codes.get("PRECONDITION_FAILED", 0),
            "by_code": dict(codes.most_common()),
            "by_skill": {f"{s}:{c}": n for (s, c), n in by_skill.most_common(10)},
        },
        "dvr": {
            "dependency_violations": dict(viol.most_common(10)),
            "missing_prerequisites": dict(miss.most_common(10)),
        },
        "root_causes": dict(causes.most_common()),
        "root_causes_injected": dict(fault_only.most_common()),
        "errors": {"injected": dict(injected.most_common()), "policy": dict(own.most_common())},
    }


class AutoPause:
    """Stops training when DVR declines ``patience`` evaluations in a row (seed 000: 3)."""

    def __init__(self, patience: int = 3) -> None:
        self.patience = patience
        self.history: list[float] = []

    def update(self, dvr_value: float) -> bool:
        """Record one evaluation; True when the last ``patience`` evaluations each declined."""
        self.history.append(dvr_value)
        h = self.history[-(self.patience + 1) :]
        return len(h) == self.patience + 1 and all(b < a for a, b in itertools.pairwise(h))

    def get_state(self) -> dict[str, Any]:
        return {"patience": self.patience, "history": list(self.history)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.patience, self.history = state["patience"], list(state["history"])


def diagnosis_report(
    episodes: Iterable[EpisodeRecord | dict[str, Any]], dvr_history: Sequence[float], max_examples: int = 3
) -> dict[str, Any]:
    """What auto-pause writes: the DVR trend, the top causes and example traces of invalid plans."""
    eps = as_records(episodes)
    bad = [e for e in eps if not e.dag_valid or not e.completed]
    examples = []
    for e in bad[:max_examples]:
        examples.append(
            {
                "episode_id": e.episode_id,
                "task_family": e.task_family,
                "root_cause": root_cause(e),
                "plan": plan_violations(e),
                "steps": [
                    {"skill": s.skill, "code": s.result_code, "trace_id": s.trace_id, "args": s.args}
                    for s in e.steps
                ],
            }
        )
    return {"dvr_history": list(dvr_history), "attribution": attribute_failures(eps), "examples": examples}
