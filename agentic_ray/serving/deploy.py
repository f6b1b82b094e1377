"""Deploy the policy application declaratively, as ``serve run serve_apps/policy.yaml`` / ``serve deploy`` do.

Why the declarative path: a Serve application deployed from a config keeps its code version while only
``user_config`` changes, so the change reaches the running replicas through ``reconfigure`` (no restart, no
dropped request). ``serve.run(app)`` from Python gives every deployment a new random version on each call, so
changing ``strategy_mode`` that way restarts every replica. The controller call is the one ``serve run
config.yaml`` makes (``ServeControllerClient.deploy_apps``); Serve has no public Python API for it.
"""

from __future__ import annotations

import time
from typing import Any

from agentic_ray.serving.settings import PolicyUserConfig, ServeSettings, SLASettings, StrategyMode

__all__ = ["APP_IMPORT_PATH", "app_config", "deploy", "wait_running"]

APP_IMPORT_PATH = "agentic_ray.serving.deployments:build_app"


def app_config(
    settings: ServeSettings,
    name: str = "policy",
    strategy_mode: StrategyMode | None = None,
    batching: PolicyUserConfig | None = None,
    import_path: str = APP_IMPORT_PATH,
    sla: SLASettings | None = None,
) -> dict[str, Any]:
    """One application of a Serve config file (an ``applications:`` entry): the settings as ``args``;
    ``strategy_mode`` and ``sla`` as the gateway's ``user_config`` and ``batching`` as the policy deployments'
    (the gateway's for the ``in_gateway`` arms; all default to the settings'). Changing only these reconfigures
    the running replicas."""
    return {
        "name": name,
        "route_prefix": settings.route_prefix,
        "import_path": import_path,
        "args": settings.model_dump(mode="json"),
        "deployments": [
            {"name": "Gateway", "user_config": settings.gateway_user_config(strategy_mode, batching, sla)},
            *(
                {"name": arm, "user_config": (batching or a.batching).model_dump()}
                for arm, a in settings.arms().items()
                if not a.in_gateway
            ),
        ],
    }


def deploy(
    apps: list[dict[str, Any]],
    http_options: dict[str, Any] | None = None,
    timeout_s: float = 300.0,
    wait: bool = True,
) -> None:
    """Apply a config's applications to the running Serve instance (starting Serve if needed).

    A config sent to the controller is the whole set of applications (one it does not name is deleted), so the
    applications already running that ``apps`` does not name are sent along unchanged, as they were deployed:
    changing one application's ``strategy_mode`` leaves the others running.

    Args:
        apps: ``applications`` entries (see :func:`app_config`).
        http_options: for a Serve instance this call starts (``host``, ``port``).
        timeout_s: how long to wait for every application to run.
        wait: wait until they run (a user_config change returns as soon as the controller has it).

    Raises:
        RuntimeError: an application failed to deploy (with Serve's message).
        TimeoutError: not running within ``timeout_s``.
    """
    from ray.serve._private import api as _private_api
    from ray.serve.schema import ServeDeploySchema

    client = _private_api.serve_start(http_options=http_options or {})
    client.deploy_apps(ServeDeploySchema.model_validate({"applications": [*apps, *_others(client, apps)]}))
    if wait:
        for a in apps:
            wait_running(a["name"], timeout_s)


def _others(client: Any, apps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The configs of the running declaratively deployed applications not named in ``apps``."""
    names = {a["name"] for a in apps}
    details = client.get_serve_details().get("applications", {})
    return [
        d["deployed_app_config"]
        for name, d in details.items()
        if name not in names and d.get("deployed_app_config") is not None
    ]


def wait_running(name: str, timeout_s: float = 300.0) -> None:
    """Block until application ``name`` runs."""
    from ray import serve
    from ray.serve.schema import ApplicationStatus

    deadline = time.monotonic() + timeout_s
    status: Any = None
    while time.monotonic() < deadline:
        app = serve.status().applications.get(name)
        status = app.status if app is not None else None
        if status == ApplicationStatus.RUNNING:
            return
        if app is not None and status == ApplicationStatus.DEPLOY_FAILED:
            raise RuntimeError(f"application {name!r} failed to deploy: {app.message}")
        time.sleep(0.5)
    raise TimeoutError(f"application {name!r} not running after {timeout_s:.0f}s (status {status})")
