"""The policy service: what the gateway deployment does, as a plain class.

It owns the domain side (observations rebuilt from requests, agent-mode sessions), the canary router, the
decision/feedback store and the live metrics. The models are reached through an injected ``call_policy(arm,
obs)`` coroutine: in Serve it calls the arm's batched policy deployment through its handle; in unit tests it
calls a :class:`~agentic_ray.serving.policy_runner.PolicyRunner` directly.

Failures never reach the user as long as someone can decide: a failed candidate call is answered by stable
(and counted against the candidate by the router); a failed stable call by the rule-based policy, and the answer
says so (``degraded``, ``degraded_reason``). A policy call that has not answered within ``sla.policy_timeout_ms``
counts as failed, so a slow or restarting policy costs a request at most that long; each arm has a breaker
(:class:`~agentic_ray.skills.circuit_breaker.CircuitBreaker`, the gateway's own) that skips it while most of its
recent calls fail, and probes it again after ``sla.breaker_reset_s``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.eval.evaluator import validation_env_config
from agentic_ray.serving.canary import ArmCounts, CanaryRouter
from agentic_ray.serving.decision_store import DecisionStore
from agentic_ray.serving.decisions import DecisionBuilder, EnvPool
from agentic_ray.serving.http_guards import load_clients
from agentic_ray.serving.live_metrics import LatencyWindow, LiveMetrics, MetricsSink
from agentic_ray.serving.quotas import RequestRate
from agentic_ray.serving.request_check import ClientError
from agentic_ray.serving.schemas import ActRequest, FeedbackIn, SessionCreate, TaskIn
from agentic_ray.serving.sessions import AgentSession, SessionManager, StepResult
from agentic_ray.serving.settings import ServeSettings, SLASettings, StrategyMode
from agentic_ray.serving.text_requests import TextParse, TextParser, clarify_response, goals_in, parsed_out
from agentic_ray.skills.circuit_breaker import CircuitBreaker

__all__ = ["PolicyCall", "PolicyService", "served_env_config"]

log = logging.getLogger("ray.serve")

StrategySource = Literal["user_config", "request"]

PolicyCall = Callable[[str, dict[str, np.ndarray]], Awaitable[dict[str, Any]]]
"""``(arm, observation) -> {"action", "skill_probs"}``."""

ARMS = ("stable", "candidate")


def served_env_config(settings: ServeSettings) -> AgentTaskEnvConfig:
    """The training env config as evaluation uses it (validation split, a fixed fault share), with the agent
    mode's backend."""
    cfg = validation_env_config(settings.env_config(), settings.agent.fault_share)
    a = settings.agent
    return cfg.model_copy(update={"backend": a.backend, "http_url": a.http_url})


