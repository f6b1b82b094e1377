"""The domain side of a stateless decision (``POST /v1/act``): request -> observation, action -> call.

:meth:`DecisionBuilder.prepare` rebuilds the env's observation, masks and episode view from the request and
its transcript with :class:`~agentic_ray.envs.transcript.TranscriptState` (the env's own builder, masks and
codec), so any replica answers the same and a request can be replayed. The model's action is decoded against
the same state (:meth:`TranscriptState.decode`) and its arguments checked by the contract (``validate_params``,
the gateway's own check). The rule-based fallback policy is the domain's scripted expert on the same
:class:`~agentic_ray.domains.protocol.EpisodeView`.

A ``TranscriptState`` borrows an env's builder and masks, so each prepared request holds one env from an
:class:`EnvPool` until it is decoded (the policy call in between lets other requests run).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.masks import Masks
from agentic_ray.envs.transcript import TranscriptState
from agentic_ray.serving.request_check import ClientError, check_act_request
from agentic_ray.serving.schemas import ActRequest
from agentic_ray.skills.param_validation import InvalidParams, validate_params

__all__ = ["DecisionBuilder", "EnvPool", "Prepared"]

log = logging.getLogger("ray.serve")


class EnvPool:
    """Envs of one config, reused across requests (building one costs tens of milliseconds)."""

    def __init__(self, config: AgentTaskEnvConfig, size: int = 1) -> None:
        self.config = config
        self._free = [AgentTaskEnv(config) for _ in range(size)]
        self.template = self._free[0]

    def acquire(self) -> AgentTaskEnv:
        return self._free.pop() if self._free else AgentTaskEnv(self.config)

    def release(self, env: AgentTaskEnv) -> None:
        self._free.append(env)

    @contextmanager
    def lease(self) -> Iterator[AgentTaskEnv]:
        env = self.acquire()
        try:
            yield env
        finally:
            self.release(env)


@dataclass
class Prepared:
    """A request replayed into the env's state."""

    env: AgentTaskEnv
    state: TranscriptState
    obs: dict[str, np.ndarray]
    masks: Masks
    view: EpisodeView


class DecisionBuilder:
    """See the module docstring.

    Args:
        pool: envs of the served domain and env config.
        top_k: alternatives listed per decision.
    """

    def __init__(self, pool: EnvPool, top_k: int = 3) -> None:
        self.pool = pool
        self.top_k = top_k
        env = pool.template
        self.skills = env.skills
        self.contracts = env.by_name
        self.expert = env.domain.expert()

    def prepare(self, body: ActRequest, env: AgentTaskEnv) -> Prepared:
        """Check the request and replay it on ``env``.

        Raises:
            ClientError: the request is wrong for this domain (422, with the fields named).
        """
        req = check_act_request(body, env)
        try:
            state = TranscriptState(env, req.task, [], budget=req.budget)
            budget = state.state.budget
            if len(req.transcript) >= budget:
                raise ClientError(
                    [
                        (
                            ("body", "transcript"),
                            f"{len(req.transcript)} calls: the step budget ({budget}) is spent, the episode has "
                            "ended",
                        )
                    ]
                )
            for i, call in enumerate(req.transcript):
                try:
                    state.add(call)
                except (KeyError, TypeError, ValueError, IndexError) as e:
                    raise ClientError([(("body", "transcript", i), f"cannot be replayed: {e}")]) from e
            obs, masks = state.observation(req.sla)
        except ClientError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as e:
            # Values the schema admits but the domain's encoders cannot represent (e.g. a payload field of the
            # wrong kind): a client mistake, logged so that a server bug hiding here is visible.
            log.warning("act request could not be replayed: %r", e, exc_info=True)
            raise ClientError([(("body",), f"the request cannot be replayed in this domain: {e}")]) from e
        return Prepared(env, state, obs, masks, state.view(masks))

    # ------------------------------------------------------------------ decisions
    def rules_call(self, view: EpisodeView) -> tuple[str, dict[str, Any]] | None:
        """The rule-based policy's call (the domain's scripted expert), or None when it cannot plan this task."""
        try:
            return self.expert.plan(view)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            log.warning("rule-based policy cannot plan: %r", e)
            return None

    def learned(self, p: Prepared, action: Any, skill_probs: np.ndarray) -> dict[str, Any]:
        """The response fields of a policy decision (``action``: the module's structured action)."""
        k, params, err, msg = p.state.decode(action)
        skill = self.skills[k] if k >= 0 else "<invalid>"
        problems = [f"{err}: {msg}"] if err else []
        args, warnings = self._checked(skill, params, problems, p.masks)
        order = np.argsort(-skill_probs)[: self.top_k]
        return {
            "skill": skill,
            "arguments": args,
            "confidence": float(skill_probs[k]) if k >= 0 else 0.0,
            "valid": not problems,
            "problems": problems,
            "warnings": warnings,
            "alternatives": [
                {"skill": self.skills[j], "probability": float(skill_probs[j])}
                for j in order
                if skill_probs[j] > 0
            ],
            **self._common(p),
        }

    def rules(self, p: Prepared) -> dict[str, Any]:
        """The response fields of the rule-based policy's decision.

        Raises:
            ClientError: the rule-based policy cannot plan this task.
        """
        call = self.rules_call(p.view)
        if call is None:
            raise ClientError([(("body", "task"), "the rule-based policy cannot plan this task")])
        skill, params = call
        problems: list[str] = []
        args, warnings = self._checked(skill, params, problems, p.masks)
        return {
            "skill": skill,
            "arguments": args,
            "confidence": 1.0,
            "valid": not problems,
            "problems": problems,
            "warnings": warnings,
            "alternatives": [],
            **self._common(p),
        }

    def _checked(
        self, skill: str, params: dict[str, Any], problems: list[str], masks: Masks
    ) -> tuple[dict[str, Any], list[str]]:
        contract = self.contracts.get(skill)
        if contract is None:
            return params, []
        k = self.skills.index(skill)
        if not masks.skill_mask[k]:
            problems.append("masked: " + "; ".join(masks.reasons.get(skill, [])))
        try:
            return validate_params(contract, params)
        except InvalidParams as e:
            problems.append(f"INVALID_INPUT: {e}")
            return params, []

    def _common(self, p: Prepared) -> dict[str, Any]:
        fb = self.rules_call(p.view)
        return {
            "fallback_action": {"skill": fb[0], "arguments": fb[1]} if fb else None,
            "mask_reasons": {k: list(v) for k, v in p.masks.reasons.items()},
            "step": p.state.state.step,
            "budget": p.state.state.budget,
        }
