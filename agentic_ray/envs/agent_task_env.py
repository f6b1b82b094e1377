"""``AgentTaskEnv``: the generic Gymnasium env in which a policy serves one request by calling tools.

Everything domain-specific comes through the :class:`~agentic_ray.domains.protocol.Domain` named by
``config.domain`` (registered as ``agentic_ray/<domain>-v1`` with Gymnasium and Tune). Each episode draws a task
and its world, pushes the world to the skill backend and lets the policy call skills. Every call goes through the
:class:`~agentic_ray.skills.executor.ToolExecutor` (contract check, clipping, business preconditions, retries,
circuit breaker, fallback, audit); the env owns the dynamics: what the agent knows (:class:`Knowledge`, grown by
tool results), goal bookkeeping, masks, the cheap synchronous reward, world drift and termination. Slow reward
layers are computed elsewhere from the ``EpisodeRecord`` in the last step's ``info[EPISODE_RECORD]``.

Partial information: at reset the observation holds the request (its goals, the facts the customer gave, the
entities it names by id, without fields). A lookup's result reveals entities and fields as the contract's typed
outputs declare; nothing else is ever shown.

Actions (RLlib sees exactly these; see :mod:`agentic_ray.graph_spec`): ``action_mode="structured"`` (default) is
``layout.action_space()`` (skill, pointers, list members, enums, numeric copy sources and free values);
``action_mode="prototype"`` is the same ``Dict`` over mined prototypes (``layout.prototype_action_space()``): a
prototype fixes the skill, its enum values and its numeric rule, and the policy chooses its entity arguments
among the revealed entities (:meth:`ActionCodec.ground_prototype`). An invalid action (masked skill or target, pointer to padding, enum out of
range, NaN) is never sent to a tool and never crashes the env: it returns a typed error step
(``PRECONDITION_FAILED``/``CIRCUIT_OPEN`` for a masked skill, ``INVALID_INPUT`` otherwise) with the penalty.

Reward (cheap, synchronous; seed 000's execution layer plus the completion signal): success +1, timeout -2,
bad parameters -3, open breaker -5, other availability errors -1, masked action -3; -1 more for a successful
call that advanced no goal (redundant, so it nets 0); +2 when the task is solved, -0.5 on an explicit failure.

Termination: the task is solved (every goal satisfied, or for ``end: world_state`` tasks the domain's final check
when the session ends); an explicit failure (a terminal skill such as a handoff while goals are pending, or a
pending goal made impossible); truncation when the step budget is spent.

Info: ``reset`` returns ``MASK_REASONS``, ``task_family``, ``task_seed``, ``optimal_steps``, ``fault_kind``,
``request`` (the text) and ``BACKEND_ERRORS`` (typed failures of pushing the world or its faults; a backend
failure never raises). ``step`` returns ``STEP_TRACE`` (trace_id, skill, args, result_code, latency_ms, attempts,
fallback_used, masked, message, goals_satisfied, injected, root_cause, revealed, the mask_reasons the action was
chosen under, warnings), ``MASK_REASONS`` for the returned observation, ``ENTITIES_PAST_CAP`` (``{node type: count}``)
once the agent knows more entities of a type than its node cap (the observation leaves the extra ones out) and, on
the last step, ``EPISODE_RECORD``.

Risk (``risk_mode``): ``hard`` (default) enforces every precondition. ``soft`` lifts the contracts' ``safety``
preconditions in the mask and the gateway: a high-risk skill then runs as a shortcut (one step fewer) and, with
the contract's ``consequence_probability``, causes a delayed consequence (a complaint, a chargeback) recorded in
``EpisodeRecord.consequences``; the env's reward never sees it.

Error injection (seed 000): with ``faults.enabled`` a share of episodes (``faults.share(progress)``) runs with one
fault kind; training sets the progress with :meth:`AgentTaskEnv.set_training_progress`.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_ray.domains import get_domain
from agentic_ray.domains.caller_errors import caller_error_for, caller_error_setup_for, stale_entities
from agentic_ray.domains.draws import bits63
from agentic_ray.domains.goal_dag import goal_edges, plan_validity
from agentic_ray.domains.knowledge import Knowledge, reveal_result
from agentic_ray.domains.protocol import EpisodeView, LastStep, Task, domain_options
from agentic_ray.envs.action_codec import ActionCodec, Prototype
from agentic_ray.envs.episode import (
    EpisodeState,
    attribute_root_cause,
    episode_record_dict,
    list_semantics,
    match_goals,
    slide_window,
)
from agentic_ray.envs.failure_evidence import failure_evidence
from agentic_ray.envs.faults import FaultScheduleConfig, backend_faults, draw_caller_error, draw_faults
from agentic_ray.envs.masks import MaskComputer, Masks, sla_arrays
from agentic_ray.envs.observation import ObservationBuilder, build_specs
from agentic_ray.envs.prototypes import load_prototypes
from agentic_ray.graph_spec import observation_space
from agentic_ray.keys import (
    BACKEND_ERRORS,
    CONTEXT_MEMORY_FACTS,
    ENTITIES_PAST_CAP,
    EPISODE_RECORD,
    MASK_REASONS,
    STEP_TRACE,
)
from agentic_ray.memory.memory_episode import WRITE_SKILL, FactEvent, KeyFact, MemoryEpisode
from agentic_ray.rewards.episode_record import EpisodeRecord, StepRecord
from agentic_ray.skills.audit_log import DEFAULT_WINDOW
from agentic_ray.skills.backends import FaultConfig, HttpBackend, PythonBackend
from agentic_ray.skills.contracts import EntityListParam, EntityParam, StringParam, load_contracts
from agentic_ray.skills.executor import CALLER_ERRORS, RealClock, SimClock, ToolExecutor, ToolResult
from agentic_ray.skills.preconditions import Call, precondition_status

__all__ = [
    "AgentTaskEnv",
    "AgentTaskEnvConfig",
    "FaultScheduleConfig",
    "OutcomeRewards",
    "episode_record_dict",
]


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
        default=-1.25,
        description="Added to a successful call that advanced no goal and revealed nothing the task needs (the "
        "seed's redundancy penalty). With the default a redundant call nets -0.25: at -1.0 (net 0) repeating a safe "
        "call cost nothing, and AAAC from scratch learned exactly that loop (greedy policy: sms.send 12 times; 12% "
        "completion at 12k env steps); at 0 or above it pays more than finishing the task (measured earlier: IL 65% "
        "completion -> 0% after RL).",
    )
    informative: float = Field(
        default=0.75,
        description="Potential-based shaping for lookups (Ng, Harada & Russell 1999): a successful call that "
        "advanced no goal but revealed, for the first time in the episode, an entity the task is about gets this "
        "bonus on top of `redundant` (with the defaults such a lookup nets 0.5, a goal 1.0), and the last step of the episode (completed, "
        "failed or truncated) gives the sum of these bonuses back. So the potential is `informative` per "
        "relevant entity revealed, 0 at the end: an episode's total reward is what it would be without the "
        "bonus, and the best policy is unchanged; the bonus only moves credit to the lookup that earned it. "
        "Without the give-back AAAC learned to harvest lookups and then end the episode on any terminal action "
        "(20% completion at 12k env steps).",
    )
    completion: float = Field(default=2.0, description="Added on the step that solves the task.")
    failure: float = Field(default=-0.5, description="Added on an explicit, unrecoverable failure.")


class AgentTaskEnvConfig(BaseModel):
    """Configuration of :class:`AgentTaskEnv` (RLlib's ``env_config`` dict is validated into this)."""

    model_config = ConfigDict(extra="forbid")

    domain: str = Field(default="ecommerce", description="Registered domain (agentic_ray.domains).")
    domain_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options passed to the domain's make_task, validated by the schema the domain declares "
        "(`options_model`); a domain that declares none takes none.",
    )
    contracts_path: str | None = Field(default=None, description="Contract YAML (default: the domain's).")
    action_mode: Literal["structured", "prototype"] = Field(
        default="structured",
        description="Structured skill+arguments Dict, or mined prototypes (skill, enum values and numeric rule "
        "fixed) whose entity arguments the policy still chooses.",
    )
    prototypes_path: str | None = Field(
        default=None, description="Prototype JSON (default: the domain's data/prototypes.json)."
    )
    families: list[str] | None = Field(
        default=None, description="Task families to draw (default: all of the domain's)."
    )
    skills_off: list[str] = Field(
        default_factory=list,
        description="Skills masked in every step of every episode (an ablation: e.g. the memory skills, to measure "
        "a policy without memory); each must be one of the domain's skills.",
    )
    split: Literal["train", "validation"] = Field(
        default="train",
        description="Training seeds, or the fixed validation seeds (round-robin over families).",
    )
    validation_per_family: int = Field(default=25, ge=1, description="Validation tasks per family.")
    budget_factor: float = Field(
        default=2.0, ge=1.0, description="Step budget = max(opt + extra, factor * opt)."
    )
    budget_extra: int = Field(default=4, ge=0, description="See budget_factor.")
    drift: bool = Field(default=True, description="Background world drift every step.")
    simulate_tool_health: bool = Field(
        default=False, description="Inject the domain's simulated per-skill latency and failure rates."
    )
    step_time_s: float = Field(default=1.0, ge=0, description="Simulated seconds per step (executor clock).")
    backend: Literal["python", "http"] = Field(default="python", description="Where tools run.")
    http_url: str | None = Field(default=None, description="Skill server URL for backend=http.")
    audit_path: str = Field(default=":memory:", description="SQLite file of the executor's audit log.")
    audit_window: int | None = Field(
        default=DEFAULT_WINDOW,
        ge=1,
        description="Calls an in-memory audit log keeps (the latest; null: every call, which grows without "
        "bound over a long run). A file (audit_path) keeps every call.",
    )
    risk_mode: Literal["hard", "soft"] = Field(
        default="hard",
        description="hard: every precondition is enforced. soft: safety preconditions are lifted, so high-risk "
        "shortcuts run and may cause delayed consequences (EpisodeRecord.consequences).",
    )
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

    @model_validator(mode="after")
    def _domain_and_families(self) -> AgentTaskEnvConfig:
        try:
            d = get_domain(self.domain)
        except KeyError as e:
            raise ValueError(str(e).strip('"')) from None
        domain_options(d, self.domain_options)
        if self.families is not None:
            bad = [f for f in self.families if f not in d.families]
            if bad or not self.families:
                raise ValueError(
                    f"unknown families {bad} for domain {self.domain!r}; known: {list(d.families)}"
                )
        return self

    def family_list(self) -> list[str]:
        return list(self.families) if self.families is not None else list(get_domain(self.domain).families)


