"""Experiment settings: one pydantic model per component, validated at load from ``configs/<experiment>.yaml``.

``agentic-ray train --config configs/quickstart.yaml`` loads an :class:`ExperimentSettings`; exactly one function,
:func:`agentic_ray.algorithms.build.build_algo_config`, turns it into an RLlib config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentic_ray.domains.caller_errors import CALLER_ERROR_CAUSES, INJECTED_CAUSES
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.models.aaac_model import AAACModelConfig
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig, layers_for_context

StageName = Literal["il", "rl", "reflection"]
ALL_STAGES: tuple[StageName, ...] = ("il", "rl", "reflection")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RaySettings(_Strict):
    address: str | None = Field(
        default=None, description="Cluster address; None starts an embedded local Ray."
    )
    num_cpus: int | None = Field(
        default=None, ge=1, description="CPUs of the embedded local Ray (None: all)."
    )
    num_env_runners: int = Field(default=0, ge=0, description="Remote EnvRunners (0: sample in the driver).")
    num_envs_per_env_runner: int = Field(default=4, ge=1, description="Vectorised envs per EnvRunner.")
    sample_timeout_s: float = Field(default=60.0, gt=0, description="RLlib sample timeout.")
    num_gpus_per_learner: float = Field(
        default=0.0, ge=0, description="GPUs for the learner (cuda when > 0)."
    )
    reseed_each_iteration: bool = Field(
        default=True,
        description="Reseed envs and action sampling from (seed, stage, iteration) at every training iteration, so "
        "a run resumed from a checkpoint samples what the uninterrupted run sampled.",
    )
    torch_threads: int = Field(
        default=1,
        ge=1,
        description="torch intra-op threads of the driver (BC, local learner). 1 on small shared machines: with 2 "
        "threads on 2 busy cores a train step was measured 20-50x slower (thread contention).",
    )


class AlgoSettings(_Strict):
    name: Literal["aaac", "ppo", "ppo_risk_folded", "ppo_lagrangian"] = Field(
        default="aaac",
        description="AAAC, or a baseline for comparison: RLlib's PPO (env reward), PPO with the risk stream folded "
        "into its reward, or PPO-Lagrangian (cost critic on the risk stream, learned multiplier).",
    )
    lr: float = Field(default=3e-4, gt=0, description="Learning rate.")
    gamma: float = Field(default=0.99, ge=0, le=1, description="Discount.")
    train_batch_size: int = Field(default=512, ge=1, description="Env steps per training iteration.")
    minibatch_size: int = Field(default=128, ge=1, description="SGD minibatch.")
    num_epochs: int = Field(default=4, ge=1, description="Epochs over each train batch.")
    entropy_coeff: float = Field(default=0.01, ge=0, description="Entropy bonus.")
    training: dict[str, Any] = Field(
        default_factory=dict,
        description="Further algorithm-specific .training() arguments (AAAC: w_reward, beta_0, lambda_short, "
        "lambda_long, lambda_length_threshold, policy_grad_clip, reward_critic_grad_clip, "
        "risk_critic_grad_clip, fixed_lambda, use_risk_critic, use_beta_kl, ...; PPO: clip_param, lambda_, ...; "
        "ppo_risk_folded: risk_fold_weight; ppo_lagrangian: cost_limit, lagrangian_lr, lagrangian_init).",
    )


class ImitationSettings(_Strict):
    demos: int = Field(default=1000, ge=1, description="Scripted-expert trajectories (seed 000: 1,000).")
    wrong_sample_share: float = Field(
        default=0.18, ge=0, lt=1, description="Share of controlled wrong samples (seed 000: 18%)."
    )
    epochs: int = Field(default=8, ge=1, description="Passes over the demonstrations.")
    minibatch_size: int = Field(default=256, ge=1, description="BC minibatch.")
    lr: float = Field(default=1e-3, gt=0, description="BC learning rate.")
    freeze_encoder: bool = Field(
        default=False, description="Train only the heads (seed 000 froze the backbone)."
    )
    reflection_coeff: float = Field(
        default=0.5,
        ge=0,
        description="Weight of the reflection head's root-cause cross-entropy during imitation.",
    )
    reflection_dropout: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Share of imitation rows whose reflection input is zeroed: the policy also learns the best "
        "fix without a diagnosis, so the CU ablation (reflection input off) measures what the diagnosis adds "
        "over that, not a policy on an input it never saw.",
    )
    evidence_dropout: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Share of imitation rows whose failure evidence (and with it the diagnosis) is zeroed: the "
        "policy also learns what to do with neither, so the evidence-uplift ablation compares inputs it saw.",
    )
    correction_weight: float = Field(
        default=1.0,
        gt=0,
        description="Weight in the imitation loss of an expert step taken right after a failed one (the "
        "correction the reflection input is for; one or two per wrong sample).",
    )
    caller_error_kinds: list[str] = Field(
        default_factory=lambda: list(CALLER_ERROR_CAUSES),
        description="Injected errors the caller_error demonstrations take in turn (CALLER_ERROR_CAUSES, and "
        "tool_error, the control whose fix is a plain retry).",
    )
    gate_tcsr: float = Field(default=0.8, ge=0, le=1, description="Gate: validation TCSR after IL.")

    @field_validator("caller_error_kinds")
    @classmethod
    def _known_kinds(cls, v: list[str]) -> list[str]:
        if not v or set(v) - set(INJECTED_CAUSES):
            raise ValueError(f"caller_error_kinds must be a non-empty subset of {INJECTED_CAUSES}, got {v}")
        return v

    max_repeats: int = Field(
        default=2, ge=0, description="IL repeats with more demonstrations if the gate fails."
    )
    demo_growth: float = Field(
        default=2.0, ge=1, description="Demonstrations multiply by this on each repeat."
    )


class RLSettings(_Strict):
    iterations: int = Field(default=20, ge=0, description="Training iterations of the RL stage.")
    gate_dvr: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="Gate after RL: the validation DVR of non-empty plans (dvr_progress: episodes that satisfied a "
        "goal with a valid plan ÷ episodes; plain DVR is 1.0 for a policy that does nothing).",
    )
    curriculum: bool = Field(
        default=True, description="Error-injection share decays 100% → 5% over the stage."
    )
    bc_lr: float = Field(
        default=0.0,
        ge=0,
        description="DAPG-style decaying behaviour cloning: after each RL iteration, BC steps on the imitation "
        "demonstrations at this learning rate times bc_decay**iteration (0: off). Keeps the imitated policy from "
        "collapsing while RL moves it.",
    )
    bc_decay: float = Field(
        default=0.9, gt=0, le=1, description="Per-iteration decay of the BC learning rate."
    )
    bc_minibatches: int = Field(default=4, ge=1, description="BC minibatches after each RL iteration.")


class ReflectionSettings(_Strict):
    iterations: int = Field(default=10, ge=0, description="Training iterations of the reflection stage.")
    l5_weight_start: float = Field(default=0.1, ge=0, description="L5 weight at the start of the stage.")
    l5_weight_end: float = Field(default=0.2, ge=0, description="L5 weight at its end.")
    reflection_coeff: float = Field(default=0.5, ge=0, description="Weight of the root-cause cross-entropy.")
    caller_error_share: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Share of the stage's training episodes with one injected caller error, so that the root-cause "
        "head trains on labelled failures (without it the batches held none: the imitated policy rarely fails).",
    )
    correction_demos: int = Field(
        default=0,
        ge=0,
        description="Failure demonstrations the stage imitates before its RL iterations (seed 000's controlled "
        "wrong samples, labelled with their root causes and corrected by the scripted expert: injected caller "
        "errors, garbled tool replies, reversed steps; the imitation demonstrations are mixed in). 0: none. The "
        "imitation stage's few wrong samples (18% of a limited set) are too few to teach each cause its fix.",
    )
    correction_epochs: int = Field(
        default=24, ge=1, description="Epochs over the correction demonstrations (and imitation's)."
    )
    correction_lr: float | None = Field(
        default=None,
        gt=0,
        description="Learning rate of the correction imitation. None: the imitation stage's (stages.il.lr). The "
        "correction imitation starts from the RL-tuned policy, which imitation's rate can carry far from it: on "
        "configs/inspection.yaml's three record runs, from their RL checkpoints, 0.002 took F1 0.754 -> 0.745 and "
        "completion 0.76 -> 0.63 (benchmarks/inspection.py); 1e-4 kept 0.754 and 0.76 but also left CU (the stage's "
        "evaluation, mean of the seeds) where RL had it, 0.66, against 0.74 at 0.002: the stage then changed no "
        "metric, so the config does not set it.",
    )
    freeze_encoder: bool = Field(
        default=False,
        description="Train only the heads in the correction imitation; the state encoder stays as RL left it. "
        "Measured on configs/inspection.yaml (seeds 0-2, reflection re-run from each RL checkpoint, 100 validation "
        "tasks): with the encoder trained, greedy completion fell from RL's 0.79 / 0.69 / 0.81 to 0.61 / 0.67 / "
        "0.70; heads only 0.74 / 0.72 / 0.82. A KL anchor to the stage's starting policy instead (weights 1 and 5) "
        "did worse (0.57 / 0.66 and 0.56 / 0.65 on seeds 0-1). Off by default: the e-commerce quickstart's "
        "reflection figures were measured with the encoder trained.",
    )
    fix_memory: str | None = Field(
        default="refine/memory",
        description="Error -> fix pairs that `agentic-ray refine` stored (a memory store folder, relative to the "
        "run directory unless absolute): at the stage's start each pair is written into the policy's fix prior "
        "(agentic_ray.refine.fix_memory.seed_fix_prior), so what production taught is the diagnosis's proposal "
        "from the first iteration. Skipped when the folder does not exist (None: never read).",
    )
    reflection_dropout: float = Field(
        default=0.3,
        ge=0,
        lt=1,
        description="Share of the correction imitation's rows whose reflection input is zeroed (see "
        "stages.il.reflection_dropout): the policy also learns the best fix without a diagnosis, so the CU "
        "ablation measures what the diagnosis adds over that.",
    )
    evidence_dropout: float = Field(
        default=0.15,
        ge=0,
        lt=1,
        description="Share of the correction imitation's rows whose failure evidence (and diagnosis) is zeroed, so "
        "the evidence-uplift ablation (evidence against neither) compares inputs the policy saw. Not tuned: chosen "
        "to leave most rows to the diagnosis and the evidence-only condition (reflection_dropout).",
    )
    correction_weight: float = Field(
        default=5.0,
        gt=0,
        description="Weight of a corrected step (right after a failed one) in the correction imitation.",
    )


class StagesSettings(_Strict):
    il: ImitationSettings = Field(default_factory=ImitationSettings, description="Stage 1.")
    rl: RLSettings = Field(default_factory=RLSettings, description="Stage 2.")
    reflection: ReflectionSettings = Field(default_factory=ReflectionSettings, description="Stage 3.")
    run: list[StageName] = Field(
        default_factory=lambda: list(ALL_STAGES), description="Stages to run, in order."
    )
    keep_better: bool = Field(
        default=True,
        description="No stage ships a worse policy: after a stage its checkpoint goes forward only if its "
        "validation completion is not worse than the policy it received, beyond the noise (exact one-sided "
        "McNemar test over the paired validation tasks, agentic_ray.stages.stage_guard); otherwise the earlier "
        "checkpoint goes forward and the run ends with status `regressed` (exit 5).",
    )
    regression_alpha: float = Field(
        default=0.05, gt=0, lt=1, description="One-sided significance level of that regression test."
    )
    guard_tasks_per_family: int | None = Field(
        default=None,
        ge=1,
        description="Validation tasks per family of that test: at each stage's end the policy is evaluated on this "
        "many (greedy, no CU ablation, no traces) beside the stage's last evaluation. None: the last evaluation's "
        "eval.tasks_per_family. On configs/inspection.yaml's 10 evaluation tasks the test could not see the "
        "reflection stage take completion from 0.79 to 0.61 on 100 (seed 0).",
    )


class EvalSettings(_Strict):
    every: int = Field(default=1, ge=1, description="Evaluate every k training iterations.")
    tasks_per_family: int = Field(default=5, ge=1, description="Validation tasks per family.")
    cu_ablation: bool = Field(default=True, description="Measure Correction Uplift (reflection on vs off).")
    cu_caller_error_share: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Share of the CU ablation's validation episodes with an injected caller error (the failures "
        "whose fix depends on the root cause).",
    )
    cu_min_pairs: int = Field(
        default=100, ge=0, description="First-failure pairs the CU ablation collects (more tasks until then)."
    )
    fault_share: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Share of validation episodes with injected faults (so failures exist).",
    )
    auto_pause_patience: int = Field(
        default=3, ge=1, description="Pause when DVR declines this many times in a row."
    )
    traces_per_eval: int = Field(
        default=4,
        ge=0,
        description="Episodes traced per evaluation as a sample, taken across families in turn.",
    )
    failed_traces_per_eval: int = Field(
        default=32,
        ge=0,
        description="Besides the sample, every episode that did not complete is traced, up to this many per "
        "evaluation.",
    )


class WandbSettings(_Strict):
    mode: Literal["offline", "online", "disabled"] = Field(default="offline", description="wandb mode.")
    project: str = Field(default="agentic-ray", description="wandb project.")


class ExperimentSettings(_Strict):
    name: str = Field(default="experiment", description="Run name (prefix of the run directory).")
    seed: int = Field(default=0, description="Seed of everything.")
    storage_path: str | None = Field(
        default=None,
        description=(
            "Where run directories are created, like Tune's storage_path: an absolute path, or a URI (s3://, gs://, "
            "file://, any pyarrow filesystem) for clusters. None: $AGENTIC_RAY_STORAGE_PATH, else "
            "~/agentic_ray_results. Never relative to the working directory (a Ray job's working_dir is deleted)."
        ),
    )
    ray: RaySettings = Field(default_factory=RaySettings, description="Ray cluster and rollout workers.")
    env: AgentTaskEnvConfig = Field(default_factory=AgentTaskEnvConfig, description="The environment.")
    model: AAACModelConfig = Field(default_factory=AAACModelConfig, description="Encoder and heads.")
    algo: AlgoSettings = Field(default_factory=AlgoSettings, description="Algorithm.")
    rewards: RewardPoolConfig | None = Field(
        default=None, description="Asynchronous reward pool; None uses the env's synchronous L1 reward only."
    )
    stages: StagesSettings = Field(default_factory=StagesSettings, description="Three-stage training.")
    eval: EvalSettings = Field(default_factory=EvalSettings, description="Evaluation.")
    wandb: WandbSettings = Field(default_factory=WandbSettings, description="Logging.")

    @model_validator(mode="after")
    def _check(self) -> ExperimentSettings:
        if self.algo.minibatch_size > self.algo.train_batch_size:
            raise ValueError("algo.minibatch_size must not exceed algo.train_batch_size")
        return self

    @model_validator(mode="after")
    def _layers_the_domain_feeds(self) -> ExperimentSettings:
        """Reward layers whose case facts the env's domain does not give are off for it (one warning each)."""
        if self.rewards is not None:
            from agentic_ray.domains import get_domain

            d = get_domain(self.env.domain)
            self.rewards = layers_for_context(self.rewards, d.reward_context_keys, d.name)
        return self


