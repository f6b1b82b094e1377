"""Scripted-expert demonstrations for imitation, with controlled wrong samples (seed 000: 18%).

Three kinds of trajectory, all on *training* task seeds:

* ``clean``: the expert solves the task;
* ``garbled``: every tool reply may arrive garbled (a valid JSON shell with garbled content); the expert sees
  the failed call and retries, so the data shows recovery from tool errors;
* ``reversed``: the first step runs a goal whose prerequisite is not done yet (a reversed-step plan); the gateway
  rejects it, and from then on the expert follows the correct DAG.

Every step carries a weight: 1 for an expert action (imitated), 0 for the injected wrong step (never imitated).
Each wrong-sample episode is labelled with its root-cause class (``ROOT_CAUSES``) for the reflection stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.expert import ScriptedExpert
from agentic_ray.envs.graph_spec import ROOT_CAUSES
from agentic_ray.eval.metrics import root_cause
from agentic_ray.keys import EPISODE_RECORD
from agentic_ray.rewards.episode_record import EpisodeRecord

GARBLED_RATE = 0.8
"""Per-attempt garble rate of ``garbled`` demos: with two retries, about half of their calls still fail."""


@dataclass
class Demo:
    kind: str  # clean | garbled | reversed
    family: str
    obs: list[dict[str, np.ndarray]] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    root_cause: int = -1  # index into ROOT_CAUSES, -1 for none
    completed: bool = False


def _wrong_first_action(env: AgentTaskEnv) -> Any | None:
    """An action for a goal whose prerequisites are not done (a reversed step), or None if every goal is ready."""
    task, state = env.task, env.state
    assert task is not None and state is not None
    ready = env.builder.goal_ready(state)
    for i, g in enumerate(task.goals):
        if not ready[i] and not state.goal_done[i]:
            params = dict(g.args)
            params.update(g.numeric)
            return env.encode_action(g.skill, params)
    return None


def collect_demos(
    env_config: AgentTaskEnvConfig, n: int, wrong_share: float = 0.18, seed: int = 0
) -> list[Demo]:
    """``n`` expert trajectories; ``wrong_share`` of them are controlled wrong samples (half garbled, half reversed)."""
    rng = np.random.default_rng(seed)
    clean_cfg = env_config.model_copy(
        update={"faults": env_config.faults.model_copy(update={"enabled": False})}
    )
    garbled_cfg = env_config.model_copy(
        update={
            "faults": env_config.faults.model_copy(
                update={
                    "enabled": True,
                    "start_share": 1.0,
                    "end_share": 1.0,
                    "kinds": {"garbage": 1.0},
                    "garbage_rate": GARBLED_RATE,
                }
            )
        }
    )
    envs = {"clean": AgentTaskEnv(clean_cfg), "garbled": AgentTaskEnv(garbled_cfg)}
    envs["reversed"] = envs["clean"]
    expert = ScriptedExpert()
    demos: list[Demo] = []
    n_wrong = round(n * wrong_share)
    kinds = ["clean"] * (n - n_wrong) + ["garbled"] * (n_wrong // 2) + ["reversed"] * (n_wrong - n_wrong // 2)
    rng.shuffle(kinds)
    for i, kind in enumerate(kinds):
        env = envs[kind]
        obs, _ = env.reset(seed=int(seed * 1_000_003 + i))
        d = Demo(kind=kind, family=env.task.family if env.task else "")
        if kind == "reversed":
            wrong = _wrong_first_action(env)
            if wrong is None:  # every goal is ready from the start: nothing to reverse
                d.kind = "clean"
            else:
                d.obs.append(obs)
                d.actions.append(wrong)
                d.weights.append(0.0)
                obs, _, term, trunc, info = env.step(wrong)
                if term or trunc:  # the wrong step ended it: keep as a labelled failure
                    _finish(d, info)
                    demos.append(d)
                    continue
        while True:
            a = expert.act(env)
            d.obs.append(obs)
            d.actions.append(a)
            d.weights.append(1.0)
            obs, _, term, trunc, info = env.step(a)
            if term or trunc:
                _finish(d, info)
                break
        demos.append(d)
    for e in {id(v): v for v in envs.values()}.values():
        e.close()
    return demos


def _finish(d: Demo, info: dict[str, Any]) -> None:
    rec = EpisodeRecord.from_dict(info[EPISODE_RECORD])
    d.completed = rec.completed
    if d.kind != "clean":
        failed_steps = [s for s in rec.steps if not s.ok]
        cause = root_cause(rec) if not rec.completed else None
        if cause is None and failed_steps:
            code = failed_steps[0].result_code
            cause = (
                "tool_timeout"
                if code in ("INVALID_OUTPUT", "TOOL_TIMEOUT", "UPSTREAM_ERROR")
                else ("missing_prerequisite" if code == "PRECONDITION_FAILED" else "dependency_violation")
            )
        if cause is None and d.kind == "reversed":  # the early step ran out of DAG order without an error
            cause = "dependency_violation"
        d.root_cause = ROOT_CAUSES.index(cause) if cause else -1