class PolicyService:
    """See the module docstring.

    Args:
        settings: the service settings.
        call_policy: reaches the policy modules.
        versions: model version per arm.
        sink: Prometheus export (default: none).
        clock: monotonic seconds (the canary router's).
        pool_size: envs built up front.
    """

    def __init__(
        self,
        settings: ServeSettings,
        call_policy: PolicyCall,
        versions: dict[str, str],
        sink: MetricsSink | None = None,
        clock: Callable[[], float] = time.monotonic,
        pool_size: int = 4,
    ) -> None:
        self.settings = settings
        self.call_policy = call_policy
        self.versions = {**versions, "rules": "rules"}
        self.pool = EnvPool(served_env_config(settings), size=pool_size)
        self.domain = self.pool.template.domain.name
        self.builder = DecisionBuilder(self.pool, settings.top_k)
        self.router = CanaryRouter(
            settings.canary, settings.candidate is not None, clock=clock, log=self._log_canary
        )
        st = settings.store
        self.store = DecisionStore(
            settings.feedback_db,
            retention_s=st.retention_h * 3600.0,
            max_bytes=st.max_mb * 1e6,
            compact_every_s=st.compact_every_s,
        )
        a = settings.agent
        self.sessions = SessionManager(
            self.pool,
            a.max_sessions,
            a.session_ttl_s,
            settings.quotas.sessions_per_client,
            self.store,
            a.memory,
        )
        self.metrics = LiveMetrics(sink)
        self.text = TextParser(self.domain)
        self.clients = load_clients(settings.auth)
        self.rate = RequestRate(settings.quotas.requests_per_s, settings.quotas.burst)
        self.policy_latency = {arm: LatencyWindow() for arm in ARMS}
        self.clock = clock
        self.sla = settings.sla
        self.breakers = self._breakers(settings.sla)
        self.rules_counts = ArmCounts()
        self.strategy_mode: StrategyMode = settings.strategy_mode
        self.strategy_source: StrategySource = "user_config"
        self.degraded = 0
        self._counted: OrderedDict[str, None] = OrderedDict()
        self._gauges_at = 0.0

    # ------------------------------------------------------------------ switches
    def set_strategy(self, mode: StrategyMode, source: StrategySource = "user_config") -> dict[str, Any]:
        """Switch the strategy for every request that starts from now on (those already waiting on a policy
        keep its answer): from the gateway's ``reconfigure`` (``user_config``) or ``PUT /v1/strategy``."""
        previous = self.strategy_mode
        if mode != previous:
            log.info(json.dumps({"event": "strategy_mode", "from": previous, "to": mode, "source": source}))
        self.strategy_mode, self.strategy_source = mode, source
        return {"strategy_mode": mode, "previous": previous, "source": source}

    def set_sla(self, sla: SLASettings) -> None:
        """The policy timeout and breakers from now on (the gateway's ``reconfigure``: its ``user_config`` may
        carry an SLA other than the settings'). The breakers start closed when it changes."""
        if sla != self.sla:
            self.sla, self.breakers = sla, self._breakers(sla)

    def _breakers(self, sla: SLASettings) -> dict[str, CircuitBreaker]:
        return {
            arm: CircuitBreaker(
                sla.breaker_error_budget,
                sla.breaker_window,
                sla.breaker_min_calls,
                sla.breaker_reset_s,
                self.clock,
            )
            for arm in ARMS
        }

    # ------------------------------------------------------------------ decisions
    async def act(self, body: ActRequest, trace_id: str) -> dict[str, Any]:
        """``POST /v1/act`` (raises :class:`ClientError` on a client mistake). A request without goals is read by
        the goal parser: its goals, facts and entities come from the text, and an unsure or incomplete parse is
        answered with a clarification (:mod:`agentic_ray.serving.text_requests`)."""
        parse: TextParse | None = None
        if not body.task.goals:
            body, parse = await self._parsed_body(body)
            if parse.parsed.clarify is not None:
                resp = clarify_response(parse, trace_id)
                self.store.add_decision(
                    trace_id, "clarify", "parser", "parser", body.model_dump(mode="json"), resp
                )
                return resp
        with self.pool.lease() as env:
            p = self.builder.prepare(body, env)
            key = body.conversation_id or _task_key(body)  # the conversation: its canary arm and outcomes
            self._report_transcript(body, key)
            why: str | None = None
            if self.strategy_mode == "rules":
                arm, fields = "rules", self.builder.rules(p)
            else:
                arm, out, why = await self._decide(self.router.assign(key), p.obs, trace_id)
                fields = (
                    self.builder.rules(p)
                    if out is None
                    else self.builder.learned(p, out["action"], out["skill_probs"])
                )
        resp = {
            "kind": "decision",
            "trace_id": trace_id,
            "model_version": self.versions[arm],
            "arm": arm,
            "strategy_mode": self.strategy_mode,
            **fields,
            "degraded": why is not None,
            "degraded_reason": why,
            "parsed": parsed_out(parse) if parse is not None else None,
        }
        self.store.add_decision(trace_id, "act", arm, self.versions[arm], body.model_dump(mode="json"), resp)
        return resp

    async def _parsed_body(self, body: ActRequest) -> tuple[ActRequest, TextParse]:
        """The request with the parser's goals, facts (a fact the client sent wins over one read from the text)
        and the entities named, and the parse (the body unchanged when the parse asks for a clarification).

        Raises:
            ClientError: the parse is not a task the schema admits (e.g. an id longer than the schema allows).
        """
        req = body.task.request
        parse = await self.text.parse(req.text, req.history, req.facts)
        p = parse.parsed
        if p.clarify is not None:
            return body, parse
        named = {(m.type, m.id) for m in req.mentioned}
        task = body.task.model_dump(mode="json")
        task["request"]["facts"] = dict(p.facts)
        task["request"]["mentioned"] += [
            {"type": m.type, "id": m.id} for m in p.mentioned if (m.type, m.id) not in named
        ]
        task["goals"] = goals_in(p)
        if "family" not in body.task.model_fields_set:
            task["family"] = p.family
        try:
            return body.model_copy(update={"task": TaskIn.model_validate(task)}), parse
        except ValidationError as e:
            raise ClientError(
                [(("body", "task", "request", "text"), f"the parsed request is not a valid task: {e}")]
            ) from e

    async def _decide(
        self, arm: str, obs: dict[str, np.ndarray], trace_id: str
    ) -> tuple[str, dict[str, Any] | None, str | None]:
        """``(who decided, the policy output, None)``; ``("rules", None, why)`` when no policy answered within the
        SLA (the candidate's requests fall back to stable first)."""
        breaker = self.breakers[arm]
        timeout_ms = self.sla.policy_timeout_ms
        if breaker.allow():
            t0 = time.perf_counter()
            try:
                out = await asyncio.wait_for(self.call_policy(arm, obs), timeout_ms / 1e3)
                breaker.record(False)
                self.policy_latency[arm].add((time.perf_counter() - t0) * 1e3)
                return arm, out, None
            except TimeoutError:
                breaker.record(True)
                why = f"the {arm} policy did not answer within {timeout_ms:g} ms"
            except Exception as e:
                breaker.record(True)
                why = f"the {arm} policy failed: {type(e).__name__}"
            log.warning("%s (trace %s)", why, trace_id)
            if arm == "candidate":
                self.router.record_error("candidate", trace_id)
        else:
            why = f"the {arm} policy is skipped: most of its recent calls failed (breaker open)"
        if arm == "candidate":
            return await self._decide("stable", obs, trace_id)
        self.degraded += 1
        return "rules", None, why

    def _report_transcript(self, body: ActRequest, conversation: str) -> None:
        """Outcomes of calls a client reports back with the trace_id of the decision that proposed them."""
        for c in body.transcript:
            if not c.trace_id or c.trace_id in self._counted:
                continue
            d = self.store.decision(c.trace_id)
            if d is None:
                continue
            self._counted[c.trace_id] = None
            while len(self._counted) > 100_000:
                self._counted.popitem(last=False)
            self._outcome(d[1], c.result_code == "OK", c.trace_id, conversation)

    def _outcome(self, arm: str, ok: bool, trace_id: str, cluster: str) -> None:
        if arm in ARMS:
            self.router.record_call(arm, ok, trace_id, cluster)
        elif arm == "rules":
            self.rules_counts.calls += 1
            self.rules_counts.ok_calls += int(ok)
        self.metrics.sink.outcome(arm, ok)
        if time.monotonic() - self._gauges_at > 1.0:
            self._push_gauges()

    # ------------------------------------------------------------------ agent mode
    async def create_session(
        self, body: SessionCreate, client: str = "default"
    ) -> AgentSession | dict[str, Any]:
        """``POST /v1/sessions`` by ``client``. With ``text``, the goal parser's reading is the task the agent is
        given (in the world of ``family`` and ``seed``, by default the parsed family's next validation seed); an
        unsure or incomplete parse starts no session and is answered with a clarification (returned as its
        response body)."""
        self._check_domain(body.domain)
        self.sessions.check_family(body.family)  # before a clarify answers 200
        sid = uuid.uuid4().hex
        parse: TextParse | None = None
        if body.text is not None:
            parse = await self.text.parse(body.text, body.history)
            if parse.parsed.clarify is not None:
                resp = clarify_response(parse, sid)
                self.store.add_decision(
                    sid, "clarify", "parser", "parser", body.model_dump(mode="json"), resp
                )
                return resp
        family = body.family
        if parse is not None and family is None:
            family = parse.parsed.family
        try:
            s = self.sessions.create(
                sid,
                family,
                body.seed,
                self.router.assign(sid),
                client,
                given=parse.parsed.given_task if parse is not None else None,
            )
        except ValueError as e:
            if parse is None:
                raise
            # ParsedRequest.given_task: the words are about a task other than the world's (family, seed)
            raise ClientError([(("body", "text"), str(e))]) from e
        s.parsed = parsed_out(parse) if parse is not None else None
        assert s.env.task is not None
        self.store.add_decision(
            sid,
            "episode",
            s.arm,
            self.versions[s.arm],
            body.model_dump(mode="json"),
            {"open": True, "parsed": s.parsed},
        )
        return s

    def session_out(self, s: AgentSession) -> dict[str, Any]:
        task = s.env.task
        assert task is not None
        return {
            "session_id": s.session_id,
            "arm": s.arm,
            "family": s.family,
            "seed": s.seed,
            "request": task.request.text,
            "goals": [g.id for g in task.goals],
            "budget": s.budget,
            "parsed": s.parsed,
        }

    async def step_session(self, session_id: str, client: str | None = None) -> dict[str, Any]:
        """``POST /v1/sessions/{id}/step`` by ``client`` (None: the server itself, streaming an episode): one
        decision, executed through the env's ToolExecutor."""
        s = self.sessions.get(session_id, client)
        async with s.lock:
            if s.done:
                raise ClientError([(("path", "session_id"), "the episode has ended")], status=409)
            trace_id = f"{session_id}-{s.t}"
            why: str | None = None
            if self.strategy_mode == "rules":
                decider, action = "rules", s.rules_action()
            else:
                decider, out, why = await self._decide(self.router.serving(s.arm), s.obs, trace_id)  # type: ignore[arg-type]
                action = s.rules_action() if out is None else out["action"]
            res = self.sessions.step(s, action, decider)
        self._outcome(decider, res.ok, trace_id, session_id)
        out_d = {
            "trace_id": trace_id,
            "session_id": session_id,
            "arm": decider,
            **_step_fields(res),
            "degraded": why is not None,
            "degraded_reason": why,
        }
        self.store.add_decision(
            trace_id, "step", decider, self.versions[decider], {"session_id": session_id, "t": res.t}, out_d
        )
        if res.done:
            self._end_episode(s, res)
        return out_d

    def _end_episode(self, s: AgentSession, res: StepResult) -> None:
        summary = {
            "parse_ms": s.parsed["parse_ms"] if s.parsed else None,
            "steps": s.t,
            "completed": res.completed,
            "dag_valid": res.dag_valid,
            "deciders": sorted(s.deciders),
        }
        # DVR counts an episode for an arm only when that arm decided every step of it.
        if s.deciders == {s.arm} and s.arm in ARMS:
            self.router.record_episode(
                s.arm, bool(res.dag_valid), s.session_id, completed=bool(res.completed)
            )
        elif s.deciders == {"rules"}:
            self.rules_counts.episodes += 1
            self.rules_counts.valid_episodes += int(bool(res.dag_valid))
            self.rules_counts.outcome_episodes += 1
            self.rules_counts.completed_episodes += int(bool(res.completed))
        only = next(iter(s.deciders)) if len(s.deciders) == 1 else "mixed"
        self.store.add_decision(
            s.session_id,
            "episode",
            only,
            self.versions.get(only, only),
            {"family": s.family, "seed": s.seed},
            summary,
        )
        self.sessions.close(s.session_id, summary)

    async def stream_episode(self, s: AgentSession) -> AsyncIterator[dict[str, Any]]:
        """``POST /v1/episodes`` after :meth:`create_session`: the session, then every step until the episode
        ends (sent as server-sent events). A client that goes away closes the session."""
        yield {"event": "session", **self.session_out(s)}
        try:
            while True:
                step = await self.step_session(s.session_id)
                yield {"event": "step", **step}
                if step["done"]:
                    return
        finally:
            self.sessions.close(s.session_id)

    def close_session(self, session_id: str, client: str | None = None) -> None:
        """``DELETE /v1/sessions/{id}`` by ``client``."""
        self.sessions.check(session_id, client)
        self.sessions.close(session_id, {"closed": True})

    # ------------------------------------------------------------------ feedback and metrics
    def feedback(self, body: FeedbackIn) -> dict[str, Any]:
        """``POST /v1/feedback``: stored with the decision it is about; it also judges the deciding arm's plan
        for the canary (success: a valid plan that completed the task; wrong_steps: an invalid plan; not_solved:
        the task not completed)."""
        d = self.store.decision(body.trace_id)
        if d is None:
            raise ClientError([(("body", "trace_id"), "no decision with this trace_id")], status=404)
        fid = self.store.add_feedback(body.trace_id, body.outcome, body.reason, body.comment)
        _kind, arm = d
        if arm in ARMS:
            success = body.outcome == "success"
            valid = True if success else (False if body.reason == "wrong_steps" else None)
            completed = True if success else (False if body.reason == "not_solved" else None)
            self.router.record_episode(arm, valid, body.trace_id, completed=completed)
        return {"feedback_id": fid, "trace_id": body.trace_id}

    def snapshot(self) -> dict[str, Any]:
        """``GET /v1/metrics`` (the gateway adds the policy deployments' batch statistics)."""
        canary = self.router.snapshot()
        live = {**canary["arms"], "rules": self.rules_counts.summary()}
        self._push_gauges(live)
        return {
            "domain": self.domain,
            "strategy_mode": self.strategy_mode,
            "strategy_source": self.strategy_source,
            "models": {a: v for a, v in self.versions.items() if a in ARMS},
            "live": live,
            "traffic_split": self._split(),
            "canary": canary,
            "sessions_open": len(self.sessions.open) + len(self.sessions.dormant),
            "sessions_resumed": self.sessions.resumed,
            "degraded_to_rules": self.degraded,
            "sla": self.sla.model_dump(),
            "breakers": {arm: b.state for arm, b in self.breakers.items()},
            "policy_latency_ms": {arm: w.summary() for arm, w in self.policy_latency.items()},
            "quota_refused": dict(self.rate.refused),
            "store_compaction": self.store.compactions[-1] if self.store.compactions else None,
            "parser": self.text.summary(),
            **self.metrics.summary(),
        }

    def _split(self) -> dict[str, float]:
        share = self.router.share
        return (
            {"stable": 1.0 - share, "candidate": share} if self.strategy_mode == "learned" else {"rules": 1.0}
        )

    def _push_gauges(self, live: dict[str, dict[str, Any]] | None = None) -> None:
        """Prometheus gauges: live TCSR/DVR per arm, traffic shares, the strategy."""
        self._gauges_at = time.monotonic()
        if live is None:
            live = {
                **{k: v.summary() for k, v in self.router.counts.items()},
                "rules": self.rules_counts.summary(),
            }
        self.metrics.sink.gauges(
            {
                "tcsr": {a: v["tcsr"] for a, v in live.items() if v["tcsr"] is not None},
                "dvr": {a: v["dvr"] for a, v in live.items() if v["dvr"] is not None},
                "traffic_share": self._split(),
                "strategy_rules": {"all": float(self.strategy_mode == "rules")},
            }
        )

    def _check_domain(self, domain: str) -> None:
        if domain != self.domain:
            raise ClientError([(("body", "domain"), f"this service serves domain {self.domain!r}")])

    def _log_canary(self, decision: dict[str, Any]) -> None:
        log.info("canary %s", json.dumps(decision, default=str))

    def close(self) -> None:
        self.store.close()
        self.text.close()
        self.sessions.close_memory()


def _task_key(body: ActRequest) -> str:
    raw = json.dumps(body.task.model_dump(mode="json"), sort_keys=True).encode()
    return hashlib.blake2b(raw, digest_size=12).hexdigest()


def _step_fields(res: StepResult) -> dict[str, Any]:
    return res.to_dict()
