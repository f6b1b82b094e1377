"""``agentic-ray serve RUN_DIR``: the run's final policy module as an HTTP service on Ray Serve."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import app


@app.command("serve")
def serve_cmd(
    run_dir: Annotated[
        Path, typer.Argument(help="A run directory (its final stage is served), or a checkpoint directory.")
    ],
    candidate: Annotated[
        Path | None, typer.Option(help="A second run or checkpoint to canary against the first.")
    ] = None,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
    token_file: Annotated[
        Path | None,
        typer.Option(
            help="File of bearer tokens, one client per line (`TOKEN` or `NAME TOKEN`; default: the one token in "
            "$AGENTIC_RAY_SERVE_TOKEN)."
        ),
    ] = None,
    strategy_mode: Annotated[str, typer.Option(help="learned, or rules (the domain's expert).")] = "learned",
    feedback_db: Annotated[
        Path | None,
        typer.Option(help="SQLite file of decisions and feedback (default: RUN_DIR/serve.sqlite)."),
    ] = None,
    max_batch_size: Annotated[int, typer.Option(help="Largest dynamic batch.")] = 32,
    batch_wait_ms: Annotated[
        float,
        typer.Option(help="How long a batch waits to fill (ms; 0: batches form while the last one runs)."),
    ] = 0.0,
    replicas: Annotated[int, typer.Option(help="Replicas of each policy deployment.")] = 1,
    in_gateway: Annotated[
        bool | None,
        typer.Option(
            "--in-gateway/--own-deployment",
            help="Run the policies inside the gateway replica (one Serve hop less per decision; needs --replicas "
            "1), or each in a deployment of its own. Default: inside the gateway with --replicas 1.",
        ),
    ] = None,
    skills_url: Annotated[
        str | None, typer.Option(help="Agent mode calls this skill server (default: in-process tools).")
    ] = None,
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: embedded local Ray).")
    ] = None,
    timeout_s: Annotated[float, typer.Option(help="How long to wait for the application to start.")] = 600.0,
) -> None:
    """Serve the policy: POST /v1/act, agent-mode sessions, feedback, metrics (OpenAPI at /docs)."""
    import time

    from pydantic import ValidationError

    from agentic_ray.cli.common import init_ray
    from agentic_ray.serving.deploy import app_config, deploy
    from agentic_ray.serving.http_guards import load_clients
    from agentic_ray.serving.settings import ServeSettings

    arm = {
        "num_replicas": replicas,
        "in_gateway": in_gateway,
        "max_ongoing_requests": max(64, 2 * max_batch_size),
        "batching": {"max_batch_size": max_batch_size, "batch_wait_timeout_s": batch_wait_ms / 1000.0},
    }
    try:
        settings = ServeSettings.model_validate(
            {
                "stable": {"checkpoint": str(run_dir.resolve()), **arm},
                "candidate": {"checkpoint": str(candidate.resolve()), **arm} if candidate else None,
                "strategy_mode": strategy_mode,
                "auth": {"token_file": str(token_file.resolve())} if token_file else {},
                "agent": {"backend": "http", "http_url": skills_url} if skills_url else {},
                "feedback_db": str((feedback_db or run_dir / "serve.sqlite").resolve()),
                "gateway_max_ongoing_requests": max(256, 4 * max_batch_size),
            }
        )
        settings.env_config()
        load_clients(settings.auth)
    except ValidationError as e:  # one line: the fields and their problems
        msgs = [f"{'.'.join(map(str, err['loc'])) or 'settings'}: {err['msg']}" for err in e.errors()]
        typer.echo(f"error: {'; '.join(msgs)}", err=True)
        raise typer.Exit(2) from None
    except (ValueError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    init_ray(address, None)
    from ray import serve

    deploy([app_config(settings)], http_options={"host": host, "port": port}, timeout_s=timeout_s)
    url = f"http://{host}:{port}"
    typer.echo(f"serving {settings.stable.resolved_version()} at {url}  (OpenAPI: {url}/docs; Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