class AgentTaskEnv(gym.Env):
    """Generic tool-using env over a registered domain (see the module docstring).

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
        self.domain = get_domain(config.domain)
        self.families = config.family_list()
        self.domain_options = domain_options(self.domain, config.domain_options)
        if config.contracts_path:
            self.contracts = load_contracts(config.contracts_path)
            self.contracts.check_rules(self.domain.fallback_rules())
        else:
            self.contracts = self.domain.contracts()
        self.by_name = self.contracts.by_name()
        self.prototypes: list[Prototype] = (
            load_prototypes(config.prototypes_path or self.domain.data_dir / "prototypes.json")
            if config.action_mode == "prototype"
            else []
        )
        self.graph_spec, self.layout = build_specs(
            self.domain.schema, self.contracts, [p.skill for p in self.prototypes]
        )
        self.observation_space = observation_space(self.graph_spec, self.layout)
        self.action_space = (
            self.layout.prototype_action_space() if self.prototypes else self.layout.action_space()
        )
        self.skills = tuple(s.name for s in self.layout.skills)
        self._skill_idx = {n: i for i, n in enumerate(self.skills)}
        if unknown := [n for n in config.skills_off if n not in self._skill_idx]:
            raise ValueError(f"skills_off names skills the domain does not have: {unknown}")
        self._off = [self._skill_idx[n] for n in config.skills_off]
        self.builder = ObservationBuilder(
            self.domain.schema, self.contracts, self.graph_spec, self.layout, self.domain.quantiles()
        )
        self.codec = ActionCodec(self.contracts, self.layout, self.graph_spec, self.builder)
        self.masks = MaskComputer(
            self.domain,
            self.contracts,
            self.layout,
            enforce_safety=config.risk_mode == "hard",
            soft_error_rate=config.soft_error_rate,
            soft_thresholds=config.soft_thresholds,
            soft_min_calls=config.soft_min_calls,
            soft_cooldown_s=config.soft_cooldown_s,
        )
        self._entity_params = {
            c.name: [(n, p) for n, p in c.input.items() if isinstance(p, EntityParam | EntityListParam)]
            for c in self.contracts.skills
        }
        self.list_semantics = list_semantics(self.contracts)
        # Fields string arguments copy (`source: <type>.<field>`), per type: revealing one of a relevant entity is
        # informative, as revealing the entity is (the address a later call copies).
        self._copied_fields: dict[str, set[str]] = {}
        for c in self.contracts.skills:
            for p in c.input.values():
                if isinstance(p, StringParam) and p.copy_field is not None:
                    self._copied_fields.setdefault(p.copy_field[0], set()).add(p.copy_field[1])
        self._proto_skill = np.array([self._skill_idx[p.skill] for p in self.prototypes], dtype=np.int64)
        self._terminal = frozenset(self.domain.schema.terminal_skills)
        self._env_id = f"env-{uuid.uuid4().hex[:12]}"
        self._episodes = 0
        self.world_id = self._env_id
        self.progress = 0.0
        self.policy_version = 0
        self._val_counter = 0
        self._rng = np.random.default_rng()
        self.intent_id = ""
        self.episode_id = ""
        self.fault_kind: str | None = None
        self._down: frozenset[str] = frozenset()
        self.caller_error: str | None = None  # the episode's caller error still to inject (issue 13)
        self._misheld: dict[tuple[str, str], str] = {}  # see misheld
        self._faults = FaultConfig()  # the episode's backend faults
        self._stale_refs: set[tuple[str, str]] = (
            set()
        )  # entities an injected stale error changed, not re-read
        self._stale_conflicts = False  # a generic stale error: the backend answers CONFLICT on _stale_refs
        self._closed = False
        self._warnings: list[str] = []
        self._build_executor()
        self.task: Task | None = None
        self.world: Any = None
        self.state: EpisodeState | None = None
        self.knowledge: Knowledge | None = None
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
            self.backend: Any = HttpBackend(self.config.http_url, world_from_dict=self.domain.world_from_dict)
            self.clock: Any = RealClock()
        else:
            self.backend = PythonBackend(measure_wall=False)
            self.clock = SimClock()
        self.executor = ToolExecutor(
            self.contracts,
            self.backend,
            audit_path=self.config.audit_path,
            audit_window=self.config.audit_window,
            clock=self.clock,
            rules=self.domain.fallback_rules(),
            enforce_safety=self.config.risk_mode == "hard",
        )
        self._sla_cache: dict[str, np.ndarray] | None = None
        self._sla_epoch = 0
        self._sla_unsettled: set[str] = set()
        self._sla_token = getattr(self, "_sla_token", 0)

    def _sla(self, called: str | None = "") -> dict[str, np.ndarray]:
        """Live SLA arrays (``called=None`` rebuilds them from scratch).

        Incremental otherwise, and identical to a rebuild: statistics change only with a call outcome, which
        moves the executor's :attr:`~ToolExecutor.stats_epoch`, so only the skills
        :meth:`~ToolExecutor.changed_since` names are re-read; a breaker also moves with time, but only out of
        open or half-open, so only those breakers are polled. Measured on e-commerce (random masked policy, each call
        timed): a rebuild of the changed skills' arrays plus a poll of every breaker cost 46 us a step (p50, 9% of
        env time); this costs 18 us (most steps make a call). ``self._sla_token`` moves whenever the arrays do (the builder caches the tool columns
        on it).
        """
        ex = self.executor
        if self._sla_cache is None or called is None:
            self._sla_epoch = ex.stats_epoch
            self._sla_cache = sla_arrays(ex.sla_stats(), self.skills)
            self._sla_unsettled = {
                n
                for i, n in enumerate(self.skills)
                if self._sla_cache["open"][i] or self._sla_cache["half_open"][i]
            }
            self._sla_token += 1
            return self._sla_cache
        cache = self._sla_cache
        if (epoch := ex.stats_epoch) != self._sla_epoch:
            names = ex.changed_since(self._sla_epoch)
            self._sla_epoch = epoch
            for n, x in ex.sla_stats(skills=names).items():  # written in place: no per-step arrays
                i = self._skill_idx[n]
                cache["p50"][i], cache["p95"][i] = x.p50_ms, x.p95_ms
                cache["error_rate"][i], cache["attempt_error_rate"][i] = x.error_rate, x.attempt_error_rate
                cache["calls"][i] = x.calls
                cache["open"][i], cache["half_open"][i] = (
                    x.breaker_state == "open",
                    x.breaker_state == "half_open",
                )
                if x.breaker_state == "closed":
                    self._sla_unsettled.discard(n)
                else:
                    self._sla_unsettled.add(n)
            self._sla_token += 1
        for n in list(self._sla_unsettled):  # time-driven moves: open -> half-open, a lost probe -> open
            i = self._skill_idx[n]
            b = ex.breaker_state(n)
            if (b == "open") != cache["open"][i] or (b == "half_open") != cache["half_open"][i]:
                cache["open"][i], cache["half_open"][i] = b == "open", b == "half_open"
                self._sla_token += 1
            if b == "closed":
                self._sla_unsettled.discard(n)
        return cache

    def set_training_progress(self, progress: float) -> None:
        """Training progress in [0, 1]; drives the error-injection schedule (faulty-episode share)."""
        self.progress = float(min(max(progress, 0.0), 1.0))

    def set_policy_version(self, version: int) -> None:
        """Learner update count of the acting policy (recorded in the EpisodeRecord)."""
        self.policy_version = int(version)

    def set_caller_error_share(self, share: float) -> None:
        """Share of the next episodes that carry one injected caller error (the reflection stage raises it)."""
        faults = self.config.faults.model_copy(
            update={"caller_error_share": float(min(max(share, 0.0), 1.0))}
        )
        self.config = self.config.model_copy(update={"faults": faults})

    def fault_share(self) -> float:
        """Current share of episodes with injected faults (0 when injection is disabled)."""
        return self.config.faults.share(self.progress) if self.config.faults.enabled else 0.0

    def _health(self) -> dict[str, tuple[float, float, float]] | None:
        return self.domain.tool_health(self.world) if self.config.simulate_tool_health else None

    def _push_faults(self) -> str | None:
        """Push the episode's faults to the backend for this world; the reason when it could not."""
        fc = backend_faults(
            self.config.faults,
            self.fault_kind,
            self._down,
            self.skills,
            self._health(),
            int(self._rng.integers(2**31)),
        )
        self._faults = fc
        out = self.backend.set_faults(fc, world_id=self.world_id)
        return None if out.ok else f"{out.error_code}: {out.message}"

    def _set_backend_faults(self, override: FaultConfig | None) -> None:
        """Replace this world's backend faults by ``override`` for one call (an injected ``tool_error``), or
        restore the episode's faults (None)."""
        fc = override if override is not None else self._faults
        if not (out := self.backend.set_faults(fc, world_id=self.world_id)).ok:
            self._warnings.append(f"set_faults: {out.error_code}: {out.message}")

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode.

        Args:
            seed: seeds every RNG of the env (task draw, drift, faults, trace ids) and rebuilds the executor, so
                that SLA history from earlier episodes cannot leak in.
            options: ``{"family": str, "task_seed": int}`` to pick a task explicitly; ``"task_given"``: a
                function from the drawn task to the one the agent is given in its world (e.g. the goal parser's
                reading of the customer's words, :meth:`~agentic_ray.parser.ParsedRequest.given_task`): the
                episode is observed and judged on that task.
        """
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._val_counter = 0
            self._build_executor()
        options = options or {}
        fams, d = self.families, self.domain
        if "family" in options or "task_seed" in options:
            family = options.get("family") or fams[int(self._rng.integers(len(fams)))]
            task_seed = (
                int(options["task_seed"]) if "task_seed" in options else d.draw_training_seed(self._rng)
            )
        elif self.config.split == "validation":
            i = self._val_counter
            self._val_counter += 1
            family = fams[i % len(fams)]
            seeds = d.validation_seeds(family, self.config.validation_per_family)
            task_seed = seeds[(i // len(fams)) % len(seeds)]
        else:
            family = fams[int(self._rng.integers(len(fams)))]
            task_seed = d.draw_training_seed(self._rng)
        if self.domain_options is None:
            world, task = d.make_task(family, task_seed)
        else:
            world, task = d.make_task(family, task_seed, options=self.domain_options)
        if (given := options.get("task_given")) is not None:
            task = given(task)
        if task.end_skill is not None and task.end_skill not in self.by_name:
            raise ValueError(
                f"domain {d.name}: task {family}/{task_seed} ends with {task.end_skill!r}, which is not a skill"
            )
        if self.config.risk_mode == "soft":
            task = task.without_safety_checks()
        if self.intent_id:
            self.executor.forget_intent(self.intent_id)
        self.world, self.task = world, task
        self.episode_id = uuid.UUID(int=bits63(self._rng) << 64 | bits63(self._rng)).hex
        self.intent_id = ToolExecutor.intent_hash(f"{task.request.text} #{self.episode_id}")
        # Every episode gets its own world id: a backend's idempotency cache (keyed by world and call) must not
        # replay the previous episode's replies when seeded trace ids repeat.
        if self._episodes:
            self.backend.drop_world(self.world_id)
        self._episodes += 1
        self.world_id = f"{self._env_id}-{self._episodes}"
        # Backend failures are typed outcomes, never exceptions: the episode starts and its calls fail typed.
        backend_errors = []
        if not (out := self.backend.put_world(self.world_id, world)).ok:
            backend_errors.append(f"put_world: {out.error_code}: {out.message}")
        self.fault_kind, self._down = draw_faults(
            self.config.faults, self.fault_share(), [g.skill for g in task.goals], self._rng
        )
        if (why := self._push_faults()) is not None:
            # Faults that could not be set are not injected, so the episode must not claim them.
            backend_errors.append(f"set_faults: {why}; running without injected faults")
            self.fault_kind, self._down = None, frozenset()
        self.caller_error, task = self._prepare_caller_error(
            draw_caller_error(self.config.faults, self._rng), world, task
        )
        self.task = task
        self._misheld = {}
        self._stale_refs = set()
        self._stale_conflicts = False
        if self.caller_error is not None and not (out := self.backend.put_world(self.world_id, world)).ok:
            backend_errors.append(
                f"put_world: {out.error_code}: {out.message}"
            )  # its set-up changed the world
        budget = max(
            task.optimal_steps + self.config.budget_extra,
            math.ceil(self.config.budget_factor * task.optimal_steps),
        )
        self.state = EpisodeState.new(budget, len(task.goals), len(self.skills))
        self.knowledge = Knowledge(self.domain.schema.type_names)
        for ref in task.request.mentioned:
            self.knowledge.mention(ref.type, ref.id)
        self.builder.begin_episode(task)
        self.masks.reset(task)
        self._steps: list[StepRecord] = []
        self._recalled: list[str] = []
        self._key_facts = [KeyFact.model_validate(f) for f in task.key_facts]
        self._fact_events: list[FactEvent] = []
        self._t0_s = self.clock.now()
        self._informed: set[tuple[str, ...]] = set()  # (type, id) and (type, id, copied field) revealed
        self._shaping = 0.0
        self._consequences: list[dict[str, Any]] = []
        self._done = False
        obs = self._observe()
        info = {
            MASK_REASONS: self._masks.reasons,
            "task_family": family,
            "task_seed": task_seed,
            "optimal_steps": task.optimal_steps,
            "fault_kind": self.fault_kind,
            "caller_error": self.caller_error,
            "request": task.request.text,
            BACKEND_ERRORS: backend_errors,
        }
        return obs, info

    def _observe(self) -> dict[str, np.ndarray]:
        assert self.task is not None and self.state is not None and self.knowledge is not None
        t0 = time.perf_counter()
        sla = self._sla()
        self.builder.refresh(self.knowledge)
        t1 = time.perf_counter()
        st = self.state
        m = self.masks.compute(
            self.knowledge,
            self.builder.node_ids,
            sla,
            self.clock.now(),
            st.last_call_time,
            sla_key=(id(self), self._sla_token),
        )
        t2 = time.perf_counter()
        if self._off:
            m = self._switch_off(m)
        self._masks = m
        extra = m.as_obs()
        if self.prototypes:
            pmask = m.skill_mask[self._proto_skill]
            if not pmask.any():  # a masked Discrete needs one valid entry; its step is a typed masked error
                pmask = pmask.copy()
                pmask[0] = 1
            extra["proto_mask"] = pmask
        obs = self.builder.build(
            self.task, self.knowledge, st, sla, extra, sla_key=(id(self), self._sla_token)
        )
        t3 = time.perf_counter()
        if self.record_timings:
            self.timings["mask_ms"].append((t2 - t1) * 1e3)
            self.timings["obs_ms"].append(((t3 - t2) + (t1 - t0)) * 1e3)
        return obs

    def _switch_off(self, m: Masks) -> Masks:
        """``m`` with the ``skills_off`` skills masked (a copy: the mask computer caches its arrays)."""
        mask = m.skill_mask.copy()
        reasons = dict(m.reasons)
        for k in self._off:
            mask[k] = 0
            reasons[self.skills[k]] = ["off: env config skills_off"]
        return dataclasses.replace(m, skill_mask=mask, reasons=reasons)

    # ------------------------------------------------------------------ actions
    def decode_action(self, action: Any) -> tuple[int, dict[str, Any], str | None, str, Any]:
        """Action -> ``(skill index, params, error code or None, message, structured action)``; never raises."""
        assert self.task is not None and self.knowledge is not None and self.state is not None
        if self.prototypes:
            try:
                p = int(action["skill"])
            except (TypeError, ValueError, KeyError, IndexError) as e:
                msg = f"a prototype action is a dict with the prototype index under 'skill' ({type(e).__name__})"
                return -1, {}, "INVALID_INPUT", msg, None
            if not 0 <= p < len(self.prototypes):
                return -1, {}, "INVALID_INPUT", f"prototype {p} out of range", None
            action = self.codec.ground_prototype(self.prototypes[p], action, self.knowledge)
        self._warnings += self.codec.raw_clipped(action)
        k, params, err, msg = self.codec.decode(action, self.task, self.knowledge)
        return k, params, err, msg, action

    def encode_action(self, skill: str, params: dict[str, Any]) -> Any:
        """Concrete ``(skill, params)`` -> an action of this env's action space (the inverse of decoding).

        In prototype mode: the prototype of the skill with the same enum values (the first of the skill's when
        none has them), with the call's entity arguments.

        Raises:
            KeyError: an entity argument names an entity the agent does not know.
        """
        assert self.knowledge is not None
        structured = self.codec.encode(skill, params, self.knowledge)
        if not self.prototypes:
            return structured
        k = self._skill_idx[skill]
        sig = self.codec.enum_signature(k, params)
        cands = [i for i, pr in enumerate(self.prototypes) if pr.skill == skill]
        index = next((i for i in cands if self.prototypes[i].enum == sig), cands[0] if cands else 0)
        return self.layout.prototype_action(index, structured["pointer"], structured["members"])  # type: ignore[arg-type]

    def _target_masked(self, k: int, action: Any, params: dict[str, Any]) -> str | None:
        """Why the chosen entity arguments violate the pointer masks (None if they do not); for a skill with a
        precondition over several arguments, also why no one earlier call admits them together (the pointer and
        list masks hold that rule's per-argument projection, see :mod:`agentic_ray.skills.preconditions`; a list
        member outside its projection fails the combination too)."""
        m, mp = self._masks, self.layout.max_pointer
        ptr = np.asarray(action.get("pointer", ()), dtype=np.int64).reshape(-1)
        for ps in self.codec.params[k]:
            if ps.kind in ("pointer", "copy") and ps.slot < len(ptr):
                j = int(ptr[ps.slot])
                if 0 <= j <= mp and not m.pointer_mask[k, ps.slot, j]:
                    if ps.kind == "copy":
                        return f"{ps.name}: the target has no revealed {ps.spec.source}"
                    return f"{ps.name}: the target fails a precondition"
        if self.masks.tracker.joint[k] and self.state is not None:
            ok, why = precondition_status(
                self.by_name[self.skills[k]],
                params,
                self.state.history,
                enforce_safety=self.config.risk_mode == "hard",
                contracts=self.by_name,
            )
            if not ok:
                return f"business: the arguments together fail a precondition: {why}"
        return None

    def mask_violation(self, action: Any) -> tuple[str, str] | None:
        """``(skill, reason)`` when the current masks forbid ``action`` (``step`` would answer it with a masked
        error and never send it; an action that does not decode counts too), else None. The demonstration
        collector checks every imitated action with it."""
        k, params, err, msg, structured = self.decode_action(action)
        skill = self.skills[k] if k >= 0 else "<invalid>"
        if err is not None:
            return skill, f"invalid: {msg}"
        if not self._masks.skill_mask[k]:
            return skill, "; ".join(self._masks.reasons.get(skill, ())) or "masked"
        why = self._target_masked(k, structured, params)
        return None if why is None else (skill, why)

    # ------------------------------------------------------------------ step
    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self._done or self.state is None or self.task is None or self.knowledge is None:
            raise RuntimeError("step() called on a finished episode; call reset()")
        st, task, rw, know = self.state, self.task, self.config.rewards, self.knowledge
        decision_reasons = self._masks.reasons  # the masks this action was chosen under
        self._warnings = []
        st.step += 1
        k, params, err, msg, structured = self.decode_action(action)
        skill = self.skills[k] if k >= 0 else "<invalid>"
        trace_id = f"{bits63(self._rng):016x}"  # = rng.integers(2**63), ~4 us cheaper
        masked, soft_masked = False, False
        res: ToolResult | None = None
        c = self.by_name.get(skill)
        if err is None and (not self._masks.skill_mask[k] or self._target_masked(k, structured, params)):
            masked = True
            reasons = decision_reasons.get(skill) or [self._target_masked(k, structured, params) or ""]
            soft_masked = bool(self._masks.soft[k])
            err, msg = (
                ("CIRCUIT_OPEN" if soft_masked else "PRECONDITION_FAILED"),
                "masked: " + "; ".join(reasons),
            )
        injected_cause = None
        held = False  # the call carries a look-alike id the agent holds (an earlier injected wrong entity)
        if err is None and self._misheld:
            sent = self._as_held(skill, params)
            held, params = sent != params, sent
        if err is None and c is not None and self.caller_error is not None:
            params, injected_cause = self._inject_caller_error(c, params)
        # A high-risk shortcut: the call skips a safety precondition (soft mode lets it run; hard mode masks it,
        # and the attempt still counts: the policy chose it).
        shortcut = bool(
            c is not None
            and c.risk.high_risk
            and err in (None, "PRECONDITION_FAILED")
            and not precondition_status(c, params, st.history, enforce_safety=True, contracts=self.by_name)[0]
            and precondition_status(c, params, st.history, enforce_safety=False, contracts=self.by_name)[0]
        )
        if err is None:
            override: FaultConfig | None = None
            if (
                injected_cause == "tool_error"
            ):  # the call's tool fails this once, every gateway retry included
                override = FaultConfig(per_skill={skill: FaultConfig(failure_rate=1.0)})
            elif self._stale_conflicts and stale_entities(self.contracts, skill, params, self._stale_refs):
                # a generic stale error: the entity changed under the agent; writes conflict until it is re-read
                override = FaultConfig(
                    per_skill={skill: FaultConfig(failure_rate=1.0, failure_code="CONFLICT")}
                )
            if override is not None:
                self._set_backend_faults(override)
            res = self.executor.call(
                skill, params, intent_id=self.intent_id, trace_id=trace_id, world_id=self.world_id
            )
            if override is not None:
                self._set_backend_faults(None)
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
        degraded = res is not None and res.fallback_used is not None
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
        satisfied: list[str] = []
        violation = False
        revealed: list[tuple[str, str]] = []
        high_risk = shortcut and (masked or ok)
        if res is not None and c is not None and ok:
            if not degraded:
                call = Call(skill, dict(params), dict(res.payload))
                st.history.append(call)
                self.masks.add(call)
                revealed = reveal_result(know, c, params, res.payload)
                for r in revealed:  # a lookup re-resolved an entity: its real id replaces the look-alike
                    self._misheld.pop(r, None)
                    self._stale_refs.discard(r)
                satisfied, violation = match_goals(
                    task,
                    st,
                    self.builder.goal_ready(st.goal_done),
                    skill,
                    params,
                    self.list_semantics,
                    res.payload,
                )
            if c.risk.high_risk and not satisfied:
                high_risk = True
            if shortcut and c.risk.consequence and self._rng.random() < c.risk.consequence_probability:
                self._consequences.append(
                    {"skill": skill, "kind": c.risk.consequence, "step": st.step - 1, "weight": c.risk.weight}
                )
        fresh: set[tuple[str, ...]] = {r for r in revealed if r[1] in task.relevant}
        if self._copied_fields:
            fresh |= {
                (t, e, f)
                for t, e in revealed
                if e in task.relevant
                for f in self._copied_fields.get(t, ())
                if f in know.fields(t, e)
            }
        fresh -= self._informed
        self._informed |= fresh
        informative = bool(fresh) and not satisfied
        self._shaping += rw.informative if (ok and informative) else 0.0
        entities: list[str] = []
        for n, _p in self._entity_params.get(skill, []):
            v = params.get(n)
            entities += [str(x) for x in (v if isinstance(v, list) else [v]) if x is not None]
        if res is not None:
            for v in entities:
                if v in task.relevant and v not in self._recalled:
                    self._recalled.append(v)
            st.calls[k] += 1
            st.last_call_time[k] = self.clock.now()
        st.last_ok, st.last_failed = ok, not ok
        st.consecutive_failures = 0 if ok else st.consecutive_failures + 1
        injected = (
            res is not None
            and not ok
            and code not in CALLER_ERRORS
            and self.fault_kind is not None
            and (self.fault_kind != "outage" or skill in self._down)
        )
        if (
            injected_cause is not None
            and not ok
            and (code in CALLER_ERRORS or injected_cause == "tool_error")
        ):
            cause: str | None = injected_cause  # the injected error is its own root cause
        elif held and not ok and code in CALLER_ERRORS:
            cause = "wrong_entity"  # still the held look-alike, whatever the gateway answered for it
        else:
            cause = attribute_root_cause(
                code=code,
                ok=ok,
                masked=masked,
                soft_masked=soft_masked,
                violation=violation,
                high_risk=high_risk,
                entities=entities,
                relevant=set(task.relevant),
                stale=not ok and code in CALLER_ERRORS and self._stale(skill, params),
            )
        st.set_cause(cause)
        st.evidence = failure_evidence(len(self.skills), k, c, params, code, know)
        st.last = LastStep(skill, dict(params), code, cause)
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
                redundant=ok and not satisfied and not informative,
                trace_id=trace_id,
                injected=injected or (injected_cause is not None and not ok),
                caller_error=injected_cause,
                root_cause=cause,
            )
        )
        # The call was made: a key fact's slot it fills is a use (memory metrics, L4); most tasks have no key facts.
        if res is not None and self._key_facts:
            self._record_fact_uses(len(self._steps) - 1, skill, params)
        # Dynamics: simulated time and drift.
        if isinstance(self.clock, SimClock):
            self.clock.advance(max(self.config.step_time_s, latency / 1000.0))
        if self.config.drift:
            self.domain.step_world(self.world, self._rng, task)
            if (
                self.config.backend == "http"
                and not (out := self.backend.put_world(self.world_id, self.world)).ok
            ):
                self._warnings.append(f"backend sync failed: {out.error_code}: {out.message}")
        # Termination.
        all_done = all(st.goal_done.tolist())  # = bool(.all()): ~0.15 vs ~1.5 us on a few goals
        ended = ok and not degraded and skill == task.end_skill  # the task's declared end
        terminal = ok and not degraded and (skill in self._terminal or ended)
        completed = False
        failed = False
        if task.end_skill is not None:  # an explicit end: only its call can complete the task
            completed = (
                ended
                and all_done
                and (task.end != "world_state" or self.domain.final_check(self.world, task))
            )
        elif task.end == "goals":
            completed = all_done
        elif all_done or terminal:
            completed = all_done and self.domain.final_check(self.world, task)
        if not completed:
            if terminal or (task.end == "world_state" and all_done and task.end_skill is None):
                failed = True
            else:
                done = {g.id for g, d in zip(task.goals, st.goal_done, strict=True) if d}
                failed = any(
                    not d and not self.domain.goal_feasible(self.world, task, g, done)
                    for g, d in zip(task.goals, st.goal_done, strict=True)
                )
        truncated = not (completed or failed) and st.step >= st.budget
        if ok and not satisfied:
            reward += rw.redundant + (rw.informative if informative else 0.0)
        if completed:
            reward += rw.completion
        elif failed:
            reward += rw.failure
        if completed or failed or truncated:
            reward -= self._shaping  # the shaping potential returns to 0 (see OutcomeRewards.informative)
        slide_window(task, st.step, know)
        obs = self._observe()
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
                "caller_error": injected_cause,
                "root_cause": cause,
                "revealed": [list(r) for r in revealed],
                "mask_reasons": decision_reasons,
                "warnings": self._warnings + (res.warnings if res is not None else []),
            },
            MASK_REASONS: self._masks.reasons,
        }
        if self.builder.past_cap:
            info[ENTITIES_PAST_CAP] = dict(self.builder.past_cap)
        if completed or failed or truncated:
            self._done = True
            info[EPISODE_RECORD] = episode_record_dict(self._episode_record(completed, failed, truncated))
            self.executor.forget_intent(self.intent_id)
        return obs, float(reward), completed or failed, truncated, info

    def _inject_caller_error(self, c: Any, params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The episode's caller error on this call when the domain can make it here (see
        :meth:`~agentic_ray.domains.protocol.Domain.caller_error`): ``(params to run, its cause or None)``.

        A wrong call the gateway would reject for a precondition instead is not injected here (its cause would be
        ``missing_prerequisite``); the next call may carry it. A wrong entity is the exception: every call the agent
        makes on the entity carries the look-alike (see :attr:`misheld`), so whatever the gateway answers for it
        (``NOT_FOUND`` from the tool, or ``PRECONDITION_FAILED`` when a precondition names the entity) is that
        error's answer."""
        assert self.task is not None and self.state is not None and self.caller_error is not None
        cause = self.caller_error
        new, generic = caller_error_for(
            self.domain, self.world, self.task, c.name, dict(params), cause, self._rng
        )
        if new is None or (
            cause != "wrong_entity"
            and not precondition_status(
                c,
                new,
                self.state.history,
                enforce_safety=self.config.risk_mode == "hard",
                contracts=self.by_name,
            )[0]
        ):
            return params, None
        self.caller_error = None
        if cause == "stale_information":  # stale until a lookup touches the entity again
            self._stale_refs |= {
                (p.node_type, str(params[n]))
                for n, p in self._entity_params.get(c.name, [])
                if isinstance(params.get(n), str)
            }
            self._stale_conflicts = generic  # the generic form: the backend answers CONFLICT meanwhile
        if cause == "wrong_entity":
            for n, p in self._entity_params.get(c.name, []):
                if isinstance(params.get(n), str) and new.get(n) != params[n]:
                    self._misheld[(p.node_type, params[n])] = str(new[n])
        if (
            self.config.backend == "http"
            and not (out := self.backend.put_world(self.world_id, self.world)).ok
        ):
            self._warnings.append(f"backend sync failed: {out.error_code}: {out.message}")
        return new, cause

    def _prepare_caller_error(self, cause: str | None, world: Any, task: Task) -> tuple[str | None, Task]:
        """``(cause, task)`` of the episode's caller error after the domain's set-up
        (:meth:`~agentic_ray.domains.protocol.Domain.caller_error_setup`): the drawn cause, or, when the task
        cannot carry it, another one drawn by weight among those it can; None when it can carry none."""
        if cause is None:
            return None, task
        weights = self.config.faults.caller_errors
        others = [c for c in weights if c != cause]
        if others:
            w = np.array([weights[c] for c in others], dtype=np.float64)
            others = [
                others[int(i)]
                for i in self._rng.choice(len(others), len(others), replace=False, p=w / w.sum())
            ]
        for c in [cause, *others]:
            prepared = caller_error_setup_for(self.domain, world, task, c, self._rng)
            if prepared is not None:
                return c, prepared
        return None, task

    def _as_held(self, skill: str, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with every entity id the agent holds a look-alike of (an injected ``wrong_entity``)
        replaced by that look-alike: what the agent actually sends until a lookup re-resolves the entity."""
        out = dict(params)
        for n, p in self._entity_params.get(skill, []):
            v = out.get(n)
            if isinstance(v, list):
                out[n] = [self._misheld.get((p.node_type, str(x)), x) for x in v]
            elif isinstance(v, str):
                out[n] = self._misheld.get((p.node_type, v), v)
        return out

    @property
    def misheld(self) -> dict[tuple[str, str], str]:
        """``(entity type, real id) -> look-alike id`` the agent sends instead (an injected ``wrong_entity``,
        until a successful lookup reveals the real id again). The observation does not show it: the agent's node
        for the entity is unchanged, only the id its calls carry is wrong."""
        return dict(self._misheld)

    def _stale(self, skill: str, params: dict[str, Any]) -> bool:
        """Whether an entity the call refers to was revealed with values that have changed since (or was changed
        by an injected stale error and not looked up since)."""
        assert self.knowledge is not None
        for n, p in self._entity_params.get(skill, []):
            vals = params.get(n)
            for v in vals if isinstance(vals, list) else [vals]:
                if not isinstance(v, str):
                    continue
                if (p.node_type, v) in self._stale_refs:
                    return True
                known = self.knowledge.fields(p.node_type, v)
                truth = self.domain.entity_fields(self.world, p.node_type, v) or {}
                if any(f in truth and truth[f] != val for f, val in known.items()):
                    return True
        return False

    def _record_fact_uses(self, turn: int, skill: str, params: dict[str, Any]) -> None:
        """One ``use`` event (a ``write`` for a memory note) per key-fact slot this call's parameters fill (its
        value as sent), at the simulated time since the episode started (hours, the clock of the facts'
        ``confirmed_at_h``)."""
        at_h = (self.clock.now() - self._t0_s) / 3600.0
        kind: Literal["use", "write"] = "write" if skill == WRITE_SKILL else "use"
        for slot in dict.fromkeys(f.slot for f in self._key_facts):
            v = params.get(slot)
            if isinstance(v, str | int):
                self._fact_events.append(FactEvent(turn=turn, slot=slot, kind=kind, value=str(v), at_h=at_h))

    def _episode_record(self, completed: bool, failed: bool, truncated: bool) -> EpisodeRecord:
        assert self.task is not None and self.state is not None
        task, st = self.task, self.state
        valid, missing = plan_validity(task.goals, st.goals_done_order, st.violations)
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
            goals_done_order=list(st.goals_done_order),
            goals_void=list(st.goals_void),
            dag_valid=valid,
            dependency_violations=st.violations + missing,
            entities_mentioned=list(task.relevant),
            entities_recalled=list(self._recalled),
            context=self._context(),
            policy_version=self.policy_version,
            intent_id=self.intent_id,
            consequences=list(self._consequences),
            entities_past_cap=dict(self.builder.past_cap),
        )

    def _context(self) -> dict[str, Any]:
        """The domain's reward context, plus the key facts and their uses when the task has key facts."""
        ctx: dict[str, Any] = dict(self.domain.reward_context(self.world))
        if self._key_facts:
            ctx[CONTEXT_MEMORY_FACTS] = MemoryEpisode(
                facts=self._key_facts, events=self._fact_events
            ).to_context()
        return ctx

    # ------------------------------------------------------------------ views for experts and tests
    def view(self) -> EpisodeView:
        """The episode state through the protocol (what a domain expert reads)."""
        assert self.task is not None and self.state is not None and self.knowledge is not None
        st = self.state
        return EpisodeView(
            task=self.task,
            knowledge=self.knowledge,
            skills=self.skills,
            contracts=self.by_name,
            goal_done=st.goal_done,
            ready=self.builder.goal_ready(st.goal_done),
            history=st.history,
            last=st.last,
            skill_mask=self._masks.skill_mask,
            step=st.step,
            budget=st.budget,
        )

    @property
    def skill_mask(self) -> np.ndarray:
        """(K,) int8 mask of the current observation."""
        return self._masks.skill_mask

    @property
    def current_masks(self) -> Masks:
        return self._masks

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
