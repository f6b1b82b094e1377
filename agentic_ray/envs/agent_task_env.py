"""``AgentTaskEnv``: a Gymnasium env in which a policy serves one customer by calling tools through the gateway.

Each episode draws a task (a goal DAG, see :mod:`agentic_ray.envs.ecommerce_tasks`) and its shop world, pushes the
world to the skill backend, and lets the policy call skills. Every call goes through the
:class:`~agentic_ray.skills.executor.ToolExecutor` (contract check, clipping, business preconditions, retries,
circuit breaker, fallback, audit); the env only owns the dynamics: world drift, goal bookkeeping, masks, the
cheap synchronous reward and termination. Slow reward layers are computed elsewhere from the
``EpisodeRecord`` put in the last step's ``info[EPISODE_RECORD]``.

Action spaces (RLlib sees exactly these; nothing is flattened by the env)
-----------------------------------------------------------------------
``action_mode="structured"`` (default): ``layout.action_space()``, a ``Dict`` of

* ``skill``   ``Discrete(K)``: index into the contract file's skill list (``layout.skills``).
* ``pointer`` ``MultiDiscrete([max_pointer] * pointer_slots)``: slot ``i`` holds the *node index* of the
  ``i``-th entity parameter of the skill (in contract order) among the nodes of type
  ``layout.skills[k].pointer_types[i]``; valid targets are ``obs["ptr_mask_<type>"] == 1``. The env maps the
  index to the entity id (user id, SKU, order id) of that node.
* ``enum``    ``MultiDiscrete([enum_max] * enum_slots)``: slot ``j`` is the choice index of the ``j``-th
  enum (or bool) parameter; values ``>= layout.skills[k].enum_sizes[j]`` are invalid.
* ``numeric`` ``Box(-5, 5, (numeric_slots,))``: raw value ``x`` of the ``n``-th float/int parameter, mapped to
  ``low + (high - low) * (tanh(x) + 1) / 2``; ``high`` is tightened by ``max_from`` from the referenced entity
  (a refund is at most the order's total). Int parameters are rounded. Raw values outside [-5, 5] (an
  unclipped Gaussian sample) are clipped with a warning in the step trace; NaN/inf is ``INVALID_INPUT``.

Unused slots are ignored. ``obs["skill_mask"]`` holds the hard, soft and business masks; why each skill is
masked is in ``info[MASK_REASONS]``.

``action_mode="prototype"``: ``Discrete(P)`` over mined action prototypes
(:mod:`agentic_ray.envs.prototypes`); ``obs["proto_mask"]`` marks the prototypes whose skill is allowed. The env
grounds a prototype to a structured action (:meth:`AgentTaskEnv.ground_prototype`) and runs it the same way.

An invalid action (masked skill, pointer to padding, enum out of range, NaN) is never sent to a tool and never
crashes the env: it returns a typed error step (``PRECONDITION_FAILED``/``CIRCUIT_OPEN`` for a masked skill,
``INVALID_INPUT`` otherwise) with the configured penalty.

Reward (cheap, synchronous; seed 000's execution layer plus the completion signal): success +1, timeout -2,
bad parameters -3, open breaker -5, other availability errors -1, masked action -3; -1 more for a successful
call that advanced no goal (redundant, so it nets 0); +2 when every goal is satisfied, -0.5 on an explicit
failure.

Termination: every goal satisfied (success); explicit failure (a human handoff, or a pending goal made
impossible, e.g. cancelling the order the customer wanted refunded); truncation when the step budget is spent.

Info: ``reset`` returns ``MASK_REASONS``, ``task_family``, ``task_seed``, ``optimal_steps``, ``fault_kind`` and
``BACKEND_ERRORS`` (typed failures of pushing the world or its faults; a backend failure never raises).
``step`` returns ``STEP_TRACE`` (trace_id, skill, args, result_code, latency_ms, attempts, fallback_used,
masked, message, goals_satisfied, and the mask_reasons the action was chosen under), ``MASK_REASONS`` for the
returned observation and, on the last step, ``EPISODE_RECORD``.

Error injection (seed 000): with ``faults.enabled``, a share of episodes (``faults.share(progress)``, 100% → 5%
by default) runs with one fault kind: garbled payloads, transient failures/timeouts, or an outage of one of the
task's skills. Training sets the progress with :meth:`AgentTaskEnv.set_training_progress`.
"""

from __future__ import annotations

import inspect
import math
import time
import uuid
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentic_ray.envs.ecommerce import (
    EpisodeState,
    MaskComputer,
    ObservationBuilder,
    ecommerce_contracts,
    ecommerce_specs,
    sla_arrays,
)
from agentic_ray.envs.ecommerce_tasks import (
    FAMILIES,
    Task,
    draw_training_seed,
    generate_task,
    goal_feasible,
    validation_seeds,
)
from agentic_ray.envs.goal_dag import goal_edges, plan_validity
from agentic_ray.envs.graph_spec import NUMERIC_BOUND, ROOT_CAUSES, numeric_action, observation_space
from agentic_ray.envs.prototypes import ExpertStep, Prototype, load_prototypes
from agentic_ray.keys import BACKEND_ERRORS, EPISODE_RECORD, MASK_REASONS, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord, StepRecord
from agentic_ray.skills.backends import FaultConfig, HttpBackend, PythonBackend
from agentic_ray.skills.contracts import BoolParam, EntityParam, EnumParam, FloatParam, IntParam
from agentic_ray.skills.domains.ecommerce.world import ShopWorld
from agentic_ray.skills.executor import CALLER_ERRORS, RealClock, SimClock, ToolExecutor, ToolResult

