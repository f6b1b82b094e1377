"""AAAC on a real local Ray cluster: checkpoint round trip, held-back episodes, EnvRunner stripping, risk stream."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.metrics import (
    DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY,
    ENV_RUNNER_RESULTS,
    LEARNER_RESULTS,
)

from agentic_ray import keys
from agentic_ray.algorithms.aaac.aaac import AAAC, AAACConfig

pytestmark = pytest.mark.integration

FIXED_OBS = torch.tensor(np.random.default_rng(7).uniform(-0.2, 0.2, (6, 4)), dtype=torch.float32)


def small_config(num_env_runners: int = 0) -> AAACConfig:
    return (
        AAACConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=num_env_runners)
        .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=2)
        .debugging(seed=3)
    )


def on_learner(algo: AAAC, func):
    """Runs ``func(learner)`` on the algorithm's single learner and returns its result."""
    (call_result,) = algo.learner_group.foreach_learner(func)
    return call_result.get()


def learner_logits(algo: AAAC) -> torch.Tensor:
    return on_learner(
        algo,
        lambda learner: learner.module[DEFAULT_MODULE_ID].forward_inference({Columns.OBS: FIXED_OBS})[
            Columns.ACTION_DIST_INPUTS
        ],
    )


def values_in_stream_units(algo: AAAC, critic: int) -> torch.Tensor:
    """A critic's values on ``FIXED_OBS`` (0: reward, 1: risk), denormalised (the critics output normalised
    values)."""

    def values(learner):
        module = learner.module[DEFAULT_MODULE_ID]
        out = (module.compute_values, module.compute_risk_values)[critic]({Columns.OBS: FIXED_OBS}).detach()
        return learner.value_normalizers_of(DEFAULT_MODULE_ID)[critic].denormalize(out)

    return on_learner(algo, values)


def risk_values_in_stream_units(algo: AAAC) -> torch.Tensor:
    return values_in_stream_units(algo, 1)


def learner_num_updates(algo: AAAC) -> int:
    return on_learner(algo, lambda learner: learner.num_updates)


def learner_policy_steps(algo: AAAC) -> int:
    return on_learner(algo, lambda learner: learner.num_policy_steps)


class HoldBackEnvRunner(SingleAgentEnvRunner):
    """Holds every second episode back until the runner has received new weights, then delivers it.

    This is what an EnvRunner waiting on a slow reward actor does: the held episodes reach the learner after at
    least one policy update, so they are off-policy by one update or more.
    """

    def sample(self, **kwargs):
        fresh = super().sample(**kwargs)
        held = getattr(self, "_held_back", [])
        ready = [episode for seq_no, episode in held if seq_no < self._weights_seq_no]
        self._held_back = [(seq_no, episode) for seq_no, episode in held if seq_no >= self._weights_seq_no]
        delivered = []
        for episode in fresh:
            self.num_sampled = getattr(self, "num_sampled", 0) + 1
            if self.num_sampled % 2:
                delivered.append(episode)
            else:
                self._held_back.append((self._weights_seq_no, episode))
        self.num_delivered_late = getattr(self, "num_delivered_late", 0) + len(ready)
        return delivered + ready


class ConstantRiskEnvRunner(SingleAgentEnvRunner):
    """Writes a risk stream of +1 per step into every finished episode's ``custom_data``."""

    def sample(self, **kwargs):
        episodes = super().sample(**kwargs)
        for episode in episodes:
            episode.custom_data[keys.RISK_REWARDS] = np.ones(len(episode), np.float32)
        return episodes


def test_checkpoint_round_trip_keeps_beta_counter_and_policy(ray_session, tmp_path) -> None:
    algo = small_config().build_algo()
    try:
        for _ in range(2):
            algo.train()
        assert learner_num_updates(algo) == 2
        algo.save_to_path(str(tmp_path))
        restored = AAAC.from_checkpoint(str(tmp_path))
        try:
            assert learner_num_updates(restored) == 2
            torch.testing.assert_close(learner_logits(restored), learner_logits(algo), rtol=0, atol=0)
            env_runner_logits = restored.get_module().forward_inference({Columns.OBS: FIXED_OBS})
            torch.testing.assert_close(
                env_runner_logits[Columns.ACTION_DIST_INPUTS], learner_logits(algo), rtol=0, atol=0
            )
            # β counts policy optimisation steps (SGD minibatch updates), and the count came back with the weights.
            steps = learner_policy_steps(algo)
            assert steps >= 2 * 4  # ≥ 256 rows a batch in 64-row minibatches, 2 epochs, 2 updates
            assert learner_policy_steps(restored) == steps
            for a in (algo, restored):
                result = a.train()
                # the update's last minibatch ran at t = (steps after it) − 1: β_0·0.999^t
                t_last = learner_policy_steps(a) - 1
                assert t_last >= steps + 4 - 1
                assert result[LEARNER_RESULTS][DEFAULT_MODULE_ID][keys.AAAC_BETA] == pytest.approx(
                    algo.config.beta_0 * 0.999**t_last
                )
            assert learner_num_updates(restored) == 3
        finally:
            restored.stop()
    finally:
        algo.stop()


