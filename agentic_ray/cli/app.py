"""The root ``agentic-ray`` Typer app and its sub-apps; command modules register on them."""

from __future__ import annotations

import sys
from typing import Any

import typer

from agentic_ray.cli.common import ClickException, UsageError


class AgenticRayApp(typer.Typer):
    """The Typer app, run so that every error a user can cause is one line on stderr and a non-zero exit.

    Click's own usage errors (a missing argument, an unknown option) and :class:`~agentic_ray.cli.common.UserError`
    print as ``error: <message>``, without a traceback or a usage box; ``--help`` and normal exits are
    unchanged. A bug still shows its traceback.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("standalone_mode", False)
        try:
            rc = super().__call__(*args, **kwargs)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(130)
        except ClickException as e:
            hint = ""
            if isinstance(e, UsageError) and e.ctx is not None:
                hint = f" (see: {e.ctx.command_path} --help)"
            typer.echo(f"error: {' '.join(e.format_message().split())}{hint}", err=True)
            sys.exit(e.exit_code)
        sys.exit(rc if isinstance(rc, int) else 0)


app = AgenticRayApp(
    help="agentic-ray: train tool-using agents with RL on Ray.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
skills_app = typer.Typer(help="Skill contracts and the tool gateway.", no_args_is_help=True)
app.add_typer(skills_app, name="skills")
