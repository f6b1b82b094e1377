"""Settings of the policy service: one pydantic model per component, validated when the application is built.

``serve_apps/policy.yaml`` passes them as the application's ``args``; ``agentic-ray serve RUN_DIR`` builds them
from its options. Runtime switches (``strategy_mode``, the batch size and wait) travel as Serve ``user_config``
and are validated by :class:`GatewayUserConfig` and :class:`PolicyUserConfig` in each replica's
``reconfigure``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.memory.memory_config import MemoryConfig

StrategyMode = Literal["learned", "rules"]
ArmName = Literal["stable", "candidate"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicyUserConfig(_Strict):
    """Runtime settings of a policy deployment (its Serve ``user_config``; changed without a restart)."""

    max_batch_size: int = Field(default=32, ge=1, le=1024, description="Largest dynamic batch.")
    batch_wait_timeout_s: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="How long a batch waits to fill before it runs. A lone request waits all of it; under load "
        "batches fill while the previous one runs, without a wait: the forward blocks the replica's event loop, so "
        "the requests that arrive meanwhile are queued and form the next batch. Measured: 1 ms instead of 5 ms cut "
        "handle_p50_ms 27.7 -> 21.6 at the same c32 throughput, 72 vs 75 req/s over HTTP (benchmarks/"
        "serve_latency.py); 0 instead of 1 ms, the two as apps of one Ray instance alternated over two 4 s rounds "
        "at load 20-34: in-gateway c32 69.6 vs 61.6 req/s over HTTP, mean batch 6.8 vs 2.5, CPU per request 10.9 "
        "vs 12.8 ms; a policy deployment of its own unchanged, 47.4 vs 47.3 req/s, mean batch 1.9 vs 1.8. With "
        "the batcher of serving/batching.py (the next batch formed when the forward has finished), 0 vs 1 ms as "
        "apps of one Ray instance (3 rounds of 3 s, load 17-20): in-gateway c32 over HTTP 63.7 vs 73.4 req/s "
        "(1.65x vs 1.90x the unbatched 38.7), mean batch 4.6 vs 6.2; through handles 123 vs 127 req/s, mean "
        "batch 8.5 vs 11.0. 0 stays the default: 1 ms would add 1 ms to every lone request.",
    )
    fault_delay_ms: float = Field(
        default=0.0,
        ge=0,
        le=60_000,
        description="Chaos testing only (0 in production): every batch waits this long before its forward, so a "
        "slow policy can be injected into a running deployment through its user_config (the gateway then "
        "answers from the rule-based policy within `sla.policy_timeout_ms`).",
    )


class SLASettings(_Strict):
    """How long a decision may wait on a policy, and when a failing policy is skipped (its arm's breaker)."""

    policy_timeout_ms: float = Field(
        default=1000.0,
        gt=0,
        description="A policy that has not answered by then is given up: the candidate's request goes to stable, "
        "stable's to the rule-based policy (marked degraded). A canary candidate slower than this fails every "
        "call and is rolled back, never promoted. The default leaves room for a loaded small machine: HTTP p99 at "
        "32 clients was 640-680 ms on the 2-CPU box (benchmarks/serve_latency.py), and a policy overloaded past "
        "its SLA is shed to the rule-based policy by its breaker. /v1/metrics shows policy_latency_ms per arm.",
    )
    breaker_error_budget: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="An arm whose failed or timed-out share of recent calls exceeds this is skipped (its "
        "breaker opens) until a probe succeeds.",
    )
    breaker_window: int = Field(default=20, ge=1, description="Recent calls the breaker counts.")
    breaker_min_calls: int = Field(default=5, ge=1, description="Calls in the window before it may open.")
    breaker_reset_s: float = Field(default=1.0, gt=0, description="Open time before a probe.")


class GatewayUserConfig(_Strict):
    """Runtime settings of the gateway (its Serve ``user_config``; changed without a restart)."""

    strategy_mode: StrategyMode = Field(
        default="learned",
        description="learned: the policy modules decide; rules: the domain's scripted expert decides (the "
        "rule-based fallback policy).",
    )
    batching: dict[ArmName, PolicyUserConfig] = Field(
        default_factory=dict,
        description="Batch settings of the arms served inside the gateway (``in_gateway``; the other arms' are "
        "their own deployments' user_config). An arm not named keeps its settings' batching.",
    )
    sla: SLASettings | None = Field(
        default=None, description="Policy timeout and breakers now (None: the application settings' `sla`)."
    )


