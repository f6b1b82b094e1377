"""``agentic-ray refine --from SERVE_DATA --run RUN_DIR``: the Serve app's feedback back into training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import app
from agentic_ray.cli.common import UserError


@app.command("refine")
def refine_cmd(
    serve_data: Annotated[
        Path,
        typer.Option("--from", help="The Serve app's store (its feedback_db file) or its data directory."),
    ],
    run: Annotated[Path, typer.Option("--run", help="The run directory whose policy is served.")],
    config: Annotated[
        Path | None, typer.Option(help="A YAML file of refine settings (agentic_ray.refine.RefineConfig).")
    ] = None,
    judge_url: Annotated[
        str | None, typer.Option(help="Judge service of the judge layer (default: the in-process rubric).")
    ] = None,
    train: Annotated[bool, typer.Option(help="Train an update when a root cause dominates.")] = True,
) -> None:
    """Read decisions, sessions and feedback; re-score, attribute, build the incremental dataset; past the trigger,
    train, validate and register a canary candidate. Prints the report as one JSON object."""
    from pydantic import ValidationError

    from agentic_ray.refine import RefineConfig, refine
    from agentic_ray.settings import load_model

    try:
        cfg = load_model(config, RefineConfig) if config is not None else RefineConfig()
        report = refine(serve_data, run, cfg, judge_url=judge_url, train=train)
    except (FileNotFoundError, ValidationError, ValueError) as e:
        raise UserError(str(e)) from None
    typer.echo(json.dumps(report.to_dict(), default=str))
