"""What a finished episode hands to the reward layers: a plain, picklable summary with no env objects.

The env writes ``EpisodeRecord.to_dict()`` into the last step's ``info["episode_record"]``; reward layers are
pure functions of it and return one value per env step (episode-level layers put their value on the last step).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class StepRecord:
    """One executed step, as the gateway and the env saw it."""

    skill: str
    args: dict[str, Any]
    result_code: str  # "OK" or a ToolExecutor error code such as "TOOL_TIMEOUT"
    ok: bool
    latency_ms: float
    attempts: int = 1
    fallback_used: str | None = None
    masked: bool = False  # the policy sent an action the mask forbade
    high_risk: bool = False  # a high-risk action (e.g. refund before the inventory check)
    risk_weight: float = 0.0
    goals_satisfied: list[str] = field(default_factory=list)  # subgoals this step completed
    redundant: bool = False  # a successful call that advanced no goal
    trace_id: str = ""
    injected: bool = (
        False  # failed because of an injected fault (an outage, transient or garbled reply), not the policy
    )
    caller_error: str | None = None  # the root cause of a caller error injected into this call (issue 13)
    root_cause: str | None = None  # the env's rule-based root cause of this step (None: it succeeded)

    def call_key(self) -> tuple[str, str]:
        """The call as ``(skill, arguments)`` with the arguments compared by value (key order does not matter): two
        steps with equal keys made the same call."""
        return self.skill, json.dumps(self.args, sort_keys=True, default=str)


@dataclass
class EpisodeRecord:
    """A finished episode. ``steps`` has one entry per env step."""

    episode_id: str
    domain: str
    task_family: str
    task_seed: int
    steps: list[StepRecord]
    completed: bool  # every goal satisfied
    failed: bool  # explicit, unrecoverable failure
    truncated: bool  # step budget exhausted
    optimal_steps: int
    goals: list[str]  # subgoal ids of the DAG
    goal_deps: list[tuple[str, str]]  # (prerequisite, dependent) edges
    goals_done_order: list[str]  # subgoals in the order they were satisfied
    dag_valid: bool  # no dependency violation and no missing prerequisite
    dependency_violations: int = 0
    entities_mentioned: list[str] = field(default_factory=list)  # for memory recall (L4)
    entities_recalled: list[str] = field(default_factory=list)
    context: dict[str, Any] = field(
        default_factory=dict
    )  # domain features for reward layers (e.g. user level); key facts and their uses under "memory_facts"
    policy_version: int = 0
    intent_id: str = ""
    entities_past_cap: dict[str, int] = field(default_factory=dict)
    """Per node type, the most entities the agent knew past the type's node cap during the episode (left out of
    the observation; see ``ObservationBuilder.past_cap``). Empty when every known entity fit."""
    goals_void: list[str] = field(default_factory=list)
    """Goals voided by the customer's answer (``Goal.on_answer``): done, satisfied by nothing, never in
    ``goals_done_order``; they do not count among the goals a run had to reach."""
    consequences: list[dict[str, Any]] = field(default_factory=list)
    """Delayed outcomes of high-risk shortcuts (``risk_mode: soft``): ``{"skill", "kind", "step", "weight"}``
    for each complaint or chargeback that followed. The env's cheap reward never sees them; the reward pool
    scores them into the risk stream."""

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeRecord:
        # Vector-env info handling (gymnasium's dict aggregation + RLlib's DictInfoToList) can turn Python
        # scalars into numpy scalars/arrays; convert back so records stay plain and JSON-serialisable.
        d = _plain(dict(d))
        d["steps"] = [s if isinstance(s, StepRecord) else StepRecord(**s) for s in d["steps"]]
        d["goal_deps"] = [tuple(e) for e in d["goal_deps"]]
        return cls(**d)


_PLAIN_SCALARS = (str, int, float, bool)


def _plain(x: Any) -> Any:
    """Recursively turn numpy scalars and arrays into Python scalars and lists."""
    if x is None or type(x) in _PLAIN_SCALARS:
        return x
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_plain(v) for v in x)
    if hasattr(x, "tolist") and type(x).__module__ == "numpy":
        return _plain(x.tolist())
    return x
