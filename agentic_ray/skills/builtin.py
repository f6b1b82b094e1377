"""Domain-free handlers, for health checks and gateway benchmarks."""

from __future__ import annotations

from typing import Any


def noop(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Does nothing and succeeds."""
    return {"done": True}


def echo(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Returns its params."""
    return {"done": True, "echo": dict(params)}
