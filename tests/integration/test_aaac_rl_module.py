"""AAACRLModule inside RLlib: PPO builds and trains it (structured and prototype actions), EnvRunners get the
inference-only module, masks hold during sampling, and checkpoints round-trip with identical outputs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPO, PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, LEARNER_RESULTS

from agentic_ray.graph_spec import observation_space, random_observation, toy_specs
from agentic_ray.models import stack_observations
from agentic_ray.models.aaac_rl_module import AAACRLModule

pytestmark = pytest.mark.integration

SPEC, LAYOUT = toy_specs()
FIXED_OBS = stack_observations([random_observation(SPEC, LAYOUT, np.random.default_rng(s)) for s in range(6)])


class RandomGraphEnv(gym.Env):
    """Emits ``random_observation``s; reward 1 for skill 0 (or prototype 0). Counts actions that break a mask."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        config = config or {}
        self.prototype = bool(config.get("prototype", False))
        self.observation_space = observation_space(SPEC, LAYOUT)
        self.action_space = LAYOUT.prototype_action_space() if self.prototype else LAYOUT.action_space()
        self.rng = np.random.default_rng(0)
        self.violations = 0
        self.t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        self.last = random_observation(SPEC, LAYOUT, self.rng)
        return self.last

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        chosen = int(action["skill"])
        if self.prototype:  # a prototype, then the entity arguments of its skill
            self.violations += int(self.last["proto_mask"][chosen] == 0)
            k = LAYOUT.prototype_skills[chosen]
        else:
            k = chosen
            self.violations += int(self.last["skill_mask"][chosen] == 0)
        lay = LAYOUT.prototype_layout() if self.prototype else LAYOUT  # the layout the action is laid out in
        for i in range(len(LAYOUT.skills[k].pointer_types)):
            self.violations += int(self.last["pointer_mask"][k, i, int(action["pointer"][i])] == 0)
        lists = np.asarray(action["members"]).reshape(lay.list_slots, lay.list_length)
        for i in range(len(LAYOUT.skills[k].list_types)):
            members = lists[i][lists[i] < LAYOUT.max_pointer]
            self.violations += int((self.last["list_mask"][k, i, members] == 0).any())
        self.t += 1
        return self._obs(), float(chosen == 0), self.t >= 8, False, {}


def ppo_config(prototype: bool) -> PPOConfig:
    return (
        PPOConfig()
        .environment(RandomGraphEnv, env_config={"prototype": prototype}, clip_actions=True)
        .env_runners(num_env_runners=0, rollout_fragment_length=32)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1, lr=1e-3)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=AAACRLModule,
                model_config={
                    "graph_spec": SPEC,
                    "action_layout": LAYOUT,
                    "hidden_dim": 32,
                    "num_layers": 2,
                    "num_heads": 2,
                },
            )
        )
        .debugging(seed=1)
    )


def learner_module(algo: PPO) -> AAACRLModule:
    return algo.learner_group._learner.module[DEFAULT_MODULE_ID]


def outputs(module: RLModule) -> torch.Tensor:
    with torch.no_grad():
        return module.forward_inference({Columns.OBS: FIXED_OBS})[Columns.ACTION_DIST_INPUTS]


@pytest.mark.parametrize("prototype", [False, True])
def test_ppo_trains_the_module_and_checkpoints_round_trip(ray_session, tmp_path, prototype: bool) -> None:
    algo = ppo_config(prototype).build_algo()
    try:
        learner = learner_module(algo)
        assert not any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in learner.parameters())
        assert hasattr(learner.model, "reward_critic") and hasattr(learner.model, "risk_critic")
        runner_module = algo.env_runner.module
        assert runner_module.inference_only and not hasattr(runner_module.model, "reward_critic")

        before = outputs(learner).clone()
        result = algo.train()
        learner_stats = result[LEARNER_RESULTS][DEFAULT_MODULE_ID]
        for key in ("policy_loss", "vf_loss", "entropy", "mean_kl_loss"):
            assert np.isfinite(learner_stats[key]), (key, learner_stats[key])
        assert learner_stats["entropy"] > 0
        assert result[ENV_RUNNER_RESULTS]["num_env_steps_sampled_lifetime"] >= 64
        assert algo.env_runner.env.unwrapped.envs[0].unwrapped.violations == 0
        after = outputs(learner)
        assert not torch.allclose(before, after), "one PPO iteration should change the policy"
        # Weights were synced to the EnvRunner's inference-only module.
        torch.testing.assert_close(outputs(algo.env_runner.module), after)

        module_dir = tmp_path / "module"
        learner.save_to_path(module_dir)
        restored = RLModule.from_checkpoint(module_dir)
        torch.testing.assert_close(outputs(restored), after, rtol=0, atol=0)
        batch = {Columns.OBS: FIXED_OBS}
        with torch.no_grad():
            torch.testing.assert_close(
                restored.compute_values(batch), learner.compute_values(batch), rtol=0, atol=0
            )
            torch.testing.assert_close(
                restored.compute_risk_values(batch), learner.compute_risk_values(batch), rtol=0, atol=0
            )

        algo_dir = tmp_path / "algo"
        algo.save_to_path(algo_dir)
    finally:
        algo.stop()
    algo2 = PPO.from_checkpoint(algo_dir)
    try:
        torch.testing.assert_close(outputs(learner_module(algo2)), after, rtol=0, atol=0)
        torch.testing.assert_close(outputs(algo2.env_runner.module), after, rtol=0, atol=0)
    finally:
        algo2.stop()


def test_aaac_trains_the_module(ray_session) -> None:
    """The AAAC learner (three optimizers, two critics) accepts the module through ``TwoCriticAPI``."""
    from agentic_ray.algorithms.aaac.aaac import AAACConfig

    ppo = ppo_config(prototype=False)
    config = (
        AAACConfig()
        .environment(RandomGraphEnv, env_config={}, clip_actions=True)
        .env_runners(num_env_runners=0, rollout_fragment_length=32)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(rl_module_spec=ppo.rl_module_spec)
        .debugging(seed=1)
    )
    algo = config.build_algo()
    try:
        learner = algo.learner_group._learner
        module = learner.module[DEFAULT_MODULE_ID]
        assert isinstance(module, AAACRLModule)
        before = outputs(module).clone()
        result = algo.train()
        stats = result[LEARNER_RESULTS][DEFAULT_MODULE_ID]
        finite = {k: v for k, v in stats.items() if isinstance(v, float)}
        assert finite and all(np.isfinite(v) for v in finite.values()), finite
        assert not torch.allclose(before, outputs(module))
        assert algo.env_runner.env.unwrapped.envs[0].unwrapped.violations == 0
    finally:
        algo.stop()
