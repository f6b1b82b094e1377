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

__all__ = ["APP_IMPORT_PATH", "SERVE_PROCESS_ENV", "app_config", "deploy", "wait_running"]

APP_IMPORT_PATH = "agentic_ray.serving.deployments:build_app"

SERVE_PROCESS_ENV: dict[str, str] = {
    "RAY_SERVE_PROXY_USE_GRPC": "1",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
}
"""Serve's own switches (read in ``ray/serve/_private/constants.py``), an opt-in for the Serve instance
:func:`deploy` starts (``serve_env=SERVE_PROCESS_ENV``), given to its controller as
``controller_options.runtime_env.env_vars``; the HTTP proxies and the replicas it starts inherit them:

* ``RAY_SERVE_PROXY_USE_GRPC=1``: the proxy sends each HTTP request to the ingress replica over the replica's
  gRPC server (every replica runs one for calls between deployments) instead of a Ray actor call with a
  streamed result.
* ``RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0``: a deployment handle's router runs on its caller's event loop
  instead of a thread of its own, two thread hops less per call (the proxy's handle to the gateway, the
  gateway's handles to policy deployments of their own).

Both are among the settings of Serve's ``RAY_SERVE_THROUGHPUT_OPTIMIZED``; the serving integration tests run
with them and pass (auth, limits, request ids, streamed episodes, canary and rollback, replicas killed). Not the
default: at one client they cut the HTTP path, but 32 batched HTTP clients got fewer answers. Measured on the
2-CPU box (load 20-70 under ``nice``): Ray instances with and without them side by side, /v1/act at one HTTP
client alternated between them (6-8 rounds, paired medians), 1.5-2.2 ms less CPU per request in the proxy in all
three runs, 1.0-1.2 ms less in the gateway replica in two (none in the third); through a handle no change.
``benchmarks/serve_latency.py`` with and without them (with ``access_log`` on for Serve's defaults), two pairs:
http_p50_ms_c1 19.5 vs 21.7 ms at the same load, but c32 over HTTP 62.9 vs 74.3 req/s batched and 61.8 vs 51.0
unbatched, 1.02x vs 1.46x (the other pair 1.11x vs 1.61x, its run with them at load 96). Serve applies them only
when the call starts Serve: an instance started before keeps its own."""


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
    serve_env: dict[str, str] | None = None,
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
        serve_env: Serve switches for a Serve instance this call starts (e.g. :data:`SERVE_PROCESS_ENV`;
            default: Serve's own).

    Raises:
        RuntimeError: an application failed to deploy (with Serve's message).
        TimeoutError: not running within ``timeout_s``.
    """
    from ray.serve._private import api as _private_api
    from ray.serve.schema import ServeDeploySchema

    env = serve_env or {}
    client = _private_api.serve_start(
        http_options=http_options or {},
        controller_options={"runtime_env": {"env_vars": dict(env)}} if env else None,
    )
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