class ArmSettings(_Strict):
    """One served policy version (the stable one or the canary candidate)."""

    checkpoint: str = Field(
        description="A run directory (its final stage checkpoint is served), a stage checkpoint, or an RLModule "
        "checkpoint directory."
    )
    version: str | None = Field(
        default=None, description="Model version reported in responses (default: derived from the path)."
    )
    sample: bool = Field(
        default=False, description="Sample actions from the policy instead of taking the greedy action."
    )
    in_gateway: bool = Field(
        default=True,
        description="Run this policy inside the gateway replica instead of as its own deployment: one Serve hop "
        "less per decision (batched there the same way; num_replicas, num_cpus and max_ongoing_requests of the "
        "arm then do not apply: the gateway's do). Default (unset or null): inside the gateway when num_replicas "
        "is 1, its own deployment to scale out. Measured on the 2-CPU box, both kinds as apps of one Ray instance, "
        "alternated (4 runs, load 9-34): a /v1/act decision through a handle took 11-14 ms of replica CPU against "
        "20-24 ms, p50 15-18 ms against 23-26; over HTTP at one client 16-20 ms of replica CPU against 26-29, p50 "
        "24-31 ms against 33-39; at 32 clients 62-68 req/s against 39-47. Inside the gateway a forward runs in a "
        "worker thread, so the gateway keeps serving meanwhile and sla.policy_timeout_ms applies as to a "
        "deployment. false keeps one replica in a deployment of its own, which Serve restarts apart from the "
        "gateway.",
    )
    num_replicas: int = Field(default=1, ge=1, description="Replicas of this policy deployment.")
    num_cpus: float = Field(default=0.5, ge=0, description="CPUs reserved per replica.")
    max_ongoing_requests: int = Field(
        default=64,
        ge=1,
        description="Requests one replica accepts at once; must be at least the batch size, or batches never "
        "fill (measured: @serve.batch(32) with the default 5 collapsed to 13-17 req/s with a p99 of 4 s).",
    )
    torch_threads: int = Field(default=1, ge=1, description="torch intra-op threads per replica.")
    batching: PolicyUserConfig = Field(
        default_factory=PolicyUserConfig, description="Initial batch settings (also its user_config)."
    )

    @model_validator(mode="before")
    @classmethod
    def _default_in_gateway(cls, data: Any) -> Any:
        """``in_gateway`` unset or null: inside the gateway for one replica."""
        if isinstance(data, dict) and data.get("in_gateway") is None:
            data = {**data, "in_gateway": data.get("num_replicas", 1) == 1}
        return data

    @model_validator(mode="after")
    def _batch_fits(self) -> ArmSettings:
        if self.in_gateway and self.num_replicas != 1:
            raise ValueError(
                f"in_gateway runs the policy in the one gateway replica: num_replicas must be 1, got "
                f"{self.num_replicas}"
            )
        if self.max_ongoing_requests < self.batching.max_batch_size:
            raise ValueError(
                f"max_ongoing_requests ({self.max_ongoing_requests}) < max_batch_size "
                f"({self.batching.max_batch_size}): batches could never fill"
            )
        return self

    def resolved_version(self) -> str:
        if self.version:
            return self.version
        p = Path(self.checkpoint).resolve()
        return f"{p.parent.name}/{p.name}" if p.name in ("il", "rl", "reflection", "latest") else p.name


class AuthSettings(_Strict):
    """Bearer-token auth of every endpoint but the health checks. Each token is a client: quotas count per
    token."""

    token_env: str = Field(
        default="AGENTIC_RAY_SERVE_TOKEN", description="Environment variable holding the token (one client)."
    )
    token_file: str | None = Field(
        default=None,
        description="Or: a file of tokens, read when the gateway starts: one per line, each a client, written "
        "`TOKEN` or `NAME TOKEN` (the name labels the client in metrics; `#` starts a comment).",
    )


class QuotaSettings(_Strict):
    """Per-client limits (a client is a bearer token), so that one client cannot take the whole service."""

    sessions_per_client: int = Field(
        default=64, ge=1, description="Agent-mode sessions one client may hold open (429 beyond)."
    )
    requests_per_s: float = Field(
        default=500.0,
        gt=0,
        description="Sustained requests per second of one client (a token bucket; 429 with Retry-After beyond).",
    )
    burst: int = Field(
        default=500, ge=1, description="Requests one client may send at once (the bucket's size)."
    )


class StoreSettings(_Strict):
    """Retention of the decision and feedback store (compacted by its writer thread, off the request path)."""

    retention_h: float = Field(
        default=72.0,
        gt=0,
        description="Decisions, consumed feedback and closed sessions older than this are deleted. Feedback a "
        "refiner has not consumed is kept, with the decision it is about.",
    )
    max_mb: float = Field(
        default=512.0,
        gt=0,
        description="Beyond this many megabytes of stored requests and decisions, the oldest decisions are "
        "deleted first (those unconsumed feedback refers to are kept).",
    )
    compact_every_s: float = Field(default=60.0, gt=0, description="How often the store is compacted.")


