"""Scripted-expert demonstrations for imitation, with controlled wrong samples (seed 000: 18%).

Four kinds of trajectory, all on *training* task seeds:

* ``clean``: the expert solves the task;
* ``garbled``: every tool reply may arrive garbled (a valid JSON shell with garbled content); the expert sees
  the failed call and retries, so the data shows recovery from tool errors (``tool_error``);
* ``reversed``: the first step runs a goal whose prerequisite is not done yet (a reversed-step plan); the gateway
  rejects it, and from then on the expert follows the correct DAG;
* ``wrong_args``: one of the expert's calls goes out with a look-alike argument that the gateway rejects: in
  half of them another enum choice or another entity the customer mentioned (``bad_parameters``: the expert
  calls again at once with the goal's values), in the other half an entity the task is not about
  (``wrong_entity``: the expert calls again on the request's entity);
* ``caller_error``: the env injects one caller error into the expert's calls (a wrong entity, stale
  information or a parameter above its limit, :mod:`agentic_ray.domains.caller_errors`); the expert's own next
  call is the cause's fix (the corrected call at once after a wrong entity or a bad parameter; after stale
  information a re-read, then the call again).

The wrong samples are split evenly between the four kinds. Their corrections differ by root cause (retry, run
the prerequisite, re-read first, call on the right entity), which is what the policy's reflection input is for.
The two caller errors leave the same trace in the rest of the observation (a failed call, no tool error), so
only the root cause tells their corrections apart.

Every step carries a weight: 1 for an expert action (imitated), 0 for the injected wrong step (never imitated).
Each wrong-sample episode is labelled with the root-cause class (``ROOT_CAUSES``) that the env attributed to its
first failed step; the reflection head itself learns from every step's ``obs["reflection"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.protocol import Expert
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.skills.contracts import EntityParam, EnumParam

GARBLED_RATE = 0.8
"""Per-attempt garble rate of ``garbled`` demos: with two retries, about half of their calls still fail."""

MAX_PROBES = 12
"""Look-alike arguments tried per task of a ``wrong_args`` demo."""

MAX_TASKS = 4
"""Tasks tried per ``wrong_args`` demo (some families have no look-alike the gateway rejects) before it falls
back to a clean one."""

WRONG_KINDS = ("garbled", "reversed", "wrong_args", "caller_error")
WRONG_ARG_CAUSES = ("bad_parameters", "wrong_entity")
"""Root causes of ``wrong_args`` demos, alternating."""


@dataclass
class Demo:
    kind: str  # clean | garbled | reversed | wrong_args | caller_error
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
    ready = env.builder.goal_ready(state.goal_done)
    for i, g in enumerate(task.goals):
        if not ready[i] and not state.goal_done[i]:
            params = dict(g.args)
            params.update(g.numeric)
            try:
                return env.encode_action(g.skill, params)
            except KeyError:  # the goal names an entity no lookup has revealed yet
                continue
    return None


def _look_alikes(env: AgentTaskEnv, skill: str, params: dict[str, Any], cause: str) -> list[dict[str, Any]]:
    """``params`` with one argument changed so that a rejection would be ``cause``: another enum choice or another
    relevant entity for ``bad_parameters``, an entity the task is not about for ``wrong_entity``."""
    assert env.task is not None
    mentioned = set(env.task.relevant)
    out = []
    for name, p in env.by_name[skill].input.items():
        if isinstance(p, EnumParam) and cause == "bad_parameters":
            alts: list[Any] = list(p.choices)
        elif isinstance(p, EntityParam):
            ids = env.builder.node_index[p.node_type]
            alts = [e for e in ids if (e in mentioned) == (cause == "bad_parameters")]
        else:
            continue
        out += [{**params, name: v} for v in alts if v != params.get(name)]
    return out


def _wrong_args_step(
    env: AgentTaskEnv, seed: int, cause: str, expert: Expert, rng: np.random.Generator
) -> tuple[int, Any] | None:
    """``(t, action)``: the expert's ``t``-th call with a look-alike argument that the env attributes to ``cause``,
    or None when none of :data:`MAX_PROBES` random candidates is.

    Probes by replaying the episode, which is deterministic for a fault-free env reset with the same seed.
    """
    env.reset(seed=seed)
    plan: list[tuple[str, dict[str, Any]]] = []
    cands: list[tuple[int, str, dict[str, Any]]] = []
    done = False
    while not done:
        skill, params = expert.plan(env.view())
        cands += [(len(plan), skill, p) for p in _look_alikes(env, skill, params, cause)]
        plan.append((skill, params))
        _, _, term, trunc, _ = env.step(env.encode_action(skill, params))
        done = term or trunc
    target = ROOT_CAUSES.index(cause)
    for i in rng.permutation(len(cands))[:MAX_PROBES]:
        t, skill, params = cands[int(i)]
        env.reset(seed=seed)
        for s, p in plan[:t]:
            env.step(env.encode_action(s, p))
        wrong = env.encode_action(skill, params)
        env.step(wrong)
        assert env.state is not None
        if env.state.last_failed and env.state.reflection[target] > 0:
            return t, wrong
    return None


def collect_demos(
    env_config: AgentTaskEnvConfig,
    n: int,
    wrong_share: float = 0.18,
    seed: int = 0,
    on_demo: Callable[[], None] | None = None,
) -> list[Demo]:
    """``n`` expert trajectories; ``wrong_share`` of them are controlled wrong samples (a quarter of each kind).

    ``on_demo`` is called after each trajectory (progress).
    """
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
    caller_cfg = clean_cfg.model_copy(
        update={"faults": clean_cfg.faults.model_copy(update={"caller_error_share": 1.0})}
    )
    envs = {
        "clean": AgentTaskEnv(clean_cfg),
        "garbled": AgentTaskEnv(garbled_cfg),
        "caller_error": AgentTaskEnv(caller_cfg),
    }
    envs["reversed"] = envs["wrong_args"] = envs["clean"]
    expert = envs["clean"].domain.expert()
    demos: list[Demo] = []
    n_wrong = round(n * wrong_share)
    kinds = ["clean"] * (n - n_wrong)
    for j, kind in enumerate(WRONG_KINDS):
        kinds += [kind] * ((n_wrong + j) // len(WRONG_KINDS))
    rng.shuffle(kinds)
    n_wrong_args = 0
    for i, kind in enumerate(kinds):
        env = envs[kind]
        demo_seed = int(seed * 1_000_003 + i)
        wrong_at, wrong = -1, None
        if kind == "wrong_args":
            cause = WRONG_ARG_CAUSES[n_wrong_args % len(WRONG_ARG_CAUSES)]
            n_wrong_args += 1
            for retry in range(MAX_TASKS):  # other tasks: seeds past the n demos' own
                found = _wrong_args_step(env, demo_seed + retry * n, cause, expert, rng)
                if found is not None:
                    demo_seed, (wrong_at, wrong) = demo_seed + retry * n, found
                    break
        obs, _ = env.reset(seed=demo_seed)
        if kind == "reversed":
            wrong_at, wrong = 0, _wrong_first_action(env)
        d = Demo(
            kind=kind if wrong is not None or kind == "garbled" else "clean",
            family=env.task.family if env.task else "",
        )
        while True:
            injected = len(d.obs) == wrong_at and wrong is not None
            a = wrong if injected else env.encode_action(*expert.plan(env.view()))
            d.obs.append(obs)
            d.actions.append(a)
            d.weights.append(0.0 if injected else 1.0)
            obs, _, term, trunc, info = env.step(a)
            if info[STEP_TRACE].get("caller_error"):  # the expert's call ran with an injected error
                d.kind = "caller_error"
            if d.kind != "clean" and d.root_cause < 0 and obs["reflection"].any():
                d.root_cause = int(obs["reflection"].argmax())  # the env's cause of the first failed step
            if term or trunc:
                d.completed = EpisodeRecord.from_dict(info[EPISODE_RECORD]).completed
                break
        demos.append(d)
        if on_demo is not None:
            on_demo()
    for e in {id(v): v for v in envs.values()}.values():
        e.close()
    return demos
