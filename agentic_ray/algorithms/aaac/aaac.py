"""AAAC (Adaptive Advantage Actor-Critic) on RLlib's new API stack: config and algorithm.

AAAC, as described in seed 002 (``docs/seed-digest.md`` §B):

* TD(λ) advantages with λ chosen per episode from its length (short → 0.95, long → 0.55);
* two critics, one per stream: the reward critic on the env/reward stream, the risk critic on the risk stream
  (``episode.custom_data[keys.RISK_REWARDS]``; zeros if absent); ``A = w_reward·A_reward + (1−w_reward)·A_risk``,
  each stream's advantage standardised over the batch first (``standardize_streams``);
* a progressive KL penalty to the behaviour policy, ``β_t = β_0·0.999^t`` (t = policy optimisation steps, one per
  SGD minibatch update; see ``AAACLearner``), plus an entropy
  bonus and importance-weighted advantages for episodes that arrive off-policy (clipped surrogate by default,
  truncated weights as an option);
* one optimizer per parameter group so each gets its own gradient clip (risk critic 1.0, reward critic 2.0).

Ablations (one component each, for ``benchmarks/aaac_vs_ppo.py``): ``fixed_lambda`` (one λ for every episode instead
of the length rule), ``use_risk_critic=False`` (one critic: the advantage is the reward critic's alone and the risk
critic is not trained) and ``use_beta_kl=False`` (no β-KL term).

Files follow RLlib's layout: this module (``AAACConfig``, ``AAAC``), ``aaac_learner.py`` (connectors, β counter),
``torch/aaac_torch_learner.py`` (the loss), ``two_critic_advantages.py`` (the advantage connector),
``functional.py`` (the maths), ``two_critic_api.py`` (what a module must implement) and
``default_aaac_rl_module.py`` (an MLP module for plain envs).

Episode fragments: AAAC samples ``batch_mode="complete_episodes"`` by default, so λ sees true episode lengths.
With ``"truncate_episodes"`` a fragment's length (``t_started`` + its steps) is only a lower bound on the episode
length, so early fragments of long episodes may get ``lambda_short``; ``validate()`` warns about this.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.execution.rollout_ops import synchronous_parallel_sample
from ray.rllib.utils.annotations import override
from ray.rllib.utils.from_config import _NotProvided
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)
from typing_extensions import Self

if TYPE_CHECKING:
    from ray.rllib.core.learner.learner import Learner

__all__ = ["AAAC", "AAACConfig"]

logger = logging.getLogger(__name__)


class AAACConfig(AlgorithmConfig):
    """Configuration of :class:`AAAC`.

    Example::

        config = (
            AAACConfig()
            .environment("CartPole-v1")
            .training(w_reward=0.7, beta_0=0.1, lambda_length_threshold=8)
        )
        algo = config.build_algo()
        algo.train()

    AAAC-specific attributes (set through :meth:`training`; Tune may also set them directly):
    ``w_reward``, ``standardize_streams``, ``stream_std_floor``, ``lambda_short``, ``lambda_long``, ``lambda_length_threshold``, ``lambda_smooth_width``,
    ``beta_0``, ``beta_decay``, ``entropy_coeff``, ``is_ratio_cap``, ``policy_clip``, ``vf_loss_coeff``, ``critic_lr``,
    ``policy_grad_clip``, ``reward_critic_grad_clip``, ``risk_critic_grad_clip``, ``anchor_kl_coeff``,
    ``normalize_values``, ``value_norm_decay``,
    ``reflection_trains_encoder``; the ablation switches ``fixed_lambda``, ``use_risk_critic`` and ``use_beta_kl``.
    ``w_risk`` is not stored: it is
    always ``1 − w_reward`` (see :attr:`w_risk`).
    """

    def __init__(self, algo_class: type[Algorithm] | None = None) -> None:
        super().__init__(algo_class=algo_class or AAAC)

        # RLlib settings with AAAC defaults.
        self.lr = 3e-4
        self.gamma = 0.99
        self.train_batch_size_per_learner = 2000  # type: ignore[assignment]
        self.num_epochs = 4
        self.minibatch_size = 128  # type: ignore[assignment]
        self.shuffle_batch_per_epoch = True
        self.batch_mode = "complete_episodes"
        self.rollout_fragment_length = "auto"  # type: ignore[assignment]
        self.grad_clip = None  # replaced by the three per-group clips below

        # Advantage: two streams, TD(λ) with λ by episode length.
        self.w_reward = 0.7
        # Each stream's advantage is standardised before the mix, so w_reward is each stream's share of the
        # advantage's spread (mixed raw, the e-commerce risk stream's spread was ~5% of the reward stream's and
        # moved the mix by ~2%; see two_critic_advantages.py).
        self.standardize_streams = True
        self.stream_std_floor = 0.05
        self.lambda_short = 0.95
        self.lambda_long = 0.55
        self.lambda_length_threshold = 8.0
        self.lambda_smooth_width: float | None = None
        # Ablation switches (defaults: the full algorithm).
        self.fixed_lambda: float | None = None
        self.use_risk_critic = True
        self.use_beta_kl = True

        # Policy objective.
        self.beta_0 = 0.1
        self.beta_decay = 0.999
        self.entropy_coeff = 0.01
        self.is_ratio_cap = 1.0
        # Trust region: with None (truncated IS alone) the policy's entropy collapsed within ~8k env steps on the
        # e-commerce env; see the notes in benchmarks/results/aaac_vs_ppo.md.
        self.policy_clip: float | None = 0.2
        self.vf_loss_coeff = 1.0
        # Critics learn normalised λ-returns (moving mean/std): an unnormalised tanh critic could not follow
        # CartPole's returns (see value_normalizer.py).
        self.normalize_values = True
        self.value_norm_decay = 0.9
        self.reflection_coeff = 0.0  # root-cause cross-entropy (stage 3 turns it on)
        # Its gradient stays out of the policy encoder: through it, a few critic-only updates after imitation
        # (policy terms off) moved the policy (benchmarks/results/quickstart.md).
        self.reflection_trains_encoder = False
        self.critic_warmup_updates = (
            0  # learner updates that train only the critics (e.g. right after imitation)
        )
        # KL(π_ref‖π) to a frozen reference policy the learner snapshots (the pipeline: the imitation policy).
        self.anchor_kl_coeff = 0.0

        # Optimizers: one per parameter group, each with its own global-norm gradient clip.
        self.critic_lr: float | None = None
        self.policy_grad_clip = 0.5
        self.reward_critic_grad_clip = 2.0
        self.risk_critic_grad_clip = 1.0

    @property
    def w_risk(self) -> float:
        """Weight of the risk advantage, always ``1 − w_reward`` (derived, so sweeping ``w_reward`` suffices)."""
        return 1.0 - float(self.w_reward)

    @override(AlgorithmConfig)
    def training(
        self,
        *,
        w_reward: float | _NotProvided = NotProvided,
        standardize_streams: bool | _NotProvided = NotProvided,
        stream_std_floor: float | _NotProvided = NotProvided,
        lambda_short: float | _NotProvided = NotProvided,
        lambda_long: float | _NotProvided = NotProvided,
        lambda_length_threshold: float | _NotProvided = NotProvided,
        lambda_smooth_width: float | _NotProvided | None = NotProvided,
        fixed_lambda: float | _NotProvided | None = NotProvided,
        use_risk_critic: bool | _NotProvided = NotProvided,
        use_beta_kl: bool | _NotProvided = NotProvided,
        beta_0: float | _NotProvided = NotProvided,
        beta_decay: float | _NotProvided = NotProvided,
        entropy_coeff: float | _NotProvided = NotProvided,
        is_ratio_cap: float | _NotProvided = NotProvided,
        policy_clip: float | _NotProvided | None = NotProvided,
        vf_loss_coeff: float | _NotProvided = NotProvided,
        normalize_values: bool | _NotProvided = NotProvided,
        value_norm_decay: float | _NotProvided = NotProvided,
        reflection_coeff: float | _NotProvided = NotProvided,
        reflection_trains_encoder: bool | _NotProvided = NotProvided,
        critic_warmup_updates: int | _NotProvided = NotProvided,
        critic_lr: float | _NotProvided | None = NotProvided,
        policy_grad_clip: float | _NotProvided = NotProvided,
        reward_critic_grad_clip: float | _NotProvided = NotProvided,
        risk_critic_grad_clip: float | _NotProvided = NotProvided,
        anchor_kl_coeff: float | _NotProvided = NotProvided,
        **kwargs: Any,
    ) -> Self:
        """Sets AAAC's training settings (plus any of ``AlgorithmConfig.training``'s, e.g. ``lr``, ``gamma``).

        Args:
            w_reward: Weight of the reward-stream advantage in ``[0, 1]``; the risk weight is ``1 − w_reward``.
            standardize_streams: Standardise each stream's advantage over the batch before mixing (default
                True), so ``w_reward`` is each stream's share of the advantage's spread; False mixes the raw
                advantages in their streams' units (then standardises the mix, as before).
            stream_std_floor: Lower bound (in the stream's units, ``> 0``) on each stream's standard deviation
                when it is standardised, so a silent stream's critic noise is not blown up to unit variance.
            lambda_short: TD(λ) λ for short episodes, in ``[0, 1]``.
            lambda_long: TD(λ) λ for long episodes, in ``[0, 1]``.
            lambda_length_threshold: Episodes with at most this many steps are short.
            lambda_smooth_width: ``None`` for a hard switch at the threshold, else the width (steps, > 0) of a
                sigmoid interpolation between the two λs.
            fixed_lambda: Ablation of the adaptive λ: ``None`` (default) chooses λ per episode from its length; a
                value in ``[0, 1]`` is used for every episode (the λ settings above are then ignored).
            use_risk_critic: Ablation of the second critic: with ``False`` the advantage is the reward critic's
                alone (``w_reward`` and the risk stream are ignored) and the risk critic gets no loss.
            use_beta_kl: Ablation of the progressive KL penalty: with ``False`` the ``β_t·KL(μ‖π)`` term is left out
                (β is logged as 0).
            beta_0: Initial KL-penalty coefficient, ``>= 0``.
            beta_decay: β multiplies by this after each policy optimisation step (SGD minibatch update), in
                ``(0, 1]`` (0.999 per the seed).
            entropy_coeff: Entropy bonus coefficient, ``>= 0``.
            is_ratio_cap: Truncation ``ρ̄`` of the importance weights ``min(π/μ, ρ̄)``, ``> 0``.
            policy_clip: ``ε`` in ``(0, 1)`` (default 0.2) for the clipped importance-weighted surrogate
                ``min(ρA, clip(ρ, 1−ε, 1+ε)A)``; ``None`` for truncated importance weights ``min(ρ, ρ̄)·A·∇log π``
                alone (no trust region besides the KL penalty; see the torch learner's docstring).
            vf_loss_coeff: Weight of both critics' losses in the summed loss, ``>= 0``. With separate critics and
                Adam it mostly matters for gradients into a shared encoder.
            normalize_values: The critics learn their λ-returns normalised by a moving mean and standard
                deviation (default True); advantages and logged targets stay in the streams' own units.
            value_norm_decay: Weight of the past in the normalisers' moving averages (one step per learner
                update), in ``[0, 1)``.
            reflection_coeff: Weight of the reflection head's root-cause cross-entropy (0: off), ``>= 0``.
            reflection_trains_encoder: Let the cross-entropy's gradient reach the policy encoder the reflection
                head reads (default False: the head learns on the policy's detached features, so the root-cause
                loss cannot reshape the features a trained policy acts on). Only a head that reads the state has
                one (``reflection_head_input="evidence_and_state"``); the default head reads the failure evidence.
            critic_warmup_updates: The first this many learner updates train only the two critics (policy,
                KL and entropy terms weighted 0), so a policy from imitation is not pushed around by the
                advantages of untrained critics.
            critic_lr: Learning rate of both critic optimizers; ``None`` uses ``lr``.
            policy_grad_clip: Global-norm clip of the policy group's gradients (incl. a shared encoder), ``> 0``.
            reward_critic_grad_clip: Global-norm clip of the reward critic's gradients, ``> 0``.
            risk_critic_grad_clip: Global-norm clip of the risk critic's gradients, ``> 0``.
            anchor_kl_coeff: Weight of ``KL(π_ref‖π)``, a penalty for leaving a frozen reference policy that
                :meth:`AAACLearner.set_reference_policy` snapshots (the three-stage pipeline snapshots the
                imitation policy when RL starts), ``>= 0``; 0 turns it off. Unlike the β term, whose μ moves with
                every update, this one keeps fine-tuning from drifting away from what imitation got right.
            **kwargs: Forwarded to ``AlgorithmConfig.training``.

        Returns:
            This config, updated.
        """
        super().training(**kwargs)
        if not isinstance(w_reward, _NotProvided):
            self.w_reward = w_reward
        if not isinstance(standardize_streams, _NotProvided):
            self.standardize_streams = standardize_streams
        if not isinstance(stream_std_floor, _NotProvided):
            self.stream_std_floor = stream_std_floor
        if not isinstance(lambda_short, _NotProvided):
            self.lambda_short = lambda_short
        if not isinstance(lambda_long, _NotProvided):
            self.lambda_long = lambda_long
        if not isinstance(lambda_length_threshold, _NotProvided):
            self.lambda_length_threshold = lambda_length_threshold
        if not isinstance(lambda_smooth_width, _NotProvided):
            self.lambda_smooth_width = lambda_smooth_width
        if not isinstance(fixed_lambda, _NotProvided):
            self.fixed_lambda = fixed_lambda
        if not isinstance(use_risk_critic, _NotProvided):
            self.use_risk_critic = use_risk_critic
        if not isinstance(use_beta_kl, _NotProvided):
            self.use_beta_kl = use_beta_kl
        if not isinstance(beta_0, _NotProvided):
            self.beta_0 = beta_0
        if not isinstance(beta_decay, _NotProvided):
            self.beta_decay = beta_decay
        if not isinstance(entropy_coeff, _NotProvided):
            self.entropy_coeff = entropy_coeff
        if not isinstance(is_ratio_cap, _NotProvided):
            self.is_ratio_cap = is_ratio_cap
        if not isinstance(policy_clip, _NotProvided):
            self.policy_clip = policy_clip
        if not isinstance(vf_loss_coeff, _NotProvided):
            self.vf_loss_coeff = vf_loss_coeff
        if not isinstance(normalize_values, _NotProvided):
            self.normalize_values = normalize_values
        if not isinstance(value_norm_decay, _NotProvided):
            self.value_norm_decay = value_norm_decay
        if not isinstance(reflection_coeff, _NotProvided):
            self.reflection_coeff = reflection_coeff
        if not isinstance(reflection_trains_encoder, _NotProvided):
            self.reflection_trains_encoder = reflection_trains_encoder
        if not isinstance(critic_warmup_updates, _NotProvided):
            self.critic_warmup_updates = critic_warmup_updates
        if not isinstance(critic_lr, _NotProvided):
            self.critic_lr = critic_lr
        if not isinstance(policy_grad_clip, _NotProvided):
            self.policy_grad_clip = policy_grad_clip
        if not isinstance(reward_critic_grad_clip, _NotProvided):
            self.reward_critic_grad_clip = reward_critic_grad_clip
        if not isinstance(risk_critic_grad_clip, _NotProvided):
            self.risk_critic_grad_clip = risk_critic_grad_clip
        if not isinstance(anchor_kl_coeff, _NotProvided):
            self.anchor_kl_coeff = anchor_kl_coeff
        return self

    @override(AlgorithmConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from agentic_ray.algorithms.aaac.default_aaac_rl_module import DefaultAAACTorchRLModule

        return RLModuleSpec(module_class=DefaultAAACTorchRLModule)

    @override(AlgorithmConfig)
    def get_default_learner_class(self) -> type[Learner]:
        if self.framework_str != "torch":
            raise ValueError(f"AAAC supports framework='torch' only, got {self.framework_str!r}.")
        from agentic_ray.algorithms.aaac.torch.aaac_torch_learner import AAACTorchLearner

        return AAACTorchLearner

    @override(AlgorithmConfig)
    def validate(self) -> None:
        """Checks RLlib's invariants and AAAC's (weights, λs, β, clips, batch sizes)."""
        super().validate()
        self.validate_train_batch_size_vs_rollout_fragment_length()

        if not 0.0 <= self.w_reward <= 1.0:
            self._value_error(f"`w_reward` ({self.w_reward}) must be in [0, 1]; w_risk = 1 - w_reward.")
        for name in ("lambda_short", "lambda_long"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                self._value_error(f"`{name}` ({getattr(self, name)}) must be in [0, 1].")
        if self.lambda_length_threshold < 0:
            self._value_error(f"`lambda_length_threshold` ({self.lambda_length_threshold}) must be >= 0.")
        if self.lambda_smooth_width is not None and self.lambda_smooth_width <= 0:
            self._value_error(f"`lambda_smooth_width` ({self.lambda_smooth_width}) must be None or > 0.")
        if self.fixed_lambda is not None and not 0.0 <= self.fixed_lambda <= 1.0:
            self._value_error(f"`fixed_lambda` ({self.fixed_lambda}) must be None or in [0, 1].")
        if not 0.0 <= self.value_norm_decay < 1.0:
            self._value_error(f"`value_norm_decay` ({self.value_norm_decay}) must be in [0, 1).")
        if not self.stream_std_floor > 0:
            self._value_error(f"`stream_std_floor` ({self.stream_std_floor}) must be > 0.")
        for name in ("use_risk_critic", "use_beta_kl", "normalize_values", "standardize_streams"):
            if not isinstance(getattr(self, name), bool):
                self._value_error(f"`{name}` ({getattr(self, name)!r}) must be a bool.")
        if self.beta_0 < 0:
            self._value_error(f"`beta_0` ({self.beta_0}) must be >= 0.")
        if not 0.0 < self.beta_decay <= 1.0:
            self._value_error(f"`beta_decay` ({self.beta_decay}) must be in (0, 1].")
        if self.entropy_coeff < 0:
            self._value_error(f"`entropy_coeff` ({self.entropy_coeff}) must be >= 0.")
        if self.critic_warmup_updates < 0:
            self._value_error(f"`critic_warmup_updates` ({self.critic_warmup_updates}) must be >= 0.")
        if self.reflection_coeff < 0:
            self._value_error(f"`reflection_coeff` ({self.reflection_coeff}) must be >= 0.")
        if self.anchor_kl_coeff < 0:
            self._value_error(f"`anchor_kl_coeff` ({self.anchor_kl_coeff}) must be >= 0.")
        if self.vf_loss_coeff < 0:
            self._value_error(f"`vf_loss_coeff` ({self.vf_loss_coeff}) must be >= 0.")
        if self.is_ratio_cap <= 0:
            self._value_error(f"`is_ratio_cap` ({self.is_ratio_cap}) must be > 0.")
        if self.policy_clip is not None and not 0 < self.policy_clip < 1:
            self._value_error(f"`policy_clip` ({self.policy_clip}) must be None or in (0, 1).")
        if self.critic_lr is not None and self.critic_lr <= 0:
            self._value_error(f"`critic_lr` ({self.critic_lr}) must be None or > 0.")
        for name in ("policy_grad_clip", "reward_critic_grad_clip", "risk_critic_grad_clip"):
            if not getattr(self, name) > 0:
                self._value_error(f"`{name}` ({getattr(self, name)}) must be > 0.")
        if self.grad_clip is not None:
            self._value_error("AAAC clips per parameter group; set `*_grad_clip` instead of `grad_clip`.")

        mbs, tbs = self.minibatch_size, self.train_batch_size_per_learner
        if isinstance(mbs, int) and isinstance(tbs, int) and mbs > tbs:
            self._value_error(f"`minibatch_size` ({mbs}) must be <= `train_batch_size_per_learner` ({tbs}).")
        if self.batch_mode == "truncate_episodes" and not self.in_evaluation:
            logger.warning(
                "AAAC with batch_mode='truncate_episodes': a fragment's length is only a lower bound on its "
                "episode's length, so early fragments of long episodes may get lambda_short. Use "
                "'complete_episodes' if λ must follow the final episode length."
            )


class AAAC(Algorithm):
    """Adaptive Advantage Actor-Critic: ``training_step`` samples, updates the learners, syncs weights.

    Episodes that an EnvRunner held back and delivers in a later iteration are learned from like fresh ones;
    their behaviour ``ACTION_LOGP``/``ACTION_DIST_INPUTS`` come with them, so the loss's importance weights and KL
    term account for the lag.
    """

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> AAACConfig:
        return AAACConfig()

    @override(Algorithm)
    def training_step(self) -> None:
        config = cast(AAACConfig, self.config)
        env_runner_group, learner_group, metrics = self.env_runner_group, self.learner_group, self.metrics
        assert env_runner_group is not None and learner_group is not None and metrics is not None

        with metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, env_runner_results = synchronous_parallel_sample(  # type: ignore[misc]
                worker_set=env_runner_group,
                max_env_steps=config.total_train_batch_size,
                sample_timeout_s=config.sample_timeout_s,
                _uses_new_env_runners=True,
                _return_metrics=True,
            )
            metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)  # type: ignore[arg-type]
        # All EnvRunners failed, or every episode is still held back (e.g. waiting for a reward actor).
        if not episodes:
            return

        with metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            learner_results = learner_group.update(
                episodes=episodes,  # type: ignore[arg-type]
                timesteps={
                    NUM_ENV_STEPS_SAMPLED_LIFETIME: metrics.peek(
                        (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME)
                    ),
                    NUM_MODULE_STEPS_TRAINED_LIFETIME: metrics.peek(
                        (LEARNER_RESULTS, ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME), default=0
                    ),
                },
                num_epochs=config.num_epochs,
                minibatch_size=config.minibatch_size,
                shuffle_batch_per_epoch=config.shuffle_batch_per_epoch,
            )
            metrics.aggregate(learner_results, key=LEARNER_RESULTS)

        with metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            env_runner_group.sync_weights(
                from_worker_or_learner_group=learner_group,
                policies=sorted(set(learner_results[0].keys()) - {ALL_MODULES}),
                inference_only=True,
            )


def _reward_pool_aaac() -> type[Algorithm]:
    from agentic_ray.rollout.reward_pool_wiring import RewardPoolAlgorithmMixin

    class RewardPoolAAAC(RewardPoolAlgorithmMixin, AAAC):  # type: ignore[misc]
        """AAAC that owns an asynchronous reward actor pool (created in ``setup``, drained before checkpoints)."""

    return RewardPoolAAAC


def __getattr__(name: str) -> Any:
    # Lazy, so that importing AAAC does not import the reward pool (and Ray actors) for plain envs.
    if name == "RewardPoolAAAC":
        cls = _reward_pool_aaac()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
