"""Agent mode: server-side episodes whose every call goes through the ToolExecutor.

A session is an :class:`~agentic_ray.envs.agent_task_env.AgentTaskEnv` episode on a task the server draws
(``domain.make_task(family, seed)``, as the env's reset does), with the served env config: its
:class:`~agentic_ray.skills.executor.ToolExecutor` (the domain's contracts and ``fallback_rules()``) in front of
the configured backend, in-process (``PythonBackend``) or a skill server (``HttpBackend``). A request can only
ask for the next step; what is called is the policy's (or the rule-based fallback's) decision, decoded by the
env and checked by the executor's whitelist, parameter checks and preconditions, exactly as in training.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.serving.decisions import EnvPool
from agentic_ray.serving.request_check import ClientError

__all__ = ["AgentSession", "SessionManager", "StepResult"]


@dataclass(frozen=True)
class StepResult:
    """One executed step."""

    t: int
    skill: str
    arguments: dict[str, Any]
    result_code: str
    fallback_used: str | None
    payload: dict[str, Any]
    reward: float
    done: bool
    completed: bool | None
    dag_valid: bool | None
    executor_trace_id: str

    @property
    def ok(self) -> bool:
        return self.result_code == "OK"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AgentSession:
    """One episode on a leased env.

    Args:
        session_id: also the episode's trace_id (feedback on the whole episode names it).
        env: the leased env.
        family, seed: the task.
        arm: the policy version the canary router assigned.
    """

    session_id: str
    env: AgentTaskEnv
    family: str
    seed: int
    arm: str
    obs: dict[str, np.ndarray] = field(init=False)
    t: int = 0
    done: bool = False
    deciders: set[str] = field(default_factory=set)
    last_used: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        # The evaluator's seeding (eval.evaluator.rollout), so a session replays the validation episode.
        self.obs, _ = self.env.reset(
            seed=zlib.crc32(f"{self.family}:{self.seed}".encode()),
            options={"family": self.family, "task_seed": self.seed},
        )

    @property
    def budget(self) -> int:
        assert self.env.state is not None
        return self.env.state.budget

    def rules_action(self) -> Any:
        """The rule-based policy's action: the domain's scripted expert on the env's episode view."""
        return self.env.encode_action(*self.env.domain.expert().plan(self.env.view()))

    def step(self, action: Any, decider: str) -> StepResult:
        """Execute ``action`` (decoded by the env, run through its ToolExecutor)."""
        env = self.env
        obs, reward, term, trunc, info = env.step(action)
        self.obs = obs
        self.deciders.add(decider)
        tr = info[STEP_TRACE]
        ok_fresh = tr["result_code"] == "OK" and not tr["fallback_used"]
        payload = dict(env.state.history[-1].payload) if ok_fresh and env.state and env.state.history else {}
        rec = EpisodeRecord.from_dict(info[EPISODE_RECORD]) if (term or trunc) else None
        res = StepResult(
            t=self.t,
            skill=tr["skill"],
            arguments=dict(tr["args"]),
            result_code=tr["result_code"],
            fallback_used=tr["fallback_used"],
            payload=payload,
            reward=float(reward),
            done=bool(term or trunc),
            completed=rec.completed if rec else None,
            dag_valid=rec.dag_valid if rec else None,
            executor_trace_id=str(tr["trace_id"]),
        )
        self.t += 1
        self.done = res.done
        self.last_used = time.monotonic()
        return res


class SessionManager:
    """Open sessions, each holding an env from the pool until it ends, is closed or idles past the TTL.

    Args:
        pool: envs of the served config.
        max_sessions: open sessions at most (429 beyond).
        ttl_s: idle time after which a session is closed.
    """

    def __init__(self, pool: EnvPool, max_sessions: int, ttl_s: float) -> None:
        self.pool = pool
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.open: dict[str, AgentSession] = {}
        self.finished: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._next = 0
        self._seed_index: dict[str, int] = {}
        t = pool.template
        self.families = tuple(t.families)
        self._seeds = {f: t.domain.validation_seeds(f, t.config.validation_per_family) for f in self.families}

    def create(self, session_id: str, family: str | None, seed: int | None, arm: str) -> AgentSession:
        """Start a session on ``(family, seed)``; defaults: families round-robin, the family's next
        validation seed.

        Raises:
            ClientError: unknown family (422) or too many open sessions (429).
        """
        self.expire()
        if family is not None and family not in self.families:
            raise ClientError([(("body", "family"), f"not one of {list(self.families)}")])
        if len(self.open) >= self.max_sessions:
            raise ClientError([(("body",), f"{self.max_sessions} sessions are open; close one")], status=429)
        if family is None:
            family = self.families[self._next % len(self.families)]
            self._next += 1
        if seed is None:
            i = self._seed_index.get(family, 0)
            self._seed_index[family] = i + 1
            seed = self._seeds[family][i % len(self._seeds[family])]
        env = self.pool.acquire()
        try:
            s = AgentSession(session_id, env, family, seed, arm)
        except Exception:
            self.pool.release(env)
            raise
        self.open[session_id] = s
        return s

    def get(self, session_id: str) -> AgentSession:
        s = self.open.get(session_id)
        if s is None:
            if session_id in self.finished:
                raise ClientError([(("path", "session_id"), "the episode has ended")], status=409)
            raise ClientError([(("path", "session_id"), "no such session")], status=404)
        return s

    def close(self, session_id: str, summary: dict[str, Any] | None = None) -> None:
        """End a session and return its env to the pool."""
        s = self.open.pop(session_id, None)
        if s is None:
            return
        self.pool.release(s.env)
        self.finished[session_id] = summary or {"t": s.t, "done": s.done}
        while len(self.finished) > 10_000:
            self.finished.popitem(last=False)

    def expire(self) -> None:
        now = time.monotonic()
        for sid in [
            k for k, s in self.open.items() if now - s.last_used > self.ttl_s and not s.lock.locked()
        ]:
            self.close(sid, {"expired": True})
