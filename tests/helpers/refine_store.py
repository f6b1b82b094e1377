"""A Serve store filled through the real :class:`DecisionStore` API, as the Serve app's agent mode writes it:
an open session, one stored action per step, the finished episode's decision, and feedback on it."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.serving.decision_store import DecisionStore
from agentic_ray.serving.sessions import action_to_json

Policy = Callable[[AgentTaskEnv, int], Any]


def expert(env: AgentTaskEnv, t: int) -> Any:
    return env.encode_action(*env.domain.expert().plan(env.view()))


def skips_first_step(env: AgentTaskEnv, t: int) -> Any:
    """A policy with an injected weakness: the expert, except that its first call is the expert's second-best
    idea, the last skill the expert would reach (it skips the step every plan starts with)."""
    a = expert(env, t)
    if t == 0 and isinstance(a, dict):
        a = dict(a)
        a["skill"] = (int(a["skill"]) + 1) % len(env.skills)
    return a


def hands_off_early(family: str) -> Policy:
    """A policy with an injected weakness no step shows: the expert, except that on ``family`` its second call
    hands off. Every call succeeds and the task fails (the decision that lost it is not a failed step)."""

    def policy(env: AgentTaskEnv, t: int) -> Any:
        assert env.task is not None
        if env.task.family == family and t == 1:
            return env.encode_action("human.handoff", {"reason": "complex"})
        return expert(env, t)

    return policy


def record_sessions(
    path: Path,
    env_config: AgentTaskEnvConfig,
    tasks: list[tuple[str, int]],
    policy: Policy,
    arm: str = "stable",
    version: str = "v0",
) -> list[tuple[str, EpisodeRecord]]:
    """Run each task's episode with ``policy`` and store it as the Serve app does, with feedback (success if it
    completed, else a failure with a reason). Returns ``(session id, record)`` per task."""
    store = DecisionStore(path, compact_every_s=None)
    env = AgentTaskEnv(env_config)
    out = []
    try:
        for i, (family, seed) in enumerate(tasks):
            sid = f"s{i:04d}"
            store.open_session(sid, "default", family, seed, arm)
            store.add_decision(sid, "episode", arm, version, {"family": family, "seed": seed}, {"open": True})
            env.reset(
                seed=zlib.crc32(f"{family}:{seed}".encode()), options={"family": family, "task_seed": seed}
            )
            t = 0
            while True:
                a = policy(env, t)
                _o, _r, term, trunc, info = env.step(a)
                store.add_session_step(sid, t, action_to_json(a), arm)
                store.add_decision(f"{sid}-{t}", "step", arm, version, {"session_id": sid, "t": t}, {"t": t})
                t += 1
                if term or trunc:
                    rec = EpisodeRecord.from_dict(info[EPISODE_RECORD])
                    break
            summary = {"steps": t, "completed": rec.completed, "dag_valid": rec.dag_valid, "deciders": [arm]}
            store.add_decision(sid, "episode", arm, version, {"family": family, "seed": seed}, summary)
            store.close_session(sid)
            if rec.completed:
                store.add_feedback(sid, "success", None, "")
            else:
                store.add_feedback(sid, "failure", "not_solved", "")
            out.append((sid, rec))
    finally:
        env.close()
        store.close()
    return out
