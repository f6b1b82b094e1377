"""The ``agentic-ray`` command line. Entry points build configuration and call one function each.

One module per command group registers its commands on :data:`agentic_ray.cli.app.app`.
"""

from __future__ import annotations

from agentic_ray.cli import (  # noqa: F401  (register the commands)
    dashboard_cmd,
    parser_cmd,
    refine_cmd,
    serve_cmd,
    skills_cmd,
    sweep_cmd,
    train_cmd,
)
from agentic_ray.cli.app import app

__all__ = ["app"]
