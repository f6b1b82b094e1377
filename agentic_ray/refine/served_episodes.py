"""The Serve app's stored episodes, replayed: what was asked, what was done, what the user said.

An agent-mode session is stored as its task (``family``, ``seed``), the action of every step and its decider
(:class:`~agentic_ray.serving.decision_store.DecisionStore`); feedback names the episode (its trace id is the
session id) or one of its steps (``<session id>-<t>``). The env is deterministic given the task seed and the
actions, so :func:`replay` rebuilds every observation and the finished episode's record exactly as the Serve app
saw them (the app resumes sessions the same way, :mod:`agentic_ray.serving.sessions`), and any step's world state
can be rebuilt to simulate another action there (:func:`replay_prefix`).

Stateless ``/v1/act`` decisions have no stored world state and are not read.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.serving.decision_store import DecisionStore, FeedbackRecord, read_feedback
from agentic_ray.serving.sessions import action_from_json

__all__ = ["ServedEpisode", "expert_action", "read_served_episodes", "replay", "replay_prefix", "store_path"]

STORE_FILE = "serve.sqlite"
"""The store's file name inside a data directory (``agentic-ray serve``'s default)."""


@dataclass
class ServedEpisode:
    """One finished agent-mode episode with its feedback, replayed.

    Attributes:
        session_id: the episode's trace id.
        family, seed: its task.
        arm, model_version: who decided it (``mixed`` when several deciders took its steps).
        actions: the env actions taken, in order.
        deciders: who decided each step.
        feedback: the feedback about the episode or one of its steps.
        record: the finished episode as the env recorded it.
        obs: the observation before each step (``len(actions)``).
    """

    session_id: str
    family: str
    seed: int
    arm: str
    model_version: str
    actions: list[Any]
    deciders: list[str]
    feedback: list[FeedbackRecord] = field(default_factory=list)
    record: EpisodeRecord | None = None
    obs: list[dict[str, np.ndarray]] = field(default_factory=list)

    @property
    def feedback_ids(self) -> list[int]:
        return [f.feedback_id for f in self.feedback]


def store_path(serve_data: str | Path) -> Path:
    """The store file: ``serve_data`` itself, or ``serve.sqlite`` inside a data directory."""
    p = Path(serve_data)
    return p / STORE_FILE if p.is_dir() else p


def _episode_of(f: FeedbackRecord) -> str | None:
    if f.kind == "episode":
        return f.trace_id
    if f.kind == "step":
        sid = f.request.get("session_id")
        return str(sid) if sid else None
    return None


def reset_served(env: AgentTaskEnv, family: str, seed: int) -> dict[str, np.ndarray]:
    """Reset ``env`` on a served task with the session's own seeding (:class:`~agentic_ray.serving.sessions.
    AgentSession`)."""
    obs, _ = env.reset(
        seed=zlib.crc32(f"{family}:{seed}".encode()), options={"family": family, "task_seed": seed}
    )
    return obs


def replay(env: AgentTaskEnv, ep: ServedEpisode) -> ServedEpisode:
    """Fill ``ep.obs`` and ``ep.record`` by replaying its actions on ``env`` (in place; returns ``ep``).

    Raises:
        ValueError: the actions end before the episode does (an unfinished session).
    """
    obs = reset_served(env, ep.family, ep.seed)
    ep.obs = []
    for a in ep.actions:
        ep.obs.append(obs)
        obs, _r, term, trunc, info = env.step(a)
        if term or trunc:
            ep.record = EpisodeRecord.from_dict(info[EPISODE_RECORD])
            break
    if ep.record is None:
        raise ValueError(f"episode {ep.session_id}: its {len(ep.actions)} stored steps do not finish it")
    ep.obs = ep.obs[: ep.record.num_steps]
    return ep


def replay_prefix(env: AgentTaskEnv, ep: ServedEpisode, t: int) -> dict[str, np.ndarray]:
    """Put ``env`` in the world state before step ``t`` of ``ep`` (its first ``t`` actions replayed); returns that
    observation."""
    obs = reset_served(env, ep.family, ep.seed)
    for a in ep.actions[:t]:
        obs, *_ = env.step(a)
    return obs


def expert_action(env: AgentTaskEnv) -> Any:
    """The rule-based policy's action in ``env``'s state (the domain's scripted expert, as the Serve app's
    fallback)."""
    return env.encode_action(*env.domain.expert().plan(env.view()))


def finish_with(
    env: AgentTaskEnv, first: Any, policy: Callable[[AgentTaskEnv], Any] = expert_action
) -> EpisodeRecord:
    """Step ``first``, then ``policy`` until the episode ends; returns its record."""
    a = first
    while True:
        _obs, _r, term, trunc, info = env.step(a)
        if term or trunc:
            return EpisodeRecord.from_dict(info[EPISODE_RECORD])
        a = policy(env)


def read_served_episodes(
    serve_data: str | Path,
    env_config: AgentTaskEnvConfig,
    *,
    unconsumed: bool = True,
) -> list[ServedEpisode]:
    """The finished episodes of a Serve app's store that someone gave feedback on, replayed, oldest feedback
    first.

    Args:
        serve_data: the store file or its data directory.
        env_config: the env config the app served (:func:`~agentic_ray.serving.service.served_env_config`).
        unconsumed: only feedback no refiner consumed yet.
    """
    path = store_path(serve_data)
    if not path.exists():
        raise FileNotFoundError(f"no Serve store at {path}")
    by_episode: dict[str, list[FeedbackRecord]] = defaultdict(list)
    for f in read_feedback(path, unconsumed=unconsumed):
        sid = _episode_of(f)
        if sid is not None:
            by_episode[sid].append(f)
    store = DecisionStore(path, compact_every_s=None)
    try:
        episodes = []
        for sid in by_episode:
            s = store.session(sid)
            steps = store.session_steps(sid)
            if s is None or not steps:
                continue  # its session expired (retention) or never took a step
            episodes.append(
                ServedEpisode(
                    sid,
                    s.family,
                    s.seed,
                    s.arm,
                    "",
                    [action_from_json(a) for a, _d in steps],
                    [d for _a, d in steps],
                    by_episode.get(sid, []),
                )
            )
    finally:
        store.close()
    env = AgentTaskEnv(env_config)
    try:
        out = []
        for ep in episodes:
            fb = ep.feedback
            ep.model_version = fb[0].model_version if fb else ""
            if len(set(ep.deciders)) == 1:
                ep.arm = ep.deciders[0]
            elif ep.deciders:
                ep.arm = "mixed"
            try:
                out.append(replay(env, ep))
            except ValueError:
                continue  # an unfinished session: nothing to score yet
        return out
    finally:
        env.close()
