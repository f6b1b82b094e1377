"""Shared helpers of the serving tests: real policy modules on disk and the service token."""

from __future__ import annotations

from pathlib import Path

import torch

from agentic_ray.algorithms.build import module_spec
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.settings import load_settings

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
TOKEN = "test-token-" + "x" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def save_untrained_module(path: Path, seed: int = 0) -> Path:
    """An untrained AAAC module of the tiny config's sizes on the default e-commerce env, saved with the RLModule
    API (what ``RLModule.from_checkpoint`` loads). Its greedy policy is deterministic; sampled, it is a random
    policy."""
    torch.manual_seed(seed)
    module = module_spec(load_settings(TINY)).build()
    module.save_to_path(str(path))
    return path


def env_config() -> dict:
    """The env config those modules were built for (the tiny config's)."""
    return load_settings(TINY).env.model_dump(mode="json")


def validation_env() -> AgentTaskEnvConfig:
    """The env config as serving uses it (validation split, no faults)."""
    from agentic_ray.eval.evaluator import validation_env_config

    return validation_env_config(load_settings(TINY).env, 0.0)