class CanarySettings(_Strict):
    """The canary router: traffic steps, the minimum sample and the rollback margins (see ``serving.canary``)."""

    steps: list[float] = Field(
        default=[0.05, 0.10, 0.50, 1.0], description="Candidate traffic shares, in order; the last is 1.0."
    )
    min_calls: int = Field(
        default=200, ge=1, description="Candidate tool calls in a step before it may advance (TCSR sample)."
    )
    min_episodes: int = Field(
        default=20, ge=1, description="Candidate episodes in a step before it may advance (DVR sample)."
    )
    min_step_s: float = Field(default=30.0, ge=0, description="Least time spent in a step before advancing.")
    tcsr_margin: float = Field(
        default=0.005,
        ge=0,
        le=1,
        description="Roll back when the candidate's TCSR is this far below stable's.",
    )
    dvr_margin: float = Field(
        default=0.02, ge=0, le=1, description="Roll back when the candidate's DVR is this far below stable's."
    )
    completion_margin: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="Roll back when the candidate's task completion is this far below stable's.",
    )
    z: float = Field(
        default=3.09,
        gt=0,
        description="One-sided z of the rollback test (3.09: p < 0.001, checked after every outcome).",
    )

    @model_validator(mode="after")
    def _steps(self) -> CanarySettings:
        s = self.steps
        if not s or any(not 0 < x <= 1 for x in s) or sorted(s) != s or s[-1] != 1.0:
            raise ValueError(f"steps must increase within (0, 1] and end at 1.0, got {s}")
        return self


class AgentSettings(_Strict):
    """Agent mode: sessions that execute the policy's calls through the ToolExecutor."""

    backend: Literal["python", "http"] = Field(
        default="python", description="In-process tools, or a skill server (agentic-ray skills serve)."
    )
    http_url: str | None = Field(default=None, description="Skill server URL for backend=http.")
    fault_share: float = Field(
        default=0.0, ge=0, le=1, description="Share of sessions with injected faults (as in evaluation)."
    )
    max_sessions: int = Field(
        default=256, ge=1, description="Open sessions at most, over every client (429 beyond)."
    )
    session_ttl_s: float = Field(default=600.0, gt=0, description="Idle sessions are closed after this.")
    memory: MemoryConfig | None = Field(
        default=None,
        description="The customers' long-term memory, shared by every session so that a returning customer's "
        "facts are there in the next one: an embedded store at `path` (e.g. inside the app's data directory; local "
        "mode allows one process per path, so one gateway replica) or a Qdrant server at `url`. For a domain with "
        "memory hooks (open_memory / attach_memory) and backend=python (the memory skills run in the gateway's "
        "process). None: each session's world keeps a memory of its own, as in training.",
    )

    @model_validator(mode="after")
    def _memory_in_process(self) -> AgentSettings:
        if self.memory is not None and self.backend != "python":
            raise ValueError(
                "agent.memory needs backend=python: the memory skills run in the gateway's process"
            )
        return self


