"""Rebuild a policy observation from a request and a transcript of tool calls: what a stateless server does.

``POST /v1/act`` carries the domain, the request (its goals, facts and named entities) and the transcript so far
(each call's skill, parameters, result code, payload and fallback). :class:`TranscriptState` replays the
transcript through the env's own code, so any replica rebuilds the same observation and a request can be
replayed:

* knowledge grows by :func:`~agentic_ray.domains.knowledge.reveal_result` on every successful, non-degraded call,
  and the task's short-term window moves as in the env (:func:`~agentic_ray.envs.episode.slide_window`);
* goal bookkeeping by :func:`~agentic_ray.envs.episode.match_goals`; masks by the same
  :class:`~agentic_ray.envs.masks.MaskComputer` (preconditions through the shared tracker);
* the observation by the same :class:`~agentic_ray.envs.observation.ObservationBuilder`.

What a server cannot know is stated: the world itself (so ``stale_information`` is never attributed, and the
``reflection`` label marks a failed step with the cause the transcript supports) and the live tool health (callers
pass the SLA arrays they have, or none: neutral zeros). The ``failure_evidence`` input of the reflection module
needs none of it: :func:`~agentic_ray.envs.failure_evidence.failure_evidence` reads the call, its result code and
the knowledge, which the transcript carries, so a served policy gets the same diagnosis input as in training.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.knowledge import Knowledge, reveal_result
from agentic_ray.domains.protocol import EpisodeView, LastStep, Task
from agentic_ray.envs.action_codec import ActionCodec
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.envs.episode import EpisodeState, attribute_root_cause, match_goals, slide_window
from agentic_ray.envs.failure_evidence import failure_evidence
from agentic_ray.envs.masks import Masks
from agentic_ray.skills.executor import CALLER_ERRORS
from agentic_ray.skills.preconditions import Call

__all__ = ["TranscriptCall", "TranscriptState", "neutral_sla"]


@dataclass(frozen=True)
class TranscriptCall:
    """One executed call as a client reports it."""

    skill: str
    params: dict[str, Any]
    result_code: str = "OK"
    payload: dict[str, Any] = field(default_factory=dict)
    fallback_used: str | None = None

    @property
    def ok(self) -> bool:
        return self.result_code == "OK"


def neutral_sla(skills: Iterable[str]) -> dict[str, np.ndarray]:
    """SLA arrays of healthy tools with no history (what a server without live statistics assumes)."""
    k = len(tuple(skills))
    z = np.zeros(k)
    return {
        "p50": z.copy(),
        "p95": z.copy(),
        "error_rate": z.copy(),
        "attempt_error_rate": z.copy(),
        "calls": z.copy(),
        "open": np.zeros(k, dtype=bool),
        "half_open": np.zeros(k, dtype=bool),
    }


class TranscriptState:
    """Env bookkeeping rebuilt from ``(task, transcript)`` with the env's own components.

    Args:
        env: an :class:`AgentTaskEnv` of the domain, used only for its components (contracts, builder, masks,
            codec); its own episode is not touched.
        task: the request as a task (goals with their constraints, the request's facts and named entities).
        transcript: the calls so far, in order.
        budget: the step budget (default: the env's rule on ``task.optimal_steps``).
    """

    def __init__(
        self,
        env: AgentTaskEnv,
        task: Task,
        transcript: Iterable[TranscriptCall | Mapping[str, Any]] = (),
        budget: int | None = None,
    ) -> None:
        self.env, self.task = env, task
        cfg = env.config
        b = budget or max(
            task.optimal_steps + cfg.budget_extra, math.ceil(cfg.budget_factor * max(task.optimal_steps, 1))
        )
        self.state = EpisodeState.new(b, len(task.goals), len(env.skills))
        self.knowledge = Knowledge(env.domain.schema.type_names)
        for ref in task.request.mentioned:
            self.knowledge.mention(ref.type, ref.id)
        env.builder.begin_episode(task)
        env.masks.reset(task)
        self.calls: list[TranscriptCall] = []
        for c in transcript:
            self.add(c if isinstance(c, TranscriptCall) else TranscriptCall(**dict(c)))

    def add(self, call: TranscriptCall) -> None:
        """Apply one more executed call."""
        env, st, task = self.env, self.state, self.task
        self.calls.append(call)
        st.step += 1
        k = env.skills.index(call.skill) if call.skill in env.skills else -1
        contract = env.by_name.get(call.skill)
        degraded = call.fallback_used is not None
        violation = False
        if call.ok and contract is not None and not degraded:
            c = Call(call.skill, dict(call.params), dict(call.payload))
            st.history.append(c)
            env.masks.add(c)
            reveal_result(self.knowledge, contract, call.params, call.payload)
            env.builder.refresh(self.knowledge)
            _sat, violation = match_goals(
                task,
                st,
                env.builder.goal_ready(st.goal_done),
                call.skill,
                call.params,
                env.list_semantics,
                call.payload,
            )
        if k >= 0:
            st.calls[k] += 1
        st.last_ok, st.last_failed = call.ok, not call.ok
        st.consecutive_failures = 0 if call.ok else st.consecutive_failures + 1
        entities: list[str] = []
        for n, _p in env._entity_params.get(call.skill, []):
            v = call.params.get(n)
            entities += [str(x) for x in (v if isinstance(v, list) else [v]) if x is not None]
        relevant = set(task.relevant) | {m.id for m in task.request.mentioned}
        cause = attribute_root_cause(
            code=call.result_code,
            ok=call.ok,
            masked=False,
            soft_masked=False,
            violation=violation,
            high_risk=False,
            entities=entities,
            relevant=relevant if relevant else set(entities),
            stale=False,
        )
        if not call.ok and call.result_code not in CALLER_ERRORS and cause is None:
            cause = "tool_error"
        st.set_cause(cause)
        st.evidence = failure_evidence(
            len(env.skills), k, contract, call.params, call.result_code, self.knowledge
        )
        st.last = LastStep(call.skill, dict(call.params), call.result_code, cause)
        slide_window(task, st.step, self.knowledge)

    def masks(self, sla: dict[str, np.ndarray] | None = None, now: float = 0.0) -> Masks:
        """The masks of the current state (``sla``: live SLA arrays, default :func:`neutral_sla`)."""
        env = self.env
        env.builder.refresh(self.knowledge)
        sla = sla or neutral_sla(env.skills)
        return env.masks.compute(self.knowledge, env.builder.node_ids, sla, now, self.state.last_call_time)

    def observation(
        self, sla: dict[str, np.ndarray] | None = None, now: float = 0.0
    ) -> tuple[dict[str, np.ndarray], Masks]:
        """``(observation, masks)`` exactly as the env builds them for this state."""
        env = self.env
        sla = sla or neutral_sla(env.skills)
        m = self.masks(sla, now)
        extra = m.as_obs()
        if env.prototypes:
            pm = m.skill_mask[env._proto_skill].copy()
            if not pm.any():
                pm[0] = 1
            extra["proto_mask"] = pm
        return env.builder.build(self.task, self.knowledge, self.state, sla, extra), m

    def view(self, masks: Masks | None = None) -> EpisodeView:
        """The episode view (what the domain's expert, the rule-based fallback policy, reads)."""
        m = masks or self.masks()
        st = self.state
        return EpisodeView(
            task=self.task,
            knowledge=self.knowledge,
            skills=self.env.skills,
            contracts=self.env.by_name,
            goal_done=st.goal_done,
            ready=self.env.builder.goal_ready(st.goal_done),
            history=st.history,
            last=st.last,
            skill_mask=m.skill_mask,
            step=st.step,
            budget=st.budget,
        )

    @property
    def codec(self) -> ActionCodec:
        return self.env.codec

    def decode(self, action: Any) -> tuple[int, dict[str, Any], str | None, str]:
        """A structured action -> ``(skill index, params, error, message)`` against this state's knowledge."""
        return self.env.codec.decode(action, self.task, self.knowledge)

    def encode(self, skill: str, params: dict[str, Any]) -> dict[str, Any]:
        """``(skill, params)`` -> a structured action against this state's knowledge."""
        return self.env.codec.encode(skill, params, self.knowledge)
