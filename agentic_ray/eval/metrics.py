"""The five-metric evaluation (seed 000) plus completion and risk, as pure functions of finished episodes.

All functions take :class:`~agentic_ray.rewards.episode_record.EpisodeRecord` objects (or their dicts) and hold
no training code. Every metric comes with its sample count (``<metric>_n`` in :class:`EvalMetrics`), so a reader
of ``metrics.jsonl`` can tell 0.5 over 4 calls from 0.5 over 4,000.

* **TCSR** (tool-call success rate), twice:
  * ``tcsr``: successful tool calls ÷ all calls. A step that the gateway answered with an error code (including
    an invalid or masked action sent anyway) is a failed call;
  * ``tcsr_policy``: the same over the calls the policy controls, i.e. without the failures an injected fault
    caused (``StepRecord.injected``: an outage, a transient or a garbled reply). The scripted expert scores
    below 1 on ``tcsr`` whenever faults are injected, and 1 on ``tcsr_policy``.
* **DVR** (DAG validity rate): episodes whose executed plan has no dependency violation and no missing
  prerequisite ÷ episodes. An episode that satisfied no goal counts as valid, so a policy that does nothing scores
  1.0; ``dvr_progress`` (what the RL stage's gate reads) counts only non-empty plans as valid: episodes that
  satisfied at least one goal with no violation and no missing prerequisite ÷ episodes.
* **Entity Recall@5**: ``None`` ("n/a") until long-term memory lands; then recalled ÷ mentioned entities.
* **CU** (correction uplift): over first-failure pairs (the same validation task's first failure, once with the
  diagnosis and once with the same failure evidence but the diagnosis withheld), the fix rate with it minus the
  fix rate without, with a 95% bootstrap interval and the pair count (:mod:`agentic_ray.eval.correction`). A fix
  is cause-specific: the failed call succeeding within its root cause's fix length. ``evidence_uplift``: the same
  over pairs of the evidence (no diagnosis) against neither.
* **SPT** (steps per task): mean env steps per **successful** episode (a failed episode's steps say nothing about
  how many a task takes); ``spt_over_optimal`` divides each one's steps by the task's optimal step count first.
  Both are None when no episode succeeded.
* ``completion``: share of episodes with every goal satisfied; ``first_pass_completion``: share of episodes
  completed with no delayed consequence (a complaint, a chargeback: ``EpisodeRecord.consequences``) coming back
  for them, a task solved on the first pass; ``high_risk_share``: high-risk steps ÷ steps;
  ``entities_past_cap``: entities per episode the observation left out because their type's node cap was full.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx

from agentic_ray.eval.correction import CorrectionUplift
from agentic_ray.eval.memory_metrics import entity_recall_at_k, forgetting
from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.keys import CONTEXT_MEMORY_FACTS
from agentic_ray.memory.memory_episode import MemoryEpisode
from agentic_ray.rewards.episode_record import EpisodeRecord

TIMEOUT_CODES = frozenset(
    {"TOOL_TIMEOUT", "CIRCUIT_OPEN", "RATE_LIMITED", "UPSTREAM_ERROR", "INVALID_OUTPUT"}
)
BAD_PARAM_CODES = frozenset({"INVALID_INPUT", "NOT_FOUND", "CONFLICT", "NOT_WHITELISTED"})


def as_records(episodes: Iterable[EpisodeRecord | dict[str, Any]]) -> list[EpisodeRecord]:
    return [e if isinstance(e, EpisodeRecord) else EpisodeRecord.from_dict(e) for e in episodes]


@dataclass
class EvalMetrics:
    """Every metric with its sample count ``<metric>_n`` (calls, episodes, successful episodes, steps or pairs)."""

    episodes: int
    tcsr: float
    tcsr_n: int  # tool calls
    tcsr_policy: float
    tcsr_policy_n: int  # tool calls without the failures an injected fault caused
    dvr: float
    dvr_n: int  # episodes
    dvr_progress: float
    dvr_progress_n: int  # episodes
    entity_recall_at_5: float | None
    entity_recall_at_5_n: int  # key facts (or mentioned entities with memory=True); 0: not measured
    cu: float | None
    cu_ci: tuple[float, float] | None
    cu_n: int  # first-failure pairs
    evidence_uplift: float | None
    evidence_uplift_ci: tuple[float, float] | None
    evidence_uplift_n: int  # first-failure pairs
    spt: float | None
    spt_n: int  # successful episodes
    spt_over_optimal: float | None
    spt_over_optimal_n: int  # successful episodes
    completion: float
    completion_n: int  # episodes
    first_pass_completion: float
    first_pass_completion_n: int  # episodes
    high_risk_share: float
    high_risk_share_n: int  # steps
    entities_past_cap: float = 0.0  # mean entities per episode the observation left out (past a node cap)
    entities_past_cap_n: int = 0  # episodes
    forgetting: float | None = (
        None  # key facts asked for again or used wrong ÷ key facts (None: no key facts)
    )
    forgetting_n: int = 0  # key facts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def tcsr(episodes: Sequence[EpisodeRecord]) -> float:
    """Successful calls ÷ all calls."""
    return _share([s.ok for e in episodes for s in e.steps])


def policy_calls(episodes: Sequence[EpisodeRecord]) -> list[bool]:
    """Success of every call the policy controls: all calls but the failures an injected fault caused."""
    return [s.ok for e in episodes for s in e.steps if not s.injected]


def tcsr_policy(episodes: Sequence[EpisodeRecord]) -> float:
    """Successful calls ÷ the calls the policy controls (see :func:`policy_calls`)."""
    return _share(policy_calls(episodes))


def dvr(episodes: Sequence[EpisodeRecord]) -> float:
    return _share([e.dag_valid for e in episodes])


def dvr_progress(episodes: Sequence[EpisodeRecord]) -> float:
    """Valid non-empty plans ÷ episodes: at least one goal satisfied, no violation, no missing prerequisite."""
    return _share([e.dag_valid and bool(e.goals_done_order) for e in episodes])


def entity_recall_at_5(episodes: Sequence[EpisodeRecord]) -> float | None:
    """Recalled ÷ mentioned entities (top-5 recall is decided by the memory layer). None while nothing is tracked.

    The env's entity bookkeeping (whether a call used the request's entities), reported only with
    ``evaluate(memory=True)``; episodes with key facts are measured by :func:`memory_episodes` instead."""
    mentioned = sum(len(e.entities_mentioned) for e in episodes)
    if mentioned == 0:
        return None
    hits = sum(len(set(e.entities_recalled[:5]) & set(e.entities_mentioned)) for e in episodes)
    return hits / mentioned


def memory_episodes(episodes: Sequence[EpisodeRecord]) -> list[MemoryEpisode]:
    """The key facts and their uses of the episodes whose task had key facts (the env writes them into the
    record's context under :data:`~agentic_ray.keys.CONTEXT_MEMORY_FACTS`)."""
    return [
        MemoryEpisode.from_context(e.context[CONTEXT_MEMORY_FACTS])
        for e in episodes
        if CONTEXT_MEMORY_FACTS in e.context
    ]


def spt(episodes: Sequence[EpisodeRecord]) -> float | None:
    """Mean steps of the successful episodes; None when none succeeded."""
    done = [e.num_steps for e in episodes if e.completed]
    return sum(done) / len(done) if done else None


def spt_over_optimal(episodes: Sequence[EpisodeRecord]) -> float | None:
    """Mean of steps ÷ optimal steps over the successful episodes; None when none succeeded."""
    r = [e.num_steps / max(1, e.optimal_steps) for e in episodes if e.completed]
    return sum(r) / len(r) if r else None


def completion(episodes: Sequence[EpisodeRecord]) -> float:
    return _share([e.completed for e in episodes])


def first_pass_completion(episodes: Sequence[EpisodeRecord]) -> float:
    """Completed episodes for which no delayed consequence (complaint, chargeback) came back ÷ episodes."""
    return _share([e.completed and not e.consequences for e in episodes])


def high_risk_share(episodes: Sequence[EpisodeRecord]) -> float:
    return _share([s.high_risk for e in episodes for s in e.steps])


def entities_past_cap(episodes: Sequence[EpisodeRecord]) -> float:
    """Mean number of entities per episode past their type's node cap (known to the agent, not in the
    observation); 0 when every episode fit its caps."""
    return sum(sum(e.entities_past_cap.values()) for e in episodes) / len(episodes) if episodes else 0.0


def first_action_after_failure(episodes: Sequence[EpisodeRecord], first_only: bool = False) -> list[bool]:
    """For every failed step that is not the last one, whether the next step succeeded.

    With ``first_only`` only each episode's first failure counts.
    """
    out = []
    for e in episodes:
        for a, b in itertools.pairwise(e.steps):
            if not a.ok:
                out.append(b.ok)
                if first_only:
                    break
    return out


def evaluate(
    episodes: Iterable[EpisodeRecord | dict[str, Any]],
    cu: CorrectionUplift | None = None,
    memory: bool = False,
    evidence: CorrectionUplift | None = None,
) -> EvalMetrics:
    """All metrics at once, each with its sample count. ``cu`` and ``evidence`` (the evidence uplift) come from
    the reflection ablation (:func:`~agentic_ray.eval.evaluator.correction_ablation`, three rollouts).

    Entity Recall@5 and forgetting are measured on the key facts of the episodes whose tasks have them (tasks
    where memory matters, :attr:`~agentic_ray.domains.protocol.Task.key_facts`; :mod:`agentic_ray.eval.
    memory_metrics`). Without key facts, Entity Recall@5 is reported only with ``memory=True``, from the env's
    entity bookkeeping (whether a call used the request's entities, which is not recall from memory).
    """
    eps = as_records(episodes)
    successes = sum(e.completed for e in eps)
    steps = sum(e.num_steps for e in eps)
    mem = memory_episodes(eps)
    n_facts = sum(len(m.facts) for m in mem)
    if n_facts:
        recall: float | None = entity_recall_at_k(mem, 5)
        recall_n = n_facts
    else:
        recall = entity_recall_at_5(eps) if memory else None
        recall_n = sum(len(e.entities_mentioned) for e in eps) if memory else 0
    return EvalMetrics(
        episodes=len(eps),
        tcsr=tcsr(eps),
        tcsr_n=steps,
        tcsr_policy=tcsr_policy(eps),
        tcsr_policy_n=len(policy_calls(eps)),
        dvr=dvr(eps),
        dvr_n=len(eps),
        dvr_progress=dvr_progress(eps),
        dvr_progress_n=len(eps),
        entity_recall_at_5=recall,
        entity_recall_at_5_n=recall_n,
        cu=None if cu is None else cu.cu,
        cu_ci=None if cu is None else cu.ci,
        cu_n=0 if cu is None else cu.pairs,
        evidence_uplift=None if evidence is None else evidence.cu,
        evidence_uplift_ci=None if evidence is None else evidence.ci,
        evidence_uplift_n=0 if evidence is None else evidence.pairs,
        spt=spt(eps),
        spt_n=successes,
        spt_over_optimal=spt_over_optimal(eps),
        spt_over_optimal_n=successes,
        completion=completion(eps),
        completion_n=len(eps),
        first_pass_completion=first_pass_completion(eps),
        first_pass_completion_n=len(eps),
        high_risk_share=high_risk_share(eps),
        high_risk_share_n=steps,
        entities_past_cap=entities_past_cap(eps),
        entities_past_cap_n=len(eps),
        forgetting=forgetting(mem),
        forgetting_n=n_facts,
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