class ServeSettings(_Strict):
    """Everything the policy application needs (``args`` of ``serve_apps/policy.yaml``)."""

    stable: ArmSettings = Field(description="The stable policy.")
    candidate: ArmSettings | None = Field(default=None, description="A canary candidate (None: no canary).")
    env: AgentTaskEnvConfig | None = Field(
        default=None,
        description="The env config the policy was trained with (default: settings.json of the stable run).",
    )
    strategy_mode: StrategyMode = Field(
        default="learned", description="Initial strategy (the gateway's user_config overrides it)."
    )
    auth: AuthSettings = Field(default_factory=AuthSettings, description="Bearer-token auth.")
    canary: CanarySettings = Field(default_factory=CanarySettings, description="The canary router.")
    agent: AgentSettings = Field(default_factory=AgentSettings, description="Agent mode.")
    feedback_db: str = Field(
        default="serve_feedback.sqlite",
        description="SQLite file of decisions, feedback and open sessions (durable across replica restarts).",
    )
    store: StoreSettings = Field(default_factory=StoreSettings, description="Retention of that file.")
    quotas: QuotaSettings = Field(default_factory=QuotaSettings, description="Per-client limits.")
    sla: SLASettings = Field(default_factory=SLASettings, description="Policy timeouts and breakers.")
    max_body_bytes: int = Field(default=262_144, ge=1024, description="Larger request bodies get 413.")
    max_json_depth: int = Field(
        default=32,
        ge=8,
        le=256,
        description="JSON bodies nested deeper than this get 400 (checked at parse).",
    )
    top_k: int = Field(default=3, ge=1, le=32, description="Alternatives listed per decision.")
    gateway_num_cpus: float = Field(default=0.25, ge=0, description="CPUs reserved for the gateway replica.")
    gateway_max_ongoing_requests: int = Field(
        default=256,
        ge=1,
        description="Requests the gateway accepts at once; at least the batch size, or the policy deployments' "
        "batches can never fill.",
    )
    gateway_code_thread: bool = Field(
        default=False,
        description="Run the gateway's code on an event loop thread of its own, as Serve does by default "
        "(``RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD``), instead of the replica's main loop, which saves a "
        "thread hop each way per request (the forwards of an in-gateway policy run in a worker thread either "
        "way).",
    )
    access_log: bool = Field(
        default=False,
        description="Serve's access log in the application's replicas (the gateway and the policy deployments): "
        "a line per request in each replica's log file and on its stderr. Off by default: the service counts "
        "every request itself (/v1/metrics, the agentic_serve_requests metric, each decision stored under its "
        "trace id), and the line is written to a file and to stderr on the request path "
        "(`benchmarks/serve_latency.py --access-log` runs with it on). The HTTP proxy's access log is Serve's "
        "global logging config.",
    )
    route_prefix: str = Field(default="/", description="HTTP route prefix of the application.")

    @model_validator(mode="after")
    def _gateway_fits(self) -> ServeSettings:
        arms = [self.stable] + ([self.candidate] if self.candidate else [])
        need = max(a.batching.max_batch_size for a in arms)
        if self.gateway_max_ongoing_requests < need:
            raise ValueError(
                f"gateway_max_ongoing_requests ({self.gateway_max_ongoing_requests}) < max_batch_size ({need})"
            )
        per, cap = self.quotas.sessions_per_client, self.agent.max_sessions
        if cap > 1 and per >= cap:
            raise ValueError(
                f"quotas.sessions_per_client ({per}) >= agent.max_sessions ({cap}): one client could hold every "
                "session"
            )
        return self

    def absolute_paths(self, base: str | Path | None = None) -> ServeSettings:
        """The settings with relative file paths resolved from ``base`` (default: the working directory), so
        replicas started elsewhere read the same files."""
        root = Path(base or Path.cwd())

        def fix(p: str) -> str:
            return str(p if Path(p).is_absolute() else (root / p).resolve())

        arms = {
            k: a.model_copy(update={"checkpoint": fix(a.checkpoint)})
            for k, a in (("stable", self.stable), ("candidate", self.candidate))
            if a is not None
        }
        auth = (
            self.auth.model_copy(update={"token_file": fix(self.auth.token_file)})
            if self.auth.token_file
            else self.auth
        )
        return self.model_copy(update={**arms, "auth": auth, "feedback_db": fix(self.feedback_db)})

    def arms(self) -> dict[ArmName, ArmSettings]:
        """The served policy versions by arm."""
        return {
            "stable": self.stable,
            **({"candidate": self.candidate} if self.candidate is not None else {}),
        }

    def gateway_user_config(
        self,
        strategy_mode: StrategyMode | None = None,
        batching: PolicyUserConfig | None = None,
        sla: SLASettings | None = None,
    ) -> dict[str, object]:
        """The gateway's Serve ``user_config``: the strategy, the batch settings of the in-gateway arms
        (``batching`` for all of them; default: each arm's own) and an SLA other than the settings' (``sla``)."""
        return GatewayUserConfig(
            strategy_mode=strategy_mode or self.strategy_mode,
            batching={k: batching or a.batching for k, a in self.arms().items() if a.in_gateway},
            sla=sla,
        ).model_dump(exclude_none=True)

    def env_config(self) -> AgentTaskEnvConfig:
        """The served env config: given, or the stable run's (``settings.json`` next to its checkpoints)."""
        if self.env is not None:
            return self.env
        run = run_dir_of(self.stable.checkpoint)
        if run is None:
            raise ValueError(
                f"no settings.json above {self.stable.checkpoint}: give `env` (the training env config)"
            )
        return AgentTaskEnvConfig.model_validate(json.loads((run / "settings.json").read_text())["env"])


def run_dir_of(checkpoint: str | Path) -> Path | None:
    """The run directory a checkpoint path lies in (the first ancestor holding ``settings.json``)."""
    p = Path(checkpoint).resolve()
    for d in (p, *p.parents):
        if (d / "settings.json").is_file():
            return d
    return None
