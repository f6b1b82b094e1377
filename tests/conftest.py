"""Shared fixtures: seeds, and one local Ray cluster per test session with its own temp dir.

Unit tests never touch Ray. Integration tests request ``ray_session``; the first one starts a private local
cluster (random free ports, private temp dir) and every later one reuses it. We never call ``ray stop``: the
cluster is shut down with ``ray.shutdown()`` from the process that started it.
"""

from __future__ import annotations

import os
import random
import tempfile

import numpy as np
import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under ``.ci/run``: how long the steps before the tests (system packages, venv, install) took."""
    started = os.environ.get("CI_STARTED_AT")
    if started:
        import time

        print(
            f"\nci: installation and setup took {time.time() - float(started):.0f} s before the tests started"
        )


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    np.random.seed(0)


@pytest.fixture(scope="session")
def ray_session():
    import ray

    if ray.is_initialized():
        yield ray
        return
    tmp = tempfile.mkdtemp(prefix="agray_", dir="/tmp")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=tmp,
        configure_logging=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"WANDB_MODE": "offline", "RAY_USAGE_STATS_ENABLED": "0"}},
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def quickstart_run():
    """The README's quickstart command, run once per session in its own process (see tests/helpers)."""
    from tests.helpers.quickstart_run import remove_run, run_quickstart

    run = run_quickstart()
    yield run
    remove_run(run.run_dir)


@pytest.fixture(scope="session")
def tiny_run(ray_session, tmp_path_factory):
    """One finished run of ``configs/tiny.yaml`` with the asynchronous reward pool, trained once per session (see
    ``tests/helpers/tiny_run.py``)."""
    from tests.helpers.tiny_run import train_tiny_run

    return train_tiny_run(tmp_path_factory.mktemp("tiny"))