class SettingsError(ValueError):
    """A bad experiment file: the message names the file and the field."""


def load_settings(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentSettings:
    """Load and validate an experiment YAML (``overrides`` are merged on top, dotted keys allowed)."""
    return load_model(path, ExperimentSettings, overrides)


ModelT = TypeVar("ModelT", bound=BaseModel)


def load_model(path: str | Path, model: type[ModelT], overrides: dict[str, Any] | None = None) -> ModelT:
    """Load a YAML file into ``model`` with dotted ``overrides`` on top; errors name the file and the field.

    Raises:
        SettingsError: the file cannot be read, or a field is invalid.
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SettingsError(f"{path}: cannot read YAML: {e}") from e
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise SettingsError(
            f"{path}: the top level must be a mapping of settings, not a {type(raw).__name__}"
        )
    apply_overrides(raw, overrides or {})
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise SettingsError("\n".join(_describe(path, model, err) for err in e.errors())) from e


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys (``"algo.lr"``, ``"rewards.layers.execution.weight"``) in a raw settings dict, in place.

    Missing (or ``None``) intermediate levels are created; returns ``raw``.

    Raises:
        SettingsError: a level on the path is a value, not a section.
    """
    for k, v in overrides.items():
        d = raw
        *head, last = k.split(".")
        for i, h in enumerate(head):
            if d.get(h) is None:  # absent, or an optional section left out (``rewards: null``)
                d[h] = {}
            d = d[h]
            if not isinstance(d, dict):
                raise SettingsError(f"--set {k}: {'.'.join(head[: i + 1])} is not a section")
        d[last] = v
    return raw


def _describe(path: Path, model: type[BaseModel], err: Any) -> str:
    """One validation error as ``file: field a.b: problem``; an unknown field lists the known ones."""
    loc = tuple(err["loc"])
    field = ".".join(map(str, loc)) or "<top level>"
    if err["type"] != "extra_forbidden":
        return f"{path}: field {field}: {err['msg']}"
    known = _fields_at(model, loc[:-1])
    hint = f" (known fields here: {', '.join(known)})" if known else ""
    return f"{path}: field {field}: unknown field{hint}"


def _fields_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The field names of the pydantic model reached from ``model`` by ``loc`` (empty when not a model)."""
    import typing

    for part in loc:
        f = getattr(model, "model_fields", {}).get(part)
        if f is None:
            return []
        cands = [a for a in (f.annotation, *typing.get_args(f.annotation)) if isinstance(a, type)]
        model = next((a for a in cands if issubclass(a, BaseModel)), None)
        if model is None:
            return []
    return sorted(getattr(model, "model_fields", {}))
