"""Run ``agentic-ray`` in-process exactly as the console script does (through ``AgenticRayApp.__call__``).

Typer's ``CliRunner`` calls the underlying Click command and so bypasses the app's one-line error handling (it
shows Typer's boxed rich error instead), which is not what a user sees.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from agentic_ray.cli import app


@dataclass
class CliResult:
    """Exit code, stdout and stderr of one command; ``output`` is both."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def invoke(args: list[str]) -> CliResult:
    """Run ``agentic-ray ARGS`` in this process and capture what it prints."""
    out, err = io.StringIO(), io.StringIO()
    code: int = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            app(args=args, prog_name="agentic-ray")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())
