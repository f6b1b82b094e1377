"""``WholeEpisodeEnvRunner``: ``batch_mode="complete_episodes"`` without dropping the episodes still running.

RLlib's ``SingleAgentEnvRunner`` samples complete episodes as ``_sample(num_episodes=num_envs)``, which first
resets every sub-env: the episodes still running when the ``num_envs``-th episode ends are thrown away, although
their steps count as sampled (``num_env_steps_sampled``). The episodes that survive are the ones that end first, so
the learner's batch is biased toward short episodes. Measured on the e-commerce env (8 envs per runner, 512-step
batches, soft risk, AAAC, seed 0, 8 iterations): 2,139 of ~4,200 sampled steps reached the learner, no episode
longer than 8 steps among them, and 11 high-risk steps (0.5%); with this runner 4,111 of 4,117 (the other 6 were
still running), episodes up to 16 steps, and 74 high-risk steps (1.8%). Long episodes are where an untrained
policy makes a third to a half of its high-risk calls.

This runner samples ``num_timesteps`` instead (no reset: RLlib cuts the running episodes into chunks and continues
them in the next call), holds the chunks of unfinished episodes and returns each episode whole, in the call in
which it ends. Nothing is dropped; an episode that spans two calls was partly sampled with the previous weights,
which the learners' importance ratios (``ACTION_LOGP``) account for. Every other way of sampling (``num_episodes``,
``num_timesteps``, ``truncate_episodes``) is RLlib's.

A reset of the sub-envs ends the running episodes: ``force_reset``, and the reset at the start of every training
iteration that :func:`~agentic_ray.rollout.iteration_seeding.reseed_iteration` asks for (so that a resumed run
samples what the uninterrupted one did). Their held chunks are then dropped and their steps counted in the metric
:data:`METRIC_STEPS_DROPPED_AT_RESET`: once per iteration, the episodes running at its end (measured on the quickstart:
see the README), instead of RLlib's drop at every ``sample()`` call.

``on_episode_end`` callbacks see the episode's last chunk (``t_started > 0`` when it spans calls); a
``custom_data`` array they write for the whole episode (length ``t_started + len(chunk)``) is carried over to the
whole episode, whose ``custom_data`` is the chunks' merged (later chunks win).
"""

from __future__ import annotations

import copy
from typing import Any

from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.annotations import override

__all__ = ["METRIC_STEPS_DROPPED_AT_RESET", "WholeEpisodeEnvRunner", "join_chunks"]

METRIC_STEPS_DROPPED_AT_RESET = "num_env_steps_dropped_at_reset"
"""EnvRunner metric (summed): sampled steps of running episodes that a reset of the sub-envs ended unfinished."""


def join_chunks(chunks: list[SingleAgentEpisode]) -> SingleAgentEpisode:
    """One episode from its consecutive chunks (the chunks themselves are left as they are).

    Args:
        chunks: The chunks of one episode in time order (``chunks[i+1].t_started == chunks[i].t``).

    Returns:
        ``chunks[0]`` if there is one chunk, else a copy of it with the later chunks appended.
    """
    if len(chunks) == 1:
        return chunks[0]
    # A copy: RLlib keeps the earlier chunks for its episode-return metrics, which would count appended steps twice.
    whole = copy.deepcopy(chunks[0])
    for chunk in chunks[1:]:
        whole.concat_episode(chunk)
    return whole


class WholeEpisodeEnvRunner(SingleAgentEnvRunner):
    """A ``SingleAgentEnvRunner`` whose ``complete_episodes`` sampling keeps running episodes (see module doc)."""

    @override(SingleAgentEnvRunner)
    def __init__(self, *, config: Any, **kwargs: Any) -> None:
        self._held: dict[str, list[SingleAgentEpisode]] = {}
        super().__init__(config=config, **kwargs)

    @override(SingleAgentEnvRunner)
    def sample(self, **kwargs: Any) -> list[SingleAgentEpisode]:
        """RLlib's ``sample()``; without ``num_timesteps``/``num_episodes`` in ``complete_episodes`` mode, the
        episodes that end in this call, whole (see module doc)."""
        whole_episodes = (
            kwargs.get("num_timesteps") is None
            and kwargs.get("num_episodes") is None
            and self.config.batch_mode == "complete_episodes"
        )
        if not whole_episodes or kwargs.get("force_reset") or self._needs_initial_reset:
            self._drop_held()  # a reset (or another mode) ends the running episodes: their chunks are stale
        if not whole_episodes:
            return super().sample(**kwargs)
        steps = self.config.get_rollout_fragment_length(self.worker_index) * self.num_envs
        chunks = super().sample(**{**kwargs, "num_timesteps": steps, "num_episodes": None})
        done = []
        for chunk in chunks:
            held = self._held.pop(chunk.id_, [])
            if chunk.is_done:
                done.append(join_chunks([*held, chunk]))
            else:
                self._held[chunk.id_] = [*held, chunk]
        return done

    def _drop_held(self) -> None:
        dropped = sum(len(c) for chunks in self._held.values() for c in chunks)
        self._held.clear()
        self.metrics.log_value(METRIC_STEPS_DROPPED_AT_RESET, dropped, reduce="sum")

    @property
    def num_held_episodes(self) -> int:
        """Episodes begun but not yet ended (their chunks wait for the call in which they end)."""
        return len(self._held)
