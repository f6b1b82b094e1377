"""A served checkpoint decides the same through the inference path (what PolicyRunner acts with) as through
ModulePolicy on the module's training-path forward."""

from __future__ import annotations

import numpy as np
import torch

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.eval.evaluator import ModulePolicy
from agentic_ray.serving.policy_runner import PolicyRunner
from tests.helpers.serving import env_config


def test_served_decisions_equal_module_policy_decisions(module_dir) -> None:
    env = AgentTaskEnv(env_config())
    env.action_space.seed(0)
    observations = []
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        observations.append(obs)
        for _ in range(3):
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
            observations.append(obs)
    runner = PolicyRunner(module_dir)
    reference = ModulePolicy(runner.module, deterministic=True, fast=False)
    for batch in [observations, *([o] for o in observations[:3])]:  # one batch, and batches of one
        served = runner.act(batch)
        assert getattr(runner.module.model, "_inference_policy", None) is not None  # the inference path ran
        with torch.no_grad():
            ref = reference.forward(batch)
            fast = runner.policy.forward(batch)  # the runner's own policy: its distribution's inputs
        torch.testing.assert_close(fast.dist.logits, ref.dist.logits, atol=1e-5, rtol=0)
        probs = torch.softmax(ref.dist.parts.skill.float(), -1).numpy()
        for i, out in enumerate(served):
            want = ref.actions[i]
            assert out["action"].keys() == want.keys()
            for key, value in want.items():
                np.testing.assert_allclose(out["action"][key], value, atol=1e-5, err_msg=key)
            np.testing.assert_allclose(out["skill_probs"], probs[i], atol=1e-5)
