"""Learner connector: per-episode adaptive-λ TD(λ) advantages for AAAC's two critics.

Appended to the learner pipeline by ``AAACLearner.build()`` (after RLlib's default pieces, so the tensor batch is
complete), right where PPO appends ``GeneralAdvantageEstimation``. It expects every episode chunk to carry the one
artificial timestep that ``AddOneTsToEpisodesAndTruncate`` appends (its value is the bootstrap value).

Streams:
    * reward stream: ``batch[Columns.REWARDS]`` (the env reward, or whatever a reward layer wrote into the episode);
    * risk stream: ``episode.custom_data[keys.RISK_REWARDS]``, an ``np.ndarray`` of one value per step, written by
      an EnvRunner or reward actor. Missing → zeros (plain envs), so the risk critic learns to predict zero.

Episode fragments (``batch_mode="truncate_episodes"``): λ is chosen from ``t_started + steps_in_chunk``, which is
the true length only for the chunk that ends the episode and a lower bound for every earlier chunk. A long
episode's first fragments can therefore be treated as short. ``batch_mode="complete_episodes"`` (AAAC's default)
avoids this.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
from ray.rllib.utils.typing import EpisodeType

from agentic_ray import keys
from agentic_ray.algorithms.aaac.functional import (
    masked_standardize,
    pad_episodes,
    select_lambda,
    td_lambda_advantages,
    unpad_episodes,
)
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI

__all__ = ["TwoCriticAdvantages", "risk_stream_of"]


def risk_stream_of(episode: SingleAgentEpisode, num_steps: int) -> np.ndarray:
    """The risk rewards of an episode chunk's ``num_steps`` real steps, ``(num_steps,)`` float32.

    Accepts either an array aligned with the chunk (length ``num_steps``) or one indexed by the episode's global
    timestep (length ``>= t_started + num_steps``, e.g. written for the whole episode before RLlib cut it).

    Args:
        episode: The (single-agent) episode chunk.
        num_steps: Real steps in the chunk (without the artificial bootstrap step).

    Returns:
        The risk stream; zeros when ``custom_data`` has no ``keys.RISK_REWARDS``.

    Raises:
        ValueError: If the stored array is too short to cover the chunk.
    """
    risk = episode.custom_data.get(keys.RISK_REWARDS)
    if risk is None:
        return np.zeros(num_steps, dtype=np.float32)
    risk = np.asarray(risk, dtype=np.float32).reshape(-1)
    if len(risk) == num_steps:
        return risk
    start = episode.t_started
    if len(risk) >= start + num_steps:
        return risk[start : start + num_steps]
    raise ValueError(
        f"custom_data[{keys.RISK_REWARDS!r}] has {len(risk)} entries; episode chunk {episode.id_} has "
        f"{num_steps} steps starting at t={start}."
    )


class TwoCriticAdvantages(ConnectorV2):
    """Computes ``advantage = w_reward·A_reward + (1 − w_reward)·A_risk`` with a λ chosen per episode.

    Writes into each module's batch (all ``(N,)``, zero at the artificial timesteps):
    ``Columns.ADVANTAGES`` (combined, standardised over real steps), ``Columns.VALUE_TARGETS`` (reward critic's
    λ-returns), ``keys.RISK_VALUE_TARGETS``, ``keys.REWARD_ADVANTAGES``, ``keys.RISK_ADVANTAGES`` (raw) and
    ``keys.TD_LAMBDA``. The combined advantage is standardised after mixing, so a silent (all-zero) risk stream
    does not get its critic noise blown up to unit variance.

    All settings are read from the AAAC config on every call, and ``w_risk`` is derived here, so a Tune sweep
    that sets only ``w_reward`` stays consistent.
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        config: Any,
    ) -> None:
        """Args:
        input_observation_space: Unused (ConnectorV2 signature).
        input_action_space: Unused (ConnectorV2 signature).
        config: The ``AAACConfig`` (gamma, w_reward, lambda_short, lambda_long, lambda_length_threshold,
            lambda_smooth_width).
        """
        super().__init__(input_observation_space, input_action_space)
        self._algo_config = config

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
        multi_module = cast(MultiRLModule, rl_module)
        sa_episodes = list(self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False))
        for module_id, module_batch in batch.items():
            module = multi_module[module_id].unwrapped()
            if not isinstance(module, TwoCriticAPI):
                continue
            if module.is_stateful():
                raise NotImplementedError(
                    "AAAC's two-critic advantages do not support stateful (RNN) modules."
                )
            cfg = self._algo_config.get_config_for_module(module_id)
            module_episodes = [e for e in sa_episodes if e.module_id in (None, module_id)]
            self._add_advantages(module, module_batch, module_episodes, cfg)
        return batch

    def _add_advantages(
        self,
        module: TwoCriticAPI,
        module_batch: dict[str, Any],
        episodes: list[SingleAgentEpisode],
        cfg: Any,
    ) -> None:
        """Fills the AAAC columns of one module's batch (rows are episode-contiguous in ``episodes`` order)."""
        with torch.no_grad():
            values_reward, values_risk = (
                torch.as_tensor(v) for v in module.compute_both_values(module_batch)
            )
        device, dtype = values_reward.device, values_reward.dtype

        rows_per_episode = [len(e) for e in episodes]  # real steps + 1 artificial bootstrap step
        steps = torch.tensor([n - 1 for n in rows_per_episode], device=device)
        if int(sum(rows_per_episode)) != values_reward.shape[0]:
            raise ValueError(
                f"AAAC: batch has {values_reward.shape[0]} rows but the episodes add up to {sum(rows_per_episode)}."
            )
        terminated = torch.tensor([bool(e.is_terminated) for e in episodes], device=device)
        # For fragments this is a lower bound on the episode's length (see module docstring).
        episode_lengths = torch.tensor(
            [e.t_started + n - 1 for e, n in zip(episodes, rows_per_episode, strict=True)]
        )
        lambda_ = select_lambda(
            episode_lengths,
            threshold=cfg.lambda_length_threshold,
            lambda_short=cfg.lambda_short,
            lambda_long=cfg.lambda_long,
            smooth_width=cfg.lambda_smooth_width,
        ).to(device=device, dtype=dtype)

        rewards = torch.as_tensor(module_batch[Columns.REWARDS], device=device, dtype=dtype)
        risk_rewards = torch.as_tensor(
            np.concatenate(
                [
                    np.append(risk_stream_of(e, n - 1), 0.0)
                    for e, n in zip(episodes, rows_per_episode, strict=True)
                ]
            ),
            device=device,
            dtype=dtype,
        )

        def stream_advantages(
            values: torch.Tensor, stream: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            """TD(λ) advantages and targets of one stream, flat ``(N,)``; bootstrap rows get (0, V)."""
            values_p = pad_episodes(values, rows_per_episode)  # (B, T+1)
            bootstrap = values_p[torch.arange(len(episodes), device=device), steps]
            adv_p, ret_p = td_lambda_advantages(
                pad_episodes(stream, rows_per_episode)[:, :-1],
                values_p[:, :-1],
                bootstrap,
                terminated,
                steps,
                gamma=cfg.gamma,
                lambda_=lambda_,
            )
            zero_col = torch.zeros(len(episodes), 1, device=device, dtype=dtype)
            adv = unpad_episodes(torch.cat([adv_p, zero_col], dim=1), rows_per_episode)
            ret = unpad_episodes(torch.cat([ret_p, zero_col], dim=1), rows_per_episode)
            is_bootstrap_row = self._bootstrap_rows(rows_per_episode, device)
            return adv, torch.where(is_bootstrap_row, values, ret)

        adv_reward, targets_reward = stream_advantages(values_reward, rewards)
        adv_risk, targets_risk = stream_advantages(values_risk, risk_rewards)

        w_reward = float(cfg.w_reward)
        w_risk = 1.0 - w_reward
        real_rows = ~self._bootstrap_rows(rows_per_episode, device)
        advantages = masked_standardize(w_reward * adv_reward + w_risk * adv_risk, real_rows)

        module_batch[Columns.ADVANTAGES] = advantages
        module_batch[Columns.VALUE_TARGETS] = targets_reward
        module_batch[keys.RISK_VALUE_TARGETS] = targets_risk
        module_batch[keys.REWARD_ADVANTAGES] = adv_reward
        module_batch[keys.RISK_ADVANTAGES] = adv_risk
        module_batch[keys.TD_LAMBDA] = torch.repeat_interleave(
            lambda_, torch.tensor(rows_per_episode, device=device)
        )

    @staticmethod
    def _bootstrap_rows(rows_per_episode: list[int], device: torch.device) -> torch.Tensor:
        """``(N,)`` bool, True at each episode's artificial last row."""
        ends = torch.cumsum(torch.tensor(rows_per_episode, device=device), dim=0) - 1
        mask = torch.zeros(int(sum(rows_per_episode)), dtype=torch.bool, device=device)
        mask[ends] = True
        return mask
