"""Per-episode streams in a learner batch: the risk stream of each episode and TD(λ) over episode-contiguous rows.

Shared by the learner connectors of AAAC (two critics), PPO with the risk stream folded into its reward and
PPO-Lagrangian (cost critic). All of them run after RLlib's ``AddOneTsToEpisodesAndTruncate``, so a module's batch
holds each episode chunk's real steps followed by one artificial bootstrap row, in ``episodes`` order.

The risk stream is ``episode.custom_data[keys.RISK_REWARDS]``: one value per step, ``<= 0`` (``-w`` on a
high-risk step). Without a reward pool ``AgenticEpisodeCallbacks`` writes it from the episode record (the L3 risk
formula); with the pool, the pool's settled risk-stream layers (``RewardAwareEnvRunner``) overwrite it. Plain envs
have none (zeros).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.typing import EpisodeType

from agentic_ray import keys
from agentic_ray.algorithms.aaac.functional import pad_episodes, td_lambda_advantages, unpad_episodes
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI

__all__ = [
    "bootstrap_rows",
    "episode_td_lambda",
    "risk_column",
    "risk_stream_of",
    "two_critic_module_batches",
]


def two_critic_module_batches(
    connector: ConnectorV2, rl_module: RLModule, batch: dict[str, Any], episodes: list[EpisodeType], who: str
) -> Iterator[tuple[str, TwoCriticAPI, dict[str, Any], list[SingleAgentEpisode]]]:
    """Each module in a learner connector's ``batch`` that has a second critic (``TwoCriticAPI``), with its batch
    and its single-agent episodes in batch order; other modules are skipped.

    Raises:
        NotImplementedError: for a stateful module (``who`` names the connector): the streams assume
            episode-contiguous rows without recurrent state.
    """
    multi_module = cast(MultiRLModule, rl_module)
    sa_episodes = list(connector.single_agent_episode_iterator(episodes, agents_that_stepped_only=False))
    for module_id, module_batch in batch.items():
        module = multi_module[module_id].unwrapped()
        if not isinstance(module, TwoCriticAPI):
            continue
        if module.is_stateful():
            raise NotImplementedError(f"{who} do not support stateful (RNN) modules.")
        yield module_id, module, module_batch, [e for e in sa_episodes if e.module_id in (None, module_id)]


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


def risk_column(episodes: Sequence[SingleAgentEpisode]) -> np.ndarray:
    """``(N,)`` float32 risk stream aligned with the batch rows: each chunk's steps, then 0 at its bootstrap row.

    Args:
        episodes: The chunks in batch order; ``len(e)`` counts the artificial bootstrap step.

    Returns:
        ``N = sum(len(e))`` values.
    """
    return np.concatenate([np.append(risk_stream_of(e, len(e) - 1), 0.0) for e in episodes]).astype(
        np.float32
    )


def bootstrap_rows(rows_per_episode: Sequence[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """``(N,)`` bool, True at each episode chunk's artificial last row."""
    ends = torch.cumsum(torch.tensor(list(rows_per_episode), device=device), dim=0) - 1
    mask = torch.zeros(int(sum(rows_per_episode)), dtype=torch.bool, device=device)
    mask[ends] = True
    return mask


def episode_td_lambda(
    values: torch.Tensor,
    stream: torch.Tensor,
    episodes: Sequence[SingleAgentEpisode],
    *,
    gamma: float,
    lambda_: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """TD(λ) advantages and λ-return targets of one stream over a batch of episode-contiguous rows.

    Args:
        values: ``(N,)`` critic values of every row (the bootstrap row's value is the bootstrap value).
        stream: ``(N,)`` per-step rewards of the stream (ignored at bootstrap rows).
        episodes: The chunks in batch order (``len(e)`` rows each, the last one artificial).
        gamma: Discount.
        lambda_: One λ for all chunks, or ``(B,)`` per chunk.

    Returns:
        ``(advantages, targets)``, both ``(N,)``; bootstrap rows get advantage 0 and target ``V`` (so a critic
        loss there, which the loss mask drops anyway, is zero).
    """
    device, dtype = values.device, values.dtype
    rows_per_episode = [len(e) for e in episodes]
    if int(sum(rows_per_episode)) != values.shape[0]:
        raise ValueError(
            f"batch has {values.shape[0]} rows but the episodes add up to {sum(rows_per_episode)}."
        )
    steps = torch.tensor([n - 1 for n in rows_per_episode], device=device)
    terminated = torch.tensor([bool(e.is_terminated) for e in episodes], device=device)
    lam = torch.as_tensor(lambda_, device=device, dtype=dtype).expand(len(episodes))
    values_p = pad_episodes(values, rows_per_episode)  # (B, T+1)
    bootstrap = values_p[torch.arange(len(episodes), device=device), steps]
    adv_p, ret_p = td_lambda_advantages(
        pad_episodes(stream.to(device=device, dtype=dtype), rows_per_episode)[:, :-1],
        values_p[:, :-1],
        bootstrap,
        terminated,
        steps,
        gamma=gamma,
        lambda_=lam,
    )
    zero_col = torch.zeros(len(episodes), 1, device=device, dtype=dtype)
    adv = unpad_episodes(torch.cat([adv_p, zero_col], dim=1), rows_per_episode)
    ret = unpad_episodes(torch.cat([ret_p, zero_col], dim=1), rows_per_episode)
    return adv, torch.where(bootstrap_rows(rows_per_episode, device), values, ret)
