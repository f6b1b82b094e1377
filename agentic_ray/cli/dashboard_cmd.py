"""``agentic-ray dashboard RUN_DIR [--port N]``: the run's live debug dashboard in the browser."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import app
from agentic_ray.cli.common import UserError, run_directory


@app.command("dashboard")
def dashboard(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (one still training is followed live).")],
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to serve on (0: a free one).")] = 8266,
    host: Annotated[str, typer.Option(help="Bind address (127.0.0.1: this machine only).")] = "127.0.0.1",
) -> None:
    """Serve the run's dashboard: metrics, training curves, rewards, failures and a trace viewer (offline)."""
    import socket

    import uvicorn

    from agentic_ray.dashboard.app import create_app

    run = run_directory(run_dir)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UserError(f"cannot serve on {host}:{port}: {e.strerror or e} (choose another --port)") from e
    bound = sock.getsockname()[1]
    typer.echo(f"dashboard of {run} on http://{host}:{bound}/  (Ctrl-C to stop)", err=False)
    server = uvicorn.Server(uvicorn.Config(create_app(run), log_level="warning", access_log=False))
    server.run(sockets=[sock])
