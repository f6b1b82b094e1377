"""The root ``agentic-ray`` Typer app and its sub-apps; command modules register on them."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="agentic-ray: train tool-using agents with RL on Ray.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
skills_app = typer.Typer(help="Skill contracts and the tool gateway.", no_args_is_help=True)
app.add_typer(skills_app, name="skills")
