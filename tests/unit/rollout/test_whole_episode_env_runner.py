"""WholeEpisodeEnvRunner: complete episodes, none dropped, long ones included; chunks joined as RLlib cuts them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from agentic_ray import keys
from agentic_ray.rollout.episode_callbacks import AgenticEpisodeCallbacks
from agentic_ray.rollout.whole_episode_env_runner import WholeEpisodeEnvRunner, join_chunks
from tests.unit.rewards.records import record, step

LENGTHS = (1, 9, 2, 14, 3, 1, 6)  # each sub-env cycles through these episode lengths


class FixedLengthEnv(gym.Env):
    """Episode k of the i-th env made lasts ``LENGTHS[(k + 3i) % len(LENGTHS)]`` steps (sub-envs out of step with
    each other); the observation is the step index."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    made = 0

    def __init__(self, config: Any = None) -> None:
        self.k, self.t, self.length = 3 * FixedLengthEnv.made - 1, 0, 0
        FixedLengthEnv.made += 1

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self.k += 1
        self.t, self.length = 0, LENGTHS[self.k % len(LENGTHS)]
        return np.zeros(1, np.float32), {"length": self.length}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, False, {"length": self.length}


class WholeEpisodeStream(RLlibCallback):
    """Writes a per-step array for the whole episode at its end, as AgenticEpisodeCallbacks writes the risk stream."""

    def on_episode_end(self, *, episode: Any, **kwargs: Any) -> None:
        episode.custom_data["stream"] = np.arange(episode.t_started + len(episode), dtype=np.float32)


def make_runner(cls: type[SingleAgentEnvRunner]) -> SingleAgentEnvRunner:
    FixedLengthEnv.made = 0
    config = (
        PPOConfig()
        .environment(FixedLengthEnv)
        .env_runners(
            num_envs_per_env_runner=4, batch_mode="complete_episodes", rollout_fragment_length="auto"
        )
        .training(train_batch_size=48)
        .callbacks(WholeEpisodeStream)
    )
    return cls(config=config)


def sample_steps(runner: SingleAgentEnvRunner, calls: int) -> list[SingleAgentEpisode]:
    return [e for _ in range(calls) for e in runner.sample()]


def test_complete_episodes_keep_the_running_episodes() -> None:
    runner = make_runner(WholeEpisodeEnvRunner)
    episodes = sample_steps(runner, calls=10)
    assert all(e.is_done and e.t_started == 0 for e in episodes)
    for e in episodes:  # each episode is whole: its steps 1..L, its length the env's
        assert len(e) == e.get_infos(-1)["length"]
        np.testing.assert_array_equal(e.get_observations()[:, 0], np.arange(len(e) + 1))
        np.testing.assert_array_equal(e.custom_data["stream"], np.arange(len(e)))
    # Every sampled step is in a returned episode or still held.
    held_steps = sum(sum(len(c) for c in chunks) for chunks in runner._held.values())
    sampled = runner.metrics.peek("num_env_steps_sampled_lifetime")
    assert sum(len(e) for e in episodes) + held_steps == sampled > 100
    assert 0 < runner.num_held_episodes <= 4
    # The long episodes are there, in their share: 14 of every 36 steps a sub-env takes are in 14-step episodes.
    assert max(len(e) for e in episodes) == 14
    assert sum(len(e) for e in episodes if len(e) == 14) >= 0.25 * sum(len(e) for e in episodes)


def test_rllibs_complete_episodes_drop_the_running_episodes() -> None:
    """What the runner fixes: RLlib resets every sub-env per call, so long episodes rarely survive."""
    runner = make_runner(SingleAgentEnvRunner)
    episodes = sample_steps(runner, calls=10)
    trained = sum(len(e) for e in episodes)
    assert trained < 0.75 * runner.metrics.peek("num_env_steps_sampled_lifetime")
    assert sum(len(e) for e in episodes if len(e) == 14) < 0.2 * trained  # 14 of every 36 steps are


def test_join_chunks_rebuilds_the_episode_and_leaves_the_chunks() -> None:
    ep = SingleAgentEpisode(
        observation_space=FixedLengthEnv.observation_space, action_space=gym.spaces.Discrete(2)
    )
    ep.add_env_reset(observation=np.zeros(1, np.float32), infos={})
    chunks = []
    for t in range(1, 8):
        ep.add_env_step(
            observation=np.array([t], np.float32),
            action=t % 2,
            reward=float(t),
            infos={"t": t},
            terminated=t == 7,
        )
        if t in (2, 5):
            nxt = ep.cut(len_lookback_buffer=1)
            chunks.append(ep.to_numpy())
            ep = nxt
    chunks.append(ep.to_numpy())
    assert [len(c) for c in chunks] == [2, 3, 2]
    whole = join_chunks(chunks)
    assert (len(whole), whole.t_started, whole.is_terminated) == (7, 0, True)
    np.testing.assert_array_equal(whole.get_rewards(), np.arange(1.0, 8.0))
    assert [len(c) for c in chunks] == [2, 3, 2]  # RLlib's metrics still hold the chunks
    assert join_chunks(chunks[:1]) is chunks[0]


def test_the_risk_stream_is_written_on_an_episodes_last_chunk() -> None:
    """AgenticEpisodeCallbacks writes the whole episode's stream on its last chunk (t_started > 0)."""
    rec = record([step(high_risk=i == 1, risk_weight=0.5) for i in range(5)])
    chunk = SingleAgentEpisode(
        observations=[0] * 3,
        actions=[0] * 2,
        rewards=[0.0] * 2,
        infos=[{}] * 2 + [{keys.EPISODE_RECORD: rec.to_dict()}],
        terminated=True,
        t_started=3,
        len_lookback_buffer=0,
    )
    AgenticEpisodeCallbacks().on_episode_end(episode=chunk)
    np.testing.assert_array_equal(chunk.custom_data[keys.RISK_REWARDS], [0.0, -0.5, 0.0, 0.0, 0.0])


def test_a_reseed_reset_drops_the_held_chunks_and_counts_their_steps() -> None:
    """The pipeline reseeds (and so resets) the envs at every iteration: the running episodes end there. Their
    chunks must not stay held forever (they never complete), and their steps are counted as dropped."""
    from agentic_ray.rollout.iteration_seeding import reseed_env_runner
    from agentic_ray.rollout.whole_episode_env_runner import METRIC_STEPS_DROPPED_AT_RESET

    runner = make_runner(WholeEpisodeEnvRunner)
    sample_steps(runner, calls=3)
    held_steps = sum(sum(len(c) for c in chunks) for chunks in runner._held.values())
    assert held_steps > 0
    held_ids = set(runner._held)
    before = runner.metrics.peek(METRIC_STEPS_DROPPED_AT_RESET)
    reseed_env_runner(runner, 123)
    episodes = runner.sample()
    assert not held_ids & set(runner._held)
    assert not held_ids & {e.id_ for e in episodes}
    assert runner.metrics.peek(METRIC_STEPS_DROPPED_AT_RESET) - before == held_steps
    assert all(e.t_started == 0 and len(e) == e.get_infos(-1)["length"] for e in episodes)
