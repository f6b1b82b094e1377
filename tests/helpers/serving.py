"""Shared helpers of the serving tests: real policy modules on disk, the service token, and the service on
in-process policies (no Ray)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

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


def make_service(
    settings: dict[str, Any], fail: Collection[str] = (), delay_s: Mapping[str, float] | None = None
) -> tuple[Any, Any]:
    """A :class:`PolicyService` whose arms are real :class:`PolicyRunner` s called in-process (``fail``: arms
    whose calls raise, as a dead replica's do; ``delay_s``: seconds an arm waits before answering, as a slow
    replica does, read at every call so a test may change it), and a TestClient on its HTTP app that reports a
    server error as a 500 response."""
    from fastapi.testclient import TestClient

    from agentic_ray.serving.http_app import create_app
    from agentic_ray.serving.policy_runner import PolicyRunner
    from agentic_ray.serving.service import PolicyService
    from agentic_ray.serving.settings import ServeSettings

    s = ServeSettings.model_validate(settings)
    runners = {"stable": PolicyRunner(s.stable.checkpoint)}
    if s.candidate is not None:
        runners["candidate"] = PolicyRunner(s.candidate.checkpoint, sample=s.candidate.sample)
    delays = delay_s if delay_s is not None else {}

    async def call(arm: str, obs: dict) -> dict:
        if arm in fail:
            raise RuntimeError(f"{arm} is down")
        if delays.get(arm):
            await asyncio.sleep(delays[arm])
        return runners[arm].act([obs])[0]

    versions = {a: (s.stable if a == "stable" else s.candidate).resolved_version() for a in runners}  # type: ignore[union-attr]
    svc = PolicyService(s, call, versions, pool_size=1)
    return svc, TestClient(create_app(lambda: svc), raise_server_exceptions=False)
