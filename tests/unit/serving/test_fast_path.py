"""A served checkpoint decides the same through the inference path (what PolicyRunner acts with) as through
ModulePolicy on the module's training-path forward."""

from __future__ import annotations

import asyncio
import time

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


def test_a_forward_off_the_loop_lets_the_loop_run_and_decides_as_on_it(module_dir) -> None:
    """What a policy inside the gateway replica acts with: the event loop keeps running during the forward (so
    other requests and the policy timeout go on), and the decisions are the loop's own."""
    env = AgentTaskEnv(env_config())
    observations = [env.reset(seed=s)[0] for s in range(32)]
    runner = PolicyRunner(module_dir)
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.001)

    async def main() -> tuple[list, float, float]:
        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        out = await runner.act_off_loop(observations)
        t1 = time.perf_counter()
        ticker.cancel()
        return out, t0, t1

    served, t0, t1 = asyncio.run(main())
    assert sum(t0 < t < t1 for t in ticks) >= 2, f"the loop stood still for {1e3 * (t1 - t0):.1f} ms"
    for got, want in zip(served, runner.act(observations), strict=True):
        assert got["action"].keys() == want["action"].keys()
        for key, value in want["action"].items():
            np.testing.assert_array_equal(got["action"][key], value, err_msg=key)
        np.testing.assert_array_equal(got["skill_probs"], want["skill_probs"])