_CAUSE = {c: i for i, c in enumerate(ROOT_CAUSES)}


def episode_record_dict(rec: EpisodeRecord) -> dict[str, Any]:
    """``rec.to_dict()`` without ``dataclasses.asdict``'s recursive deep copy (5x faster; same result for
    records whose step args hold plain values, which the gateway guarantees)."""
    d = dict(rec.__dict__)
    d["steps"] = [
        {**s.__dict__, "args": dict(s.args), "goals_satisfied": list(s.goals_satisfied)} for s in rec.steps
    ]
    d["goal_deps"] = [tuple(e) for e in rec.goal_deps]
    for k in ("goals", "goals_done_order", "entities_mentioned", "entities_recalled"):
        d[k] = list(d[k])
    d["context"] = dict(rec.context)
    return d


class OutcomeRewards(BaseModel):
    """The cheap per-step reward (seed 000, execution layer) and the completion signal."""

    model_config = ConfigDict(extra="forbid")

    success: float = Field(default=1.0, description="A successful call.")
    timeout: float = Field(default=-2.0, description="TOOL_TIMEOUT.")
    bad_params: float = Field(
        default=-3.0, description="A caller error: INVALID_INPUT, NOT_FOUND, CONFLICT, ..."
    )
    breaker: float = Field(default=-5.0, description="CIRCUIT_OPEN.")
    upstream: float = Field(default=-1.0, description="Other availability errors (upstream, garbled output).")
    masked: float = Field(default=-3.0, description="A masked action sent anyway (never executed).")
    redundant: float = Field(
        default=-1.0,
        description="Added to a successful call that advanced no goal (the seed's redundancy penalty). With the "
        "default it cancels `success`: otherwise repeating a safe call until the step budget runs out pays more "
        "than finishing the task, and RL learns exactly that loop (measured: IL 65% completion -> 0% after RL).",
    )
    completion: float = Field(default=2.0, description="Added on the step that satisfies the last goal.")
    failure: float = Field(default=-0.5, description="Added on an explicit, unrecoverable failure.")


