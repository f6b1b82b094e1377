"""Agent mode: server-side episodes whose every call goes through the ToolExecutor.

A session is an :class:`~agentic_ray.envs.agent_task_env.AgentTaskEnv` episode on a task the server draws
(``domain.make_task(family, seed)``, as the env's reset does), with the served env config: its
:class:`~agentic_ray.skills.executor.ToolExecutor` (the domain's contracts and ``fallback_rules()``) in front of
the configured backend, in-process (``PythonBackend``) or a skill server (``HttpBackend``). A request can only
ask for the next step; what is called is the policy's (or the rule-based fallback's) decision, decoded by the
env and checked by the executor's whitelist, parameter checks and preconditions, exactly as in training.

Each client (bearer token) holds at most ``sessions_per_client`` open sessions, and the service at most
``max_sessions``: a 429 beyond either, with ``Retry-After`` set to when the client's (or the service's) least
recently used session idles out.

With ``agent.memory`` set, the sessions share one long-term memory store: each session's world reads and writes it
(the domain's ``attach_memory``), in the customer's namespace, as conversation ``<session id>``, on a clock of hours
since the Unix epoch; so what a customer's session wrote (``memory.write``) is found by their next session's
``memory.search``, with its real age, and survives a gateway restart in the store's folder.

Sessions survive a gateway restart: the store keeps each session's task and the action of every step, written
before the step is answered. A replica that does not hold a session it is asked for resumes it from the store by
replaying those actions on a fresh env from the same task seed (the env is deterministic given its seed and the
actions, so the resumed session continues exactly where the old replica left it; the tools are the simulated
domain's, so replaying them repeats no real side effect).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.protocol import Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.serving.decision_store import DecisionStore, StoredSession
from agentic_ray.serving.decisions import EnvPool
from agentic_ray.serving.quotas import retry_after
from agentic_ray.serving.request_check import ClientError

__all__ = ["AgentSession", "SessionManager", "StepResult", "action_from_json", "action_to_json"]


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
        client: who holds it (its quota).
        given: the task the agent is given in the drawn task's world (the goal parser's reading of the
            customer's words), None for the drawn task itself.
    """

    session_id: str
    env: AgentTaskEnv
    family: str
    seed: int
    arm: str
    client: str = "default"
    given: Callable[[Task], Task] | None = None
    parsed: dict[str, Any] | None = None
    """The goal parser's reading (the responses' ``parsed``), for a session started from text."""
    obs: dict[str, np.ndarray] = field(init=False)
    t: int = 0
    done: bool = False
    deciders: set[str] = field(default_factory=set)
    last_used: float = field(default_factory=time.time)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        # The evaluator's seeding (eval.evaluator.rollout), so a session replays the validation episode.
        self.obs, _ = self.env.reset(
            seed=zlib.crc32(f"{self.family}:{self.seed}".encode()),
            options={"family": self.family, "task_seed": self.seed, "task_given": self.given},
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
        self.last_used = time.time()
        return res


class SessionManager:
    """Open sessions, each holding an env from the pool until it ends, is closed or idles past the TTL.

    Args:
        pool: envs of the served config.
        max_sessions: open sessions at most, over every client (429 beyond).
        ttl_s: idle time after which a session is closed.
        per_client: open sessions at most per client (429 beyond).
        store: where sessions are kept across restarts (None: in memory only).
        memory: the customers' long-term memory every session shares (None: each world keeps its own).

    Raises:
        ValueError: ``memory`` is set but the served domain has no memory hooks.
    """

    def __init__(
        self,
        pool: EnvPool,
        max_sessions: int,
        ttl_s: float,
        per_client: int | None = None,
        store: DecisionStore | None = None,
        memory: MemoryConfig | None = None,
    ) -> None:
        self.pool = pool
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.per_client = per_client or max_sessions
        self.store = store
        self.open: dict[str, AgentSession] = {}
        self.dormant: dict[str, StoredSession] = (
            {s.session_id: s for s in store.open_sessions()} if store is not None else {}
        )
        """Sessions open in the store that this replica has not resumed yet (a previous replica's)."""
        self.finished: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.resumed = 0
        self._next = 0
        self._seed_index: dict[str, int] = {}
        t = pool.template
        self.memory: Any = None
        """The shared long-term store (None: each session's world keeps its own)."""
        self._attach: Callable[[Any, Any, str, float], None] | None = None
        if memory is not None:
            open_memory, attach = (
                getattr(t.domain, "open_memory", None),
                getattr(t.domain, "attach_memory", None),
            )
            if open_memory is None or attach is None:
                raise ValueError(f"agent.memory is set, but domain {t.domain.name!r} keeps no memory")
            self.memory, self._attach = open_memory(memory), attach
        self.families = tuple(t.families)
        self._seeds = {f: t.domain.validation_seeds(f, t.config.validation_per_family) for f in self.families}
        self.expire()

    def check_family(self, family: str | None) -> None:
        """Raises :class:`ClientError` (422) unless ``family`` is None or one of the served families."""
        if family is not None and family not in self.families:
            raise ClientError([(("body", "family"), f"not one of {list(self.families)}")])

    def create(
        self,
        session_id: str,
        family: str | None,
        seed: int | None,
        arm: str,
        client: str = "default",
        given: Callable[[Task], Task] | None = None,
    ) -> AgentSession:
        """Start a session on ``(family, seed)``; defaults: families round-robin, the family's next
        validation seed. ``given``: see :class:`AgentSession`; such a session is not stored for a restarted
        gateway to resume (the store keeps the drawn task only).

        Raises:
            ClientError: unknown family (422), or too many open sessions for the client or the service (429,
                with ``Retry-After``).
        """
        self.expire()
        self.check_family(family)
        mine = [t for c, t in self._idle_since() if c == client]
        if len(mine) >= self.per_client:
            raise self._full(f"this client holds {len(mine)} open sessions, its quota; close one", min(mine))
        if len(self.open) + len(self.dormant) >= self.max_sessions:
            oldest = min(t for _c, t in self._idle_since())
            raise self._full(f"{self.max_sessions} sessions are open, the service's limit", oldest)
        if family is None:
            family = self.families[self._next % len(self.families)]
            self._next += 1
        if seed is None:
            i = self._seed_index.get(family, 0)
            self._seed_index[family] = i + 1
            seed = self._seeds[family][i % len(self._seeds[family])]
        s = self._start(session_id, family, seed, arm, client, given)
        if self.store is not None and given is None:
            self.store.open_session(session_id, client, family, seed, arm)
        return s

    def _start(
        self,
        session_id: str,
        family: str,
        seed: int,
        arm: str,
        client: str,
        given: Callable[[Task], Task] | None = None,
    ) -> AgentSession:
        env = self.pool.acquire()
        try:
            s = AgentSession(session_id, env, family, seed, arm, client, given)
            if self._attach is not None:  # before the first step: the customer's memory the sessions share
                self._attach(env.world, self.memory, session_id, time.time() / 3600.0)
        except Exception:
            self.pool.release(env)
            raise
        self.open[session_id] = s
        return s

    def _idle_since(self) -> list[tuple[str, float]]:
        """``(client, last used)`` of every open session, resumed or not."""
        return [(s.client, s.last_used) for s in self.open.values()] + [
            (d.client, d.updated) for d in self.dormant.values()
        ]

    def _full(self, msg: str, oldest_used: float) -> ClientError:
        wait = oldest_used + self.ttl_s - time.time()
        return ClientError([(("body",), msg)], status=429, headers={"Retry-After": retry_after(wait)})

    def get(self, session_id: str, client: str | None = None) -> AgentSession:
        """An open session of ``client`` (None: of anyone), resumed from the store if a previous replica held it.

        Raises:
            ClientError: ended (409) or unknown, or another client's (404).
        """
        self.check(session_id, client)
        s = self.open.get(session_id)
        return s if s is not None else self._resume(self.dormant.pop(session_id))

    def check(self, session_id: str, client: str | None = None) -> None:
        """That ``session_id`` is an open session of ``client`` (None: of anyone), here or in the store.

        Raises:
            ClientError: ended (409) or unknown, or another client's (404).
        """
        s, d = self.open.get(session_id), self.dormant.get(session_id)
        st = self.store.session(session_id) if s is None and d is None and self.store is not None else None
        owner = (
            s.client
            if s is not None
            else d.client
            if d is not None
            else st.client
            if st is not None
            else None
        )
        if owner is None or (client is not None and owner != client):
            raise ClientError([(("path", "session_id"), "no such session")], status=404)
        if s is None and d is None:
            raise ClientError([(("path", "session_id"), "the episode has ended")], status=409)

    def _resume(self, d: StoredSession) -> AgentSession:
        """Replay a stored session's actions on a fresh env of its task."""
        assert self.store is not None
        s = self._start(d.session_id, d.family, d.seed, d.arm, d.client)
        for action, decider in self.store.session_steps(d.session_id):
            s.step(action_from_json(action), decider)
        s.last_used = time.time()
        self.resumed += 1
        return s

    def close_memory(self) -> None:
        """Release the shared memory store (an embedded one's folder lock)."""
        if self.memory is not None:
            self.memory.close()
            self.memory = None

    def step(self, s: AgentSession, action: Any, decider: str) -> StepResult:
        """Execute a step of ``s`` and store its action before it is answered."""
        res = s.step(action, decider)
        if self.store is not None and s.given is None:
            self.store.add_session_step(s.session_id, res.t, action_to_json(action), decider)
        return res

    def close(self, session_id: str, summary: dict[str, Any] | None = None) -> None:
        """End a session and return its env to the pool."""
        s = self.open.pop(session_id, None)
        d = self.dormant.pop(session_id, None)
        if s is None and d is None:
            return
        if s is not None:
            self.pool.release(s.env)
        if self.store is not None:
            self.store.close_session(session_id)
        self.finished[session_id] = summary or ({"t": s.t, "done": s.done} if s else {"expired": True})
        while len(self.finished) > 10_000:
            self.finished.popitem(last=False)

    def expire(self) -> None:
        now = time.time()
        idle = [k for k, s in self.open.items() if now - s.last_used > self.ttl_s and not s.lock.locked()]
        idle += [k for k, d in self.dormant.items() if now - d.updated > self.ttl_s]
        for sid in idle:
            self.close(sid, {"expired": True})


def action_to_json(action: Any) -> Any:
    """A structured action (a dict of ints and numpy arrays) as JSON."""
    if isinstance(action, dict):
        return {k: action_to_json(v) for k, v in action.items()}
    if isinstance(action, np.ndarray):
        return {"dtype": str(action.dtype), "value": action.tolist()}
    if isinstance(action, np.generic):
        return action.item()
    return action


def action_from_json(value: Any) -> Any:
    """The inverse of :func:`action_to_json` (arrays get their dtype back, so the env decodes the same action)."""
    if isinstance(value, dict) and set(value) == {"dtype", "value"}:
        return np.asarray(value["value"], dtype=value["dtype"])
    if isinstance(value, dict):
        return {k: action_from_json(v) for k, v in value.items()}
    return value
