"""Learner connector: per-episode adaptive-λ TD(λ) advantages for AAAC's two critics.

Appended to the learner pipeline by ``AAACLearner.build()`` (after RLlib's default pieces, so the tensor batch is
complete), right where PPO appends ``GeneralAdvantageEstimation``. It expects every episode chunk to carry the one
artificial timestep that ``AddOneTsToEpisodesAndTruncate`` appends (its value is the bootstrap value).

Streams:
    * reward stream: ``batch[Columns.REWARDS]`` (the env reward, or whatever a reward layer wrote into the episode);
    * risk stream: ``episode.custom_data[keys.RISK_REWARDS]``, an ``np.ndarray`` of one value per step, written by
      an EnvRunner or reward actor (see ``agentic_ray/algorithms/episode_streams.py``). Missing → zeros (plain
      envs), so the risk critic learns to predict zero.

Value normalisation (``normalize_values``, default on): the critics output normalised values; this connector
denormalises them before TD(λ), so advantages and targets stay in each stream's units, and updates the
normalisers with the batch's λ-returns (see ``value_normalizer.py``).

Ablations (``AAACConfig``): ``fixed_lambda`` replaces the length rule by one λ; ``use_risk_critic=False`` leaves the
risk stream out of the advantage (risk columns are zeros).

Episode fragments (``batch_mode="truncate_episodes"``): λ is chosen from ``t_started + steps_in_chunk``, which is
the true length only for the chunk that ends the episode and a lower bound for every earlier chunk. A long
episode's first fragments can therefore be treated as short. ``batch_mode="complete_episodes"`` (AAAC's default)
avoids this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
from ray.rllib.utils.typing import EpisodeType

from agentic_ray import keys
from agentic_ray.algorithms.aaac.functional import masked_standardize, mix_advantages, select_lambda
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI
from agentic_ray.algorithms.aaac.value_normalizer import ValueNormalizer
from agentic_ray.algorithms.episode_streams import (
    bootstrap_rows,
    episode_td_lambda,
    risk_column,
    risk_stream_of,
    two_critic_module_batches,
)

__all__ = ["TwoCriticAdvantages", "risk_diagnostics", "risk_stream_of"]


class TwoCriticAdvantages(ConnectorV2):
    """Computes ``advantage = w_reward·A_reward + (1 − w_reward)·A_risk`` with a λ chosen per episode.

    Writes into each module's batch (all ``(N,)``, zero at the artificial timesteps):
    ``Columns.ADVANTAGES`` (combined, standardised over real steps), ``Columns.VALUE_TARGETS`` (reward critic's
    λ-returns), ``keys.RISK_VALUE_TARGETS``, ``keys.REWARD_ADVANTAGES``, ``keys.RISK_ADVANTAGES`` (raw) and
    ``keys.TD_LAMBDA``. With ``standardize_streams`` (default) each stream's advantage is standardised before the
    mix (:func:`~agentic_ray.algorithms.aaac.functional.mix_advantages`), its std floored at ``stream_std_floor``
    so that a silent (all-zero) risk stream does not get its critic noise blown up to unit variance. Measured
    before that (e-commerce, soft risk, seed 0, first 4k env steps): the risk stream was right (``−w`` on each
    high-risk step, the delayed consequences on the episode's last step, the risk advantage −0.56 on high-risk rows
    against +0.01 elsewhere) but its advantages spread 0.11 against the reward stream's 2.4, so the raw 0.3 share
    moved the mixed advantage by ~2%: on high-risk rows the policy's advantage came almost all from the reward
    stream.

    Each call logs the batch's :func:`risk_diagnostics` as learner metrics of the module.

    All settings are read from the AAAC config on every call, and ``w_risk`` is derived here, so a Tune sweep
    that sets only ``w_reward`` stays consistent.
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        config: Any,
        value_normalizers: Callable[[str], tuple[ValueNormalizer, ValueNormalizer]] | None = None,
    ) -> None:
        """Args:
        input_observation_space: Unused (ConnectorV2 signature).
        input_action_space: Unused (ConnectorV2 signature).
        config: The ``AAACConfig`` (gamma, w_reward, lambda_short, lambda_long, lambda_length_threshold,
            lambda_smooth_width, fixed_lambda, use_risk_critic, normalize_values).
        value_normalizers: ``module_id → (reward, risk)`` normalisers, shared with the learner's loss. With
            ``normalize_values`` the critics' outputs are denormalised before TD(λ) and the normalisers are
            updated with the batch's λ-returns; ``None`` reads the outputs as values.
        """
        super().__init__(input_observation_space, input_action_space)
        self._algo_config = config
        self._value_normalizers = value_normalizers

    @override(ConnectorV2)
    def __call__(
        self,
        *,
        rl_module: RLModule,
        batch: dict[str, Any],
        episodes: list[EpisodeType],
        explore: bool | None = None,
        shared_data: dict | None = None,
        metrics: MetricsLogger | None = None,
        **kwargs: Any,
    ) -> Any:
        for module_id, module, module_batch, module_episodes in two_critic_module_batches(
            self, rl_module, batch, episodes, "AAAC's two-critic advantages"
        ):
            cfg = self._algo_config.get_config_for_module(module_id)
            normalizers = (
                self._value_normalizers(module_id)
                if cfg.normalize_values and self._value_normalizers is not None
                else None
            )
            diagnostics = self._add_advantages(module, module_batch, module_episodes, cfg, normalizers)
            if metrics is not None:
                metrics.log_dict(diagnostics, key=module_id, window=1)
        return batch

    def _add_advantages(
        self,
        module: TwoCriticAPI,
        module_batch: dict[str, Any],
        episodes: list[SingleAgentEpisode],
        cfg: Any,
        normalizers: tuple[ValueNormalizer, ValueNormalizer] | None,
    ) -> dict[str, float]:
        """Fills the AAAC columns of one module's batch (rows are episode-contiguous in ``episodes`` order).

        Returns:
            The batch's risk diagnostics (see :func:`risk_diagnostics`).
        """
        with torch.no_grad():
            values_reward, values_risk = (
                torch.as_tensor(v) for v in module.compute_both_values(module_batch)
            )
        if normalizers is not None:  # the critics output normalised values
            values_reward = normalizers[0].denormalize(values_reward)
            values_risk = normalizers[1].denormalize(values_risk)
        device, dtype = values_reward.device, values_reward.dtype
        rows_per_episode = [len(e) for e in episodes]  # real steps + 1 artificial bootstrap step
        if cfg.fixed_lambda is not None:  # ablation: one λ for every episode
            lambda_ = torch.full((len(episodes),), float(cfg.fixed_lambda), device=device, dtype=dtype)
        else:
            # For fragments this is a lower bound on the episode's length (see module docstring).
            episode_lengths = torch.tensor([e.t_started + len(e) - 1 for e in episodes])
            lambda_ = select_lambda(
                episode_lengths,
                threshold=cfg.lambda_length_threshold,
                lambda_short=cfg.lambda_short,
                lambda_long=cfg.lambda_long,
                smooth_width=cfg.lambda_smooth_width,
            ).to(device=device, dtype=dtype)

        rewards = torch.as_tensor(module_batch[Columns.REWARDS], device=device, dtype=dtype)
        adv_reward, targets_reward = episode_td_lambda(
            values_reward, rewards, episodes, gamma=cfg.gamma, lambda_=lambda_
        )
        real_rows = ~bootstrap_rows(rows_per_episode, device)
        risk_rewards = torch.as_tensor(risk_column(episodes), device=device, dtype=dtype)
        if cfg.use_risk_critic:
            adv_risk, targets_risk = episode_td_lambda(
                values_risk, risk_rewards, episodes, gamma=cfg.gamma, lambda_=lambda_
            )
            advantages = mix_advantages(
                adv_reward,
                adv_risk,
                real_rows,
                w_reward=float(cfg.w_reward),
                standardize_streams=bool(cfg.standardize_streams),
                stream_std_floor=float(cfg.stream_std_floor),
            )
            critic_errors = values_risk - targets_risk
            if normalizers is not None:  # in the critic's own (normalised) units, as its loss
                critic_errors = critic_errors / normalizers[1].mean_std[1]
        else:  # ablation: one critic; the risk stream does not reach the advantage (only the diagnostics)
            adv_risk, targets_risk = torch.zeros_like(adv_reward), torch.zeros_like(adv_reward)
            advantages = masked_standardize(adv_reward, real_rows)
            critic_errors = torch.zeros_like(adv_reward)
        if normalizers is not None:
            normalizers[0].update(targets_reward[real_rows])
            if cfg.use_risk_critic:
                normalizers[1].update(targets_risk[real_rows])

        module_batch[Columns.ADVANTAGES] = advantages
        module_batch[Columns.VALUE_TARGETS] = targets_reward
        module_batch[keys.RISK_VALUE_TARGETS] = targets_risk
        module_batch[keys.REWARD_ADVANTAGES] = adv_reward
        module_batch[keys.RISK_ADVANTAGES] = adv_risk
        module_batch[keys.TD_LAMBDA] = torch.repeat_interleave(
            lambda_, torch.tensor(rows_per_episode, device=device)
        )
        return risk_diagnostics(risk_rewards, adv_reward, adv_risk, advantages, critic_errors, real_rows)


