"""Episodes of the memory domains' tasks for tests: the expert's (or given actions), with every observation, and
observations compared but for their labels."""

from __future__ import annotations

from typing import Any

import numpy as np

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.graph_spec import LABEL_OBS_KEYS


def run_episode(
    env: AgentTaskEnv, family: str, seed: int, given: Any = None, actions: list[Any] | None = None
) -> list[Any]:
    """One episode of task ``(family, seed)`` (``given``: the env's ``task_given`` option, e.g. a function editing
    the task): the domain expert's actions, or the ``actions`` given and then stop. Returns
    ``[(obs, action, info)]`` with the reset's observation first."""
    opts: dict[str, Any] = {"family": family, "task_seed": seed}
    if given is not None:
        opts["task_given"] = given
    obs, _ = env.reset(seed=seed, options=opts)
    out: list[Any] = [(obs, None, {})]
    expert = env.domain.expert()
    for t in range(env.state.budget if env.state else 0):
        if actions is None:
            action = env.encode_action(*expert.plan(env.view()))
        elif t < len(actions):
            action = actions[t]
        else:
            break
        obs, _, term, trunc, info = env.step(action)
        out.append((obs, action, info))
        if term or trunc:
            break
    return out


def same_observation(oa: dict[str, np.ndarray], ob: dict[str, np.ndarray]) -> bool:
    """Whether two observations are equal but for their label entries."""
    return all(np.array_equal(oa[k], ob[k]) for k in oa if k not in LABEL_OBS_KEYS)


def equal_from_window_end(
    steps_a: list[Any], steps_b: list[Any], k: int, stop_skills: tuple[str, ...] = ()
) -> int:
    """Asserts that two episodes' observations (:func:`run_episode`, the same actions) are equal from step ``k``
    (the short-term window's end) until a tool result tells them apart: the goals a step satisfied differ, or it
    called one of ``stop_skills`` (a read that reveals which entity is meant). Returns how many were compared."""
    compared = 0
    for t, ((oa, _, ia), (ob, _, ib)) in enumerate(zip(steps_a[1:], steps_b[1:], strict=False), start=1):
        if t < k:
            continue
        if (
            ia["trace"]["goals_satisfied"] != ib["trace"]["goals_satisfied"]
            or ia["trace"]["skill"] in stop_skills
        ):
            break
        assert same_observation(oa, ob), f"step {t}: the observation still tells which entity is meant"
        compared += 1
    return compared