class FaultScheduleConfig(BaseModel):
    """Error injection (seed 000): the share of episodes with injected faults decays over training progress."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="Inject faults at all (off in tests and benchmarks).")
    start_share: float = Field(default=1.0, ge=0, le=1, description="Share of faulty episodes at progress 0.")
    end_share: float = Field(default=0.05, ge=0, le=1, description="Share of faulty episodes at progress 1.")
    decay: Literal["linear", "exponential"] = Field(
        default="exponential", description="Shape of the decay between start and end share."
    )
    kinds: dict[str, float] = Field(
        default_factory=lambda: {"garbage": 1.0, "transient": 1.0, "outage": 1.0},
        description="Relative weights of fault kinds: garbled payloads, transient failures, a skill outage.",
    )
    garbage_rate: float = Field(
        default=0.3, ge=0, le=1, description="Garbled-payload rate in a garbage episode."
    )
    transient_rate: float = Field(default=0.3, ge=0, le=1, description="Failure rate in a transient episode.")
    timeout_rate: float = Field(default=0.1, ge=0, le=1, description="Timeout rate in a transient episode.")
    outage_skills: int = Field(
        default=1, ge=1, description="Skills (among the task's) fully down in an outage."
    )

    @field_validator("kinds")
    @classmethod
    def _known_kinds(cls, v: dict[str, float]) -> dict[str, float]:
        bad = set(v) - {"garbage", "transient", "outage"}
        if bad or not v or sum(v.values()) <= 0:
            raise ValueError(f"kinds must weight garbage/transient/outage positively, got {v}")
        return v

    def share(self, progress: float) -> float:
        """Share of faulty episodes at training progress ``progress`` in [0, 1]."""
        p = min(max(progress, 0.0), 1.0)
        if self.decay == "linear" or self.start_share <= 0 or self.end_share <= 0:
            return self.start_share + (self.end_share - self.start_share) * p
        return self.start_share * (self.end_share / self.start_share) ** p


class AgentTaskEnvConfig(BaseModel):
    """Configuration of :class:`AgentTaskEnv` (RLlib's ``env_config`` dict is validated into this)."""

    model_config = ConfigDict(extra="forbid")

    domain: Literal["ecommerce"] = Field(default="ecommerce", description="Skill domain.")
    contracts_path: str | None = Field(default=None, description="Contract YAML (default: the domain's).")
    action_mode: Literal["structured", "prototype"] = Field(
        default="structured",
        description="Structured skill+arguments Dict, or Discrete over mined prototypes.",
    )
    prototypes_path: str | None = Field(
        default=None, description="Prototype JSON (default: the shipped one)."
    )
    families: list[str] = Field(default_factory=lambda: list(FAMILIES), description="Task families to draw.")
    split: Literal["train", "validation"] = Field(
        default="train",
        description="Training seeds, or the fixed validation seeds (round-robin over families).",
    )
    validation_per_family: int = Field(default=25, ge=1, description="Validation tasks per family.")
    budget_factor: float = Field(
        default=2.0, ge=1.0, description="Step budget = max(opt + extra, factor * opt)."
    )
    budget_extra: int = Field(default=4, ge=0, description="See budget_factor.")
    drift: bool = Field(default=True, description="Background world drift (stock, tool health) every step.")
    simulate_tool_health: bool = Field(
        default=False, description="Inject the world's simulated per-skill latency and failure rates."
    )
    tool_health_refresh_steps: int = Field(
        default=5, ge=1, description="Steps between pushes of the drifting tool health to the backend."
    )
    step_time_s: float = Field(default=1.0, ge=0, description="Simulated seconds per step (executor clock).")
    backend: Literal["python", "http"] = Field(default="python", description="Where tools run.")
    http_url: str | None = Field(default=None, description="Skill server URL for backend=http.")
    audit_path: str = Field(default=":memory:", description="SQLite file of the executor's audit log.")
    soft_error_rate: float = Field(
        default=0.05, ge=0, le=1, description="Soft-mask live error-rate threshold."
    )
    soft_thresholds: dict[str, float] = Field(default_factory=dict, description="Per-skill soft thresholds.")
    soft_min_calls: int = Field(default=5, ge=1, description="Calls before the soft mask may apply.")
    soft_cooldown_s: float = Field(
        default=30.0, ge=0, description="Simulated seconds before a soft-masked probe."
    )
    rewards: OutcomeRewards = Field(default_factory=OutcomeRewards, description="Per-step reward values.")
    faults: FaultScheduleConfig = Field(default_factory=FaultScheduleConfig, description="Error injection.")

    @field_validator("families")
    @classmethod
    def _families(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if f not in FAMILIES]
        if bad or not v:
            raise ValueError(f"unknown families {bad}; known: {FAMILIES}")
        return v


class AgentTaskEnv(gym.Env):
    """Tool-using customer-service env (see module docstring).

    Args:
        config: :class:`AgentTaskEnvConfig`, a dict of its fields (RLlib ``env_config``), or None.
    """

    metadata = {"render_modes": []}

    def __init__(self, config: AgentTaskEnvConfig | dict[str, Any] | None = None) -> None:
        super().__init__()
        if config is None:
            config = AgentTaskEnvConfig()
        elif not isinstance(config, AgentTaskEnvConfig):
            config = AgentTaskEnvConfig.model_validate(dict(config))
        self.config = config
        self.contracts = ecommerce_contracts(config.contracts_path)
        self.by_name = self.contracts.by_name()
        self.prototypes: list[Prototype] = (
            load_prototypes(config.prototypes_path) if config.action_mode == "prototype" else []
        )
        self.graph_spec, self.layout = ecommerce_specs([p.skill for p in self.prototypes])
        self.observation_space = observation_space(self.graph_spec, self.layout)
        self.action_space = (
            self.layout.prototype_action_space() if self.prototypes else self.layout.action_space()
        )
        self.skills = tuple(s.name for s in self.layout.skills)
        self.builder = ObservationBuilder(self.contracts, self.graph_spec, self.layout)
        self.masks = MaskComputer(
            self.contracts,
            config.soft_error_rate,
            config.soft_thresholds,
            config.soft_min_calls,
            config.soft_cooldown_s,
        )
        # Per-skill decode tables: (param name, kind, slot, spec) in contract order.
        self._params: list[list[tuple[str, str, int, Any]]] = []
        for c in self.contracts.skills:
            row: list[tuple[str, str, int, Any]] = []
            np_, ne, nn = 0, 0, 0
            for name, p in c.input.items():
                if isinstance(p, EntityParam):
                    row.append((name, "pointer", np_, p))
                    np_ += 1
                elif isinstance(p, EnumParam | BoolParam):
                    row.append((name, "enum", ne, p))
                    ne += 1
                elif isinstance(p, FloatParam | IntParam):
                    row.append((name, "numeric", nn, p))
                    nn += 1
            self._params.append(row)
        self._proto_skill = np.array([self.skills.index(p.skill) for p in self.prototypes], dtype=np.int64)
        self._skill_idx = {n: i for i, n in enumerate(self.skills)}
        self._touched = {
            c.name: (c.name, *[f.skill for f in c.fallback if f.skill is not None])
            for c in self.contracts.skills
        }
        self._pre = {
            c.name: [p.after for p in c.preconditions] for c in self.contracts.skills if c.preconditions
        }
        self.world_id = f"env-{uuid.uuid4().hex[:12]}"
        self.progress = 0.0
        self.policy_version = 0
        self._val_counter = 0
        self._rng = np.random.default_rng()
        self.intent_id = ""
        self.fault_kind: str | None = None
        self._down: frozenset[str] = frozenset()
        self._closed = False
        self._warnings: list[str] = []
        self._health: dict[str, Any] | None = None
        self._build_executor()
        self.task: Task | None = None
        self.world: ShopWorld | None = None
        self.state: EpisodeState | None = None
        self._done = True
        self.timings: dict[str, list[float]] = {"obs_ms": [], "mask_ms": []}
        self.record_timings = False

    # ------------------------------------------------------------------ setup
    def _build_executor(self) -> None:
        old: ToolExecutor | None = getattr(self, "executor", None)
        if old is not None:
            old.close()
        if self.config.backend == "http":
            if not self.config.http_url:
                raise ValueError("backend=http needs http_url")
            self.backend: Any = HttpBackend(self.config.http_url, world_from_dict=ShopWorld.from_dict)
            self.clock: Any = RealClock()
        else:
            self.backend = PythonBackend(measure_wall=False)
            self.clock = SimClock()
        self.executor = ToolExecutor(
            self.contracts, self.backend, audit_path=self.config.audit_path, clock=self.clock
        )
        # Per-skill SLA refresh when the executor offers ``sla_stats(skills=...)``; otherwise all skills.
        self._sla_partial = "skills" in inspect.signature(self.executor.sla_stats).parameters
        self._sla_cache: dict[str, np.ndarray] | None = None

    def _sla(self, called: str | None) -> dict[str, np.ndarray]:
        """Live SLA arrays. Only the skills a call touched (and its fallback skills) change between steps,
        plus breaker states, which also move with time; both are refreshed from the executor."""
        ex = self.executor
        if self._sla_cache is None or called is None or (called and not self._sla_partial):
            self._sla_cache = sla_arrays(ex.sla_stats(), self.skills)
            return self._sla_cache
        if called:  # "" = no call went out this step: only time-driven breaker moves
            names = self._touched.get(called, (called,))
            part = sla_arrays(ex.sla_stats(skills=names), names)  # type: ignore[call-arg,unused-ignore]
            for j, n in enumerate(names):
                i = self._skill_idx[n]
                for key, arr in self._sla_cache.items():
                    arr[i] = part[key][j]
        for i, n in enumerate(self.skills):
            b = ex.breaker_state(n)
            self._sla_cache["open"][i] = b == "open"
            self._sla_cache["half_open"][i] = b == "half_open"
        return self._sla_cache

    def set_training_progress(self, progress: float) -> None:
        """Training progress in [0, 1]; drives the error-injection schedule (faulty-episode share)."""
        self.progress = float(min(max(progress, 0.0), 1.0))

    def set_policy_version(self, version: int) -> None:
        """Learner update count of the acting policy (recorded in the EpisodeRecord)."""
        self.policy_version = int(version)

    def fault_share(self) -> float:
        """Current share of episodes with injected faults (0 when injection is disabled)."""
        return self.config.faults.share(self.progress) if self.config.faults.enabled else 0.0

    def _draw_faults(self, task: Task) -> tuple[str | None, frozenset[str]]:
        """The episode's fault kind (None: a clean episode) and, for an outage, the skills that are down."""
        cfg = self.config
        kind: str | None = None
        if cfg.faults.enabled and self._rng.random() < self.fault_share():
            kinds = list(cfg.faults.kinds)
            w = np.array([cfg.faults.kinds[k] for k in kinds], dtype=np.float64)
            kind = kinds[int(self._rng.choice(len(kinds), p=w / w.sum()))]
        down: frozenset[str] = frozenset()
        if kind == "outage":
            task_skills = sorted({g.skill for g in task.goals})
            n = min(cfg.faults.outage_skills, len(task_skills))
            down = frozenset(
                task_skills[int(i)] for i in self._rng.choice(len(task_skills), size=n, replace=False)
            )
        return kind, down

    def _fault_config(self, world: ShopWorld) -> FaultConfig:
        """Backend faults: the episode's injected fault kind plus, if simulated, the world's live tool health."""
        cfg = self.config
        kind, down = self.fault_kind, self._down
        if kind is None and not cfg.simulate_tool_health:
            return FaultConfig()
        per: dict[str, FaultConfig] = {}
        for s in self.skills:
            h = world.tool_health.get(s) if cfg.simulate_tool_health else None
            fr = h.failure_rate if h else 0.0
            lat = h.latency_ms if h else 0.0
            std = h.latency_std_ms if h else 0.0
            tr = gr = 0.0
            if kind == "transient":
                fr, tr = min(1.0, fr + cfg.faults.transient_rate), cfg.faults.timeout_rate
            elif kind == "garbage":
                gr = cfg.faults.garbage_rate
            if s in down:
                fr, tr, gr = 1.0, 0.0, 0.0
            per[s] = FaultConfig(
                failure_rate=fr, timeout_rate=tr, garbage_rate=gr, latency_ms=lat, latency_std_ms=std
            )
        return FaultConfig(per_skill=per, seed=int(self._rng.integers(2**31)))

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode.

        Args:
            seed: seeds every RNG of the env (task draw, drift, faults, trace ids) and rebuilds the executor, so
                that SLA history from earlier episodes cannot leak in.
            options: ``{"family": str, "task_seed": int}`` to pick a task explicitly.
        """
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._val_counter = 0
            self._health = None
            self._build_executor()
        options = options or {}
        fams = self.config.families
        if "family" in options or "task_seed" in options:
            family = options.get("family") or fams[int(self._rng.integers(len(fams)))]
            task_seed = int(options["task_seed"]) if "task_seed" in options else draw_training_seed(self._rng)
        elif self.config.split == "validation":
            i = self._val_counter
            self._val_counter += 1
            family = fams[i % len(fams)]
            seeds = validation_seeds(family, self.config.validation_per_family)
            task_seed = seeds[(i // len(fams)) % len(seeds)]
        else:
            family = fams[int(self._rng.integers(len(fams)))]
            task_seed = draw_training_seed(self._rng)
        world, task = generate_task(family, task_seed, self._pre)
        if self.state is not None and self.intent_id:
            self.executor.forget_intent(self.intent_id)
        self.world, self.task = world, task
        self.episode_id = uuid.UUID(
            int=int(self._rng.integers(2**63)) << 64 | int(self._rng.integers(2**63))
        ).hex
        self.intent_id = ToolExecutor.intent_hash(f"{task.query} #{self.episode_id}")
        # Tool health belongs to the services, not to one customer: it persists and drifts across episodes.
        if self._health is None:
            self._health = world.tool_health
        world.tool_health = self._health
        # Backend failures are typed outcomes, never exceptions: the episode starts and its calls fail typed.
        backend_errors = []
        if not (out := self.backend.put_world(self.world_id, world)).ok:
            backend_errors.append(f"put_world: {out.error_code}: {out.message}")
        self.fault_kind, self._down = self._draw_faults(task)
        if not (out := self.backend.set_faults(self._fault_config(world), world_id=self.world_id)).ok:
            # Faults that could not be set are not injected, so the episode must not claim them.
            backend_errors.append(
                f"set_faults: {out.error_code}: {out.message}; running without injected faults"
            )
            self.fault_kind, self._down = None, frozenset()
        budget = max(
            task.optimal_steps + self.config.budget_extra,
            math.ceil(self.config.budget_factor * task.optimal_steps),
        )
        self.state = EpisodeState.new(budget, len(task.goals), len(self.skills), self.masks.max_pre)
        self.builder.begin_episode(world, task)
        self._steps: list[StepRecord] = []
        self._violations = 0
        self._recalled: list[str] = []
        self._done = False
        obs = self._observe()
        info = {
            MASK_REASONS: self._reasons,
            "task_family": family,
            "task_seed": task_seed,
            "optimal_steps": task.optimal_steps,
            "fault_kind": self.fault_kind,
            BACKEND_ERRORS: backend_errors,
        }
        return obs, info

    def _observe(self, called: str | None = None) -> dict[str, np.ndarray]:
        assert self.world is not None and self.task is not None and self.state is not None
        t0 = time.perf_counter()
        sla = self._sla(called)
        t1 = time.perf_counter()
        mask, hard, soft = self.masks.compute(self.world, self.state, sla, self.clock.now())
        self._reasons = self.masks.reasons(self.state, mask, hard, soft, sla)
        t2 = time.perf_counter()
        self._mask = mask
        pmask = None
        if self.prototypes:
            pmask = mask[self._proto_skill]
            if not pmask.any():  # a masked Discrete needs one valid entry; its step is a typed masked error
                pmask = pmask.copy()
                pmask[0] = 1
            self._proto_mask = pmask
        obs = self.builder.build(self.world, self.task, self.state, sla, skill_mask=mask, proto_mask=pmask)
        t3 = time.perf_counter()
        if self.record_timings:
            self.timings["mask_ms"].append((t2 - t1) * 1e3)
            self.timings["obs_ms"].append(((t3 - t2) + (t1 - t0)) * 1e3)
        return obs

    # ------------------------------------------------------------------ actions
    def decode_action(self, action: Any) -> tuple[int, dict[str, Any], str | None, str]:
        """Structured action → ``(skill index, params, error code or None, message)``; never raises."""
        if self.prototypes:
            try:
                k = int(action)
            except (TypeError, ValueError):
                return -1, {}, "INVALID_INPUT", f"prototype action must be an int, got {action!r}"
            if not 0 <= k < len(self.prototypes):
                return -1, {}, "INVALID_INPUT", f"prototype {k} out of range"
            action = self.ground_prototype(k)
        try:
            k = int(action["skill"])
            ptr = np.asarray(action.get("pointer", ()), dtype=np.int64).reshape(-1)
            enm = np.asarray(action.get("enum", ()), dtype=np.int64).reshape(-1)
            num = np.asarray(action.get("numeric", ()), dtype=np.float64).reshape(-1)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            return -1, {}, "INVALID_INPUT", f"malformed action: {type(e).__name__}: {e}"
        if not 0 <= k < len(self.skills):
            return -1, {}, "INVALID_INPUT", f"skill {k} out of range"
        params: dict[str, Any] = {}
        numeric: list[tuple[str, int, Any]] = []
        for name, kind, slot, p in self._params[k]:
            if kind == "pointer":
                if slot >= len(ptr):
                    return k, params, "INVALID_INPUT", f"{name}: missing pointer slot {slot}"
                ids = self.builder.node_ids[p.node_type]
                j = int(ptr[slot])
                if not 0 <= j < len(ids):
                    return k, params, "INVALID_INPUT", f"{name}: pointer {j} is not a {p.node_type} node"
                params[name] = ids[j]
            elif kind == "enum":
                choices = p.choices if isinstance(p, EnumParam) else [False, True]
                if slot >= len(enm) or not 0 <= int(enm[slot]) < len(choices):
                    return k, params, "INVALID_INPUT", f"{name}: enum choice out of range"
                params[name] = choices[int(enm[slot])]
            else:
                numeric.append((name, slot, p))
        for name, slot, p in numeric:
            if slot >= len(num) or not np.isfinite(num[slot]):
                return k, params, "INVALID_INPUT", f"{name}: numeric slot {slot} missing or not finite"
            x = float(num[slot])
            if abs(x) > NUMERIC_BOUND:  # the squash is bounded anyway; clip and warn, as the gateway does
                self._warnings.append(f"{name}: raw {x:g} clipped to ±{NUMERIC_BOUND:g}")
                x = max(-NUMERIC_BOUND, min(NUMERIC_BOUND, x))
            lo, hi = self._bounds(self.skills[k], params, p)
            v = lo + (hi - lo) * (math.tanh(x) + 1.0) / 2.0
            params[name] = round(v) if isinstance(p, IntParam) else round(v, 4)
        return k, params, None, ""

    def _bounds(self, skill: str, params: dict[str, Any], p: Any) -> tuple[float, float]:
        assert self.world is not None
        b = self.builder.numeric_bound(self.world, skill, params) if isinstance(p, FloatParam) else None
        return b if b is not None else (float(p.min), float(p.max))

    def encode_action(self, skill: str, params: dict[str, Any]) -> Any:
        """Concrete ``(skill, params)`` → an action of this env's action space (the inverse of decoding)."""
        k = self.skills.index(skill)
        if self.prototypes:
            sig = tuple(self._enum_index(k, params))
            for i, pr in enumerate(self.prototypes):
                if pr.skill == skill and pr.enum == sig:
                    return i
            cands = [i for i, pr in enumerate(self.prototypes) if pr.skill == skill]
            return cands[0] if cands else 0
        lay = self.layout
        ptr = np.zeros(lay.pointer_slots, dtype=np.int64)
        enm = np.zeros(lay.enum_slots, dtype=np.int64)
        num = np.zeros(lay.numeric_slots, dtype=np.float32)
        for name, kind, slot, p in self._params[k]:
            if kind == "pointer":
                ptr[slot] = self.builder.node_index[p.node_type].get(str(params.get(name)), 0)
            elif kind == "enum":
                choices = p.choices if isinstance(p, EnumParam) else [False, True]
                v = params.get(name, choices[0])
                enm[slot] = choices.index(v) if v in choices else 0
            else:
                lo, hi = self._bounds(skill, params, p)
                num[slot] = self._inverse_squash(float(params.get(name, lo)), lo, hi)
        return {"skill": k, "pointer": ptr, "enum": enm, "numeric": num}

    def _enum_index(self, k: int, params: dict[str, Any]) -> list[int]:
        out = []
        for name, kind, _, p in self._params[k]:
            if kind == "enum":
                choices = p.choices if isinstance(p, EnumParam) else [False, True]
                v = params.get(name, choices[0])
                out.append(choices.index(v) if v in choices else 0)
        return out

    @staticmethod
    def _inverse_squash(v: float, lo: float, hi: float) -> float:
        if hi <= lo:
            return 0.0
        return numeric_action((v - lo) / (hi - lo))

    def ground_prototype(self, index: int) -> dict[str, Any]:
        """Prototype → structured action: entity arguments bind to the most urgent pending goal that asks for
        this skill (ready goals first, then priority, then DAG order); numbers are ``ratio × goal target``."""
        assert self.task is not None and self.state is not None
        pr = self.prototypes[index]
        k = self.skills.index(pr.skill)
        ready = self.builder.goal_ready(self.state)
        best: tuple[Any, ...] | None = None
        for i, g in enumerate(self.task.goals):
            if self.state.goal_done[i] or g.skill != pr.skill:
                continue
            if any(
                kind == "enum" and name in g.args and self._enum_index(k, g.args)[slot] != pr.enum[slot]
                for name, kind, slot, _ in self._params[k]
            ):
                continue
            key = (not ready[i], -g.priority, i)
            if best is None or key < best[0]:
                best = (key, g)
        params: dict[str, Any] = {}
        goal = best[1] if best is not None else None
        for name, kind, slot, p in self._params[k]:
            if kind == "pointer":
                ids = self.builder.node_ids[p.node_type]
                params[name] = goal.args.get(name, ids[0]) if goal is not None else ids[0]
            elif kind == "enum":
                choices = p.choices if isinstance(p, EnumParam) else [False, True]
                params[name] = choices[pr.enum[slot]] if slot < len(pr.enum) else choices[0]
        for name, kind, _, p in self._params[k]:
            if kind == "numeric":
                lo, hi = self._bounds(pr.skill, params, p)
                if goal is not None and name in goal.numeric:
                    params[name] = pr.numeric_ratio * goal.numeric[name]
                else:
                    params[name] = lo + pr.numeric_frac * (hi - lo)
        saved, self.prototypes = self.prototypes, []
        try:
            return self.encode_action(pr.skill, params)
        finally:
            self.prototypes = saved

    def describe_step(self, skill: str, params: dict[str, Any]) -> ExpertStep:
        """The mining view of a step (prototype signature plus numeric ratio/fraction)."""
        assert self.task is not None
        k = self.skills.index(skill)
        ratio, frac = 1.0, 0.5
        for name, kind, _, p in self._params[k]:
            if kind == "numeric" and name in params:
                lo, hi = self._bounds(skill, params, p)
                frac = (float(params[name]) - lo) / (hi - lo) if hi > lo else 0.5
                for g in self.task.goals:
                    if g.skill == skill and name in g.numeric and g.numeric[name]:
                        ratio = float(params[name]) / g.numeric[name]
                        break
        return ExpertStep(skill, tuple(self._enum_index(k, params)), ratio, frac)

    # ------------------------------------------------------------------ step
    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self._done or self.state is None or self.task is None or self.world is None:
            raise RuntimeError("step() called on a finished episode; call reset()")
        st, task, rw = self.state, self.task, self.config.rewards
        decision_reasons = self._reasons  # the masks this action was chosen under
        self._warnings = []
        st.step += 1
        k, params, err, msg = self.decode_action(action)
        skill = self.skills[k] if k >= 0 else "<invalid>"
        trace_id = f"{int(self._rng.integers(2**63)):016x}"
        masked = False
        res: ToolResult | None = None
        if err is None and not self._mask[k]:
            masked = True
            reasons = decision_reasons.get(skill, [])
            soft = any(r.startswith("soft") for r in reasons)
            err, msg = ("CIRCUIT_OPEN" if soft else "PRECONDITION_FAILED"), "masked: " + "; ".join(reasons)
        if err is None:
            res = self.executor.call(
                skill, params, intent_id=self.intent_id, trace_id=trace_id, world_id=self.world_id
            )
            code, latency, params = res.code, res.latency_ms, (res.params or params)
            if self.config.backend == "http":
                world, out = self.backend.fetch_world(self.world_id)
                if out.ok:
                    self.world = world
                else:
                    self._warnings.append(f"world not refreshed: {out.error_code}: {out.message}")
        else:
            code, latency = err, 0.0
        ok = res is not None and res.ok
        # Reward of the execution outcome.
        if masked:
            reward = rw.masked
        elif ok:
            reward = rw.success
        elif code == "TOOL_TIMEOUT":
            reward = rw.timeout
        elif code == "CIRCUIT_OPEN":
            reward = rw.breaker
        elif code in CALLER_ERRORS:
            reward = rw.bad_params
        else:
            reward = rw.upstream
        # Goals, risk, recall.
        satisfied: list[str] = []
        violation = False
        high_risk = False
        c = self.by_name.get(skill)
        if c is not None and c.risk.high_risk and (res is not None or masked):
            # A risky action the task forbids at this point (e.g. a refund before the inventory check) counts
            # even when the mask stopped it: the policy chose it.
            for rr in task.risk_rules:
                if rr.skill == skill and not any(
                    s == rr.before and all(p.get(f) == params.get(f) for f in rr.same)
                    for s, p in st.succeeded
                ):
                    high_risk = True
        if res is not None and c is not None:
            if ok:
                self.masks.record_success(st, skill, res.payload)
                st.succeeded.append((skill, params))
                if res.fallback_used is None:
                    satisfied, violation = self._match_goals(skill, params)
                if c.risk.high_risk and not satisfied:
                    high_risk = True
            for v in params.values():
                if isinstance(v, str) and v in task.entities and v not in self._recalled:
                    self._recalled.append(v)
        if res is not None:  # only calls that reached the gateway count as tool use
            st.calls[k] += 1
            st.last_call_time[k] = self.clock.now()
        st.last_ok, st.last_failed = ok, not ok
        st.consecutive_failures = 0 if ok else st.consecutive_failures + 1
        # A failure the injected fault caused (an availability error on a skill the fault hits), not the policy.
        injected = (
            res is not None
            and not ok
            and code not in CALLER_ERRORS
            and self.fault_kind is not None
            and (self.fault_kind != "outage" or skill in self._down)
        )
        cause = self._root_cause(skill, code, ok, masked, violation, high_risk, params)
        st.reflection[:] = 0.0  # the root cause of the LAST step only: zeros after a successful one
        if cause is not None:
            st.reflection[_CAUSE[cause]] = 1.0
        self._steps.append(
            StepRecord(
                skill=skill,
                args=dict(params),
                result_code=code,
                ok=ok,
                latency_ms=float(latency),
                attempts=res.attempts if res is not None else 0,
                fallback_used=res.fallback_used if res else None,
                masked=masked,
                high_risk=high_risk,
                risk_weight=c.risk.weight if (high_risk and c) else 0.0,
                goals_satisfied=satisfied,
                redundant=ok and not satisfied,
                trace_id=trace_id,
                injected=injected,
            )
        )
        # Dynamics: simulated time and drift.
        if isinstance(self.clock, SimClock):
            self.clock.advance(max(self.config.step_time_s, latency / 1000.0))
        if self.config.drift:
            self.world.drift(self._rng, task.protected_skus)
            outs = []
            if self.config.backend == "http":
                outs.append(self.backend.put_world(self.world_id, self.world))
            if self.config.simulate_tool_health and st.step % self.config.tool_health_refresh_steps == 0:
                outs.append(self.backend.set_faults(self._fault_config(self.world), world_id=self.world_id))
            self._warnings += [f"backend sync failed: {o.error_code}: {o.message}" for o in outs if not o.ok]
        # Termination.
        completed = bool(st.goal_done.all())
        failed = False
        if not completed:
            if ok and skill == "human.handoff":
                failed = True
            else:
                done = {g.id for g, d in zip(task.goals, st.goal_done, strict=True) if d}
                failed = any(
                    not d and not goal_feasible(g, self.world, done)
                    for g, d in zip(task.goals, st.goal_done, strict=True)
                )
        truncated = not (completed or failed) and st.step >= st.budget
        if ok and not satisfied:
            reward += rw.redundant
        if completed:
            reward += rw.completion
        elif failed:
            reward += rw.failure
        obs = self._observe(skill if res is not None else "")
        info: dict[str, Any] = {
            STEP_TRACE: {
                "trace_id": trace_id,
                "skill": skill,
                "args": dict(params),
                "result_code": code,
                "latency_ms": float(latency),
                "attempts": res.attempts if res is not None else 0,
                "fallback_used": res.fallback_used if res is not None else None,
                "masked": masked,
                "message": msg if res is None else res.message,
                "goals_satisfied": satisfied,
                "injected": injected,
                "mask_reasons": decision_reasons,
                "warnings": self._warnings + (res.warnings if res is not None else []),
            },
            MASK_REASONS: self._reasons,
        }
        if completed or failed or truncated:
            self._done = True
            info[EPISODE_RECORD] = episode_record_dict(self._episode_record(completed, failed, truncated))
            self.executor.forget_intent(self.intent_id)
        return obs, float(reward), completed or failed, truncated, info

    def _match_goals(self, skill: str, params: dict[str, Any]) -> tuple[list[str], bool]:
        assert self.task is not None and self.state is not None
        st = self.state
        ready = self.builder.goal_ready(st)
        best, matched = -1, False
        for i, g in enumerate(self.task.goals):
            if st.goal_done[i] or not g.matches(skill, params):
                continue
            matched = True
            if ready[i] and (best < 0 or g.priority > self.task.goals[best].priority):
                best = i
        if best >= 0:
            st.goal_done[best] = True
            gid = self.task.goals[best].id
            st.goals_done_order.append(gid)
            return [gid], False
        if matched:
            self._violations += 1
            return [], True
        return [], False

    def _root_cause(
        self,
        skill: str,
        code: str,
        ok: bool,
        masked: bool,
        violation: bool,
        high_risk: bool,
        params: dict[str, Any],
    ) -> str | None:
        """The step's root cause (one of ``ROOT_CAUSES``), or None for a successful step.

        A caller error is a *forgotten entity* only when an entity argument (a pointer: user, order, sku) is not
        one the customer mentioned; enum values are strings too, but a wrong one is a bad parameter.
        """
        assert self.task is not None
        if high_risk:
            return "risk_violation"
        if violation:
            return "dependency_violation"
        if ok:
            return None
        if code == "PRECONDITION_FAILED" or (masked and code != "CIRCUIT_OPEN"):
            return "missing_prerequisite"
        if code in CALLER_ERRORS:
            k = self._skill_idx.get(skill)
            pointers = self._params[k] if k is not None else []
            ents = [params[n] for n, kind, _, _ in pointers if kind == "pointer" and n in params]
            if any(v not in self.task.entities for v in ents):
                return "forgotten_entity"
            return "bad_parameters"
        return "tool_timeout"

    def _episode_record(self, completed: bool, failed: bool, truncated: bool) -> EpisodeRecord:
        assert self.task is not None and self.state is not None and self.world is not None
        task = self.task
        valid, missing = plan_validity(task.goals, self.state.goals_done_order, self._violations)
        u = self.world.user
        return EpisodeRecord(
            episode_id=self.episode_id,
            domain=self.config.domain,
            task_family=task.family,
            task_seed=task.seed,
            steps=self._steps,
            completed=completed,
            failed=failed,
            truncated=truncated,
            optimal_steps=task.optimal_steps,
            goals=[g.id for g in task.goals],
            goal_deps=goal_edges(task.goals),
            goals_done_order=list(self.state.goals_done_order),
            dag_valid=valid,
            dependency_violations=self._violations + missing,
            entities_mentioned=list(task.entities),
            entities_recalled=list(self._recalled),
            context={
                "level": float(u.level),
                "complaint_rate": u.complaint_rate,
                "verified": float(u.verified),
                "balance": u.balance,
            },
            policy_version=self.policy_version,
            intent_id=self.intent_id,
        )

    # ------------------------------------------------------------------ helpers for experts and tests
    @property
    def skill_mask(self) -> np.ndarray:
        """(K,) int8 mask of the current observation."""
        return self._mask

    @property
    def proto_mask(self) -> np.ndarray:
        return self._proto_mask

    @property
    def last_step(self) -> StepRecord | None:
        """The record of the last step of this episode (None before the first step)."""
        steps = getattr(self, "_steps", None)
        return steps[-1] if steps else None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.backend.drop_world(self.world_id)
            finally:
                self.executor.close()