def risk_diagnostics(
    risk_rewards: torch.Tensor,
    adv_reward: torch.Tensor,
    adv_risk: torch.Tensor,
    advantages: torch.Tensor,
    risk_critic_errors: torch.Tensor,
    real_rows: torch.Tensor,
) -> dict[str, float]:
    """How the risk stream reaches the policy in one batch (logged per module as learner metrics).

    "Risk rows" are the real rows with a negative risk reward: a high-risk step, or an episode's last step carrying
    a delayed consequence. A batch without one returns no means over them (``risk_row_share`` 0 says so) rather
    than NaN: RLlib's metrics logger would carry a NaN into the iteration's result, where a check for finite
    learner stats (and strict JSON) fails on it.

    Args:
        risk_rewards: ``(N,)`` risk stream.
        adv_reward: ``(N,)`` raw reward-stream advantages.
        adv_risk: ``(N,)`` raw risk-stream advantages.
        advantages: ``(N,)`` the mixed, standardised advantages the policy term uses.
        risk_critic_errors: ``(N,)`` risk critic's value minus its target (normalised units with value
            normalisation).
        real_rows: ``(N,)`` bool, False at the artificial bootstrap rows.

    Returns:
        ``risk_row_share``, ``adv_risk_on_risk_rows`` (raw, stream units), ``adv_on_risk_rows`` (the policy's
        advantage there; negative pushes away from risky steps), ``vf_loss_risk_on_risk_rows`` (squared error),
        ``adv_reward_std`` and ``adv_risk_std`` (raw spreads over the batch).
    """
    rows = real_rows & (risk_rewards < 0)
    out = {keys.AAAC_RISK_ROW_SHARE: float(rows.sum()) / max(1, int(real_rows.sum()))}
    if bool(real_rows.any()):
        out[keys.AAAC_ADV_REWARD_STD] = float(adv_reward[real_rows].std(unbiased=False))
        out[keys.AAAC_ADV_RISK_STD] = float(adv_risk[real_rows].std(unbiased=False))
    if bool(rows.any()):
        out[keys.AAAC_ADV_RISK_ON_RISK_ROWS] = float(adv_risk[rows].mean())
        out[keys.AAAC_ADV_ON_RISK_ROWS] = float(advantages[rows].mean())
        out[keys.AAAC_VF_LOSS_RISK_ON_RISK_ROWS] = float((risk_critic_errors[rows] ** 2).mean())
    return out
