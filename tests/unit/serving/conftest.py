"""Fixtures of the serving unit tests: an untrained policy module on disk and a service on it (no Ray)."""

from __future__ import annotations

import pytest

from tests.helpers.serving import TOKEN, env_config, save_untrained_module


@pytest.fixture(scope="session")
def module_dir(tmp_path_factory):
    return save_untrained_module(tmp_path_factory.mktemp("policy") / "module", seed=0)


@pytest.fixture
def token_env(monkeypatch):
    monkeypatch.setenv("AGENTIC_RAY_SERVE_TOKEN", TOKEN)


@pytest.fixture
def settings_dict(module_dir, tmp_path, token_env):
    return {
        "stable": {"checkpoint": str(module_dir), "version": "untrained-0"},
        "env": env_config(),
        "feedback_db": str(tmp_path / "feedback.sqlite"),
    }


@pytest.fixture(scope="session")
def shared_app(module_dir, tmp_path_factory):
    """One service with default settings (but no request-rate limit) for the tests that only send requests:
    building one costs a few seconds."""
    from tests.helpers.serving import make_service

    settings = {
        "stable": {"checkpoint": str(module_dir), "version": "untrained-0"},
        "env": env_config(),
        "feedback_db": str(tmp_path_factory.mktemp("shared") / "fb.sqlite"),
        "quotas": {"requests_per_s": 1e6, "burst": 10**6},
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTIC_RAY_SERVE_TOKEN", TOKEN)
        svc, client = make_service(settings)
    yield svc, client
    svc.close()
