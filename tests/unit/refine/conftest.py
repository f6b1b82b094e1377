"""Fixtures of the refine tests: a Serve store written through the real DecisionStore API by a policy with an
injected weakness, and a run directory of the tiny config (no Ray)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from tests.helpers import refine_store as R
from tests.helpers.serving import TINY, validation_env

WEAK_FAMILY = "address_error"
TASKS = [
    ("address_error", 1000000000),
    ("address_error", 1000000001),
    ("cancellation", 1000500000),
    ("stock_inquiry", 1000600000),
]


def weak_policy(env: AgentTaskEnv, t: int) -> Any:
    """The expert, except on one family, where every call has the next skill (fails with a wrong entity)."""
    a = R.expert(env, t)
    assert env.task is not None
    if env.task.family == WEAK_FAMILY:
        a = dict(a)
        a["skill"] = (int(a["skill"]) + 1) % len(env.skills)
    return a


def make_run_dir(path: Path, families: list[str] | None = None) -> Path:
    """A run directory of the tiny config (``families``: its env's families, default all)."""
    from agentic_ray.settings import load_settings

    path.mkdir(parents=True, exist_ok=True)
    s = load_settings(TINY, {"env.families": families} if families else None)
    (path / "settings.json").write_text(json.dumps(s.model_dump(mode="json")))
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(store dir, recorded [(session id, record)])``, written once per module; copy before consuming."""
    d = tmp_path_factory.mktemp("serve")
    recs = R.record_sessions(d / "serve.sqlite", validation_env(), TASKS, weak_policy)
    return d, recs


@pytest.fixture
def fresh_store(served, tmp_path):
    """A private copy of the module's store (refine marks its feedback consumed)."""
    d = tmp_path / "serve"
    shutil.copytree(served[0], d)
    return d


@pytest.fixture
def run_dir(tmp_path):
    return make_run_dir(tmp_path / "run")


@pytest.fixture
def served_run(tmp_path):
    """A run directory with an untrained policy of the tiny config as its final checkpoint, its env on the
    families the store's sessions ran (the validation passes then take three tasks, not ten)."""
    from agentic_ray.eval.policy_loading import MODULE_SUBDIR
    from tests.helpers.serving import save_untrained_module

    run = make_run_dir(tmp_path / "run", sorted({f for f, _s in TASKS}))
    save_untrained_module(run / "checkpoints" / "reflection" / MODULE_SUBDIR)
    return run