def one_step_per_update(config: AAACConfig) -> AAACConfig:
    """One SGD step on the whole batch per update: on-policy rows then have a ratio π/μ of exactly 1."""
    return config.training(num_epochs=1, minibatch_size=None)


def test_held_back_episodes_are_learned_off_policy_with_zero_env_runners(ray_session) -> None:
    algo = one_step_per_update(small_config(num_env_runners=0)).env_runners(env_runner_cls=HoldBackEnvRunner)
    algo = algo.build_algo()
    try:
        results = [algo.train() for _ in range(3)]
        assert learner_num_updates(algo) == 3
        assert algo.env_runner.num_delivered_late > 0
        for result in results[1:]:
            stats = result[LEARNER_RESULTS][DEFAULT_MODULE_ID]
            # Fresh rows lag one update, held-back rows two or more: the mean lag must exceed 1.
            assert stats[DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY] > 1.0
            assert np.isfinite(stats[keys.AAAC_POLICY_LOSS]) and np.isfinite(stats[keys.AAAC_KL])
        # The late rows are weighted with the policy that sampled them (their own ACTION_LOGP), so their ratio
        # π/μ departs from 1 at the update's only SGD step; the fresh rows' ratio is exactly 1 there (see the
        # control below, where nothing is held back).
        late = [r[LEARNER_RESULTS][DEFAULT_MODULE_ID] for r in results[1:]]
        assert any(
            abs(s[keys.AAAC_IS_WEIGHT_MEAN] - 1.0) > 1e-4 or s[keys.AAAC_RATIO_MAX] > 1.0 + 1e-4 for s in late
        ), late
    finally:
        algo.stop()

    control = one_step_per_update(small_config(num_env_runners=0)).build_algo()
    try:
        for _ in range(2):
            stats = control.train()[LEARNER_RESULTS][DEFAULT_MODULE_ID]
        assert stats[keys.AAAC_RATIO_MAX] == pytest.approx(1.0, abs=1e-5)
        assert stats[keys.AAAC_IS_WEIGHT_MEAN] == pytest.approx(1.0, abs=1e-5)
    finally:
        control.stop()


def test_on_policy_lag_is_one_update(ray_session) -> None:
    algo = small_config().build_algo()
    try:
        algo.train()
        result = algo.train()
        lag = result[LEARNER_RESULTS][DEFAULT_MODULE_ID][DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY]
        assert lag == pytest.approx(1.0)
    finally:
        algo.stop()


def test_remote_env_runner_gets_actor_only_weights(ray_session) -> None:
    algo = small_config(num_env_runners=1).build_algo()
    try:
        result = algo.train()
        assert result[ENV_RUNNER_RESULTS]["num_env_steps_sampled"] >= 256
        has_critics = algo.env_runner_group.foreach_env_runner(
            lambda er: (hasattr(er.module, "vf_reward"), hasattr(er.module, "vf_risk")),
            local_env_runner=False,
        )
        assert has_critics == [(False, False)]
        remote_logits = algo.env_runner_group.foreach_env_runner(
            lambda er: er.module.forward_inference({Columns.OBS: FIXED_OBS})[Columns.ACTION_DIST_INPUTS],
            local_env_runner=False,
        )[0]
        # Another process: same weights, float32 matmul may differ in the last bit.
        torch.testing.assert_close(torch.as_tensor(remote_logits), learner_logits(algo))
        # Plain env: no risk stream, so the risk critic's values, in the stream's units, stay an order of magnitude below
        # the reward critic's (their losses are on normalised targets, see value_normalizer.py, so they say nothing
        # about the scale).
        risk, reward = risk_values_in_stream_units(algo), values_in_stream_units(algo, 0)
        # measured after one iteration: risk 0.06-0.08 against reward 2.1-2.2; a risk critic fed the reward
        # stream would be at ~1x
        assert float(risk.abs().max()) < 0.1 * float(reward.abs().mean()), (risk, reward)
    finally:
        algo.stop()


def test_risk_stream_from_custom_data_trains_the_risk_critic(ray_session) -> None:
    config = (
        small_config()
        .env_runners(env_runner_cls=ConstantRiskEnvRunner)
        .training(critic_lr=1e-2, num_epochs=4, risk_critic_grad_clip=10.0)
    )
    algo = config.build_algo()
    try:
        for _ in range(4):
            algo.train()
        risk_values = risk_values_in_stream_units(algo)
        # With +1 per step the risk return from a near-upright pole is several steps' worth; untrained ≈ 0.
        assert float(risk_values.detach().mean()) > 2.0, risk_values
    finally:
        algo.stop()
