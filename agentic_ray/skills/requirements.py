"""A contract's ``requires:`` checked at startup (seed 000: "declare requires: and check at deploy time").

A skill whose database file, environment variable or Python module is missing must not start serving and then
fail on its first call: whatever hosts the skill's handler (the in-process gateway, ``agentic-ray skills serve``,
``agentic-ray train``'s preflight) calls :func:`check_requirements` before anything starts, and the error names
every missing resource with its skill and contract file. A skill that is not whitelisted is not checked.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable
from pathlib import Path

from agentic_ray.skills.contracts import DomainContracts, RequirementSpec


class MissingRequirementError(RuntimeError):
    """A whitelisted skill's ``requires:`` is not met. The message names the skill, the resource and the file."""

    def __init__(self, source: str, missing: dict[str, list[str]]) -> None:
        self.missing = missing
        where = source or "<contracts built in code>"
        lines = [f"{where}: skill {s}: {why}" for s, whys in missing.items() for why in whys]
        super().__init__("missing required resources (declared under `requires:`):\n" + "\n".join(lines))


def requirement_problem(r: RequirementSpec, base: Path) -> str | None:
    """Why one requirement is not met ('file ... is missing', ...), or None when it is."""
    if r.kind == "file":
        p = Path(r.target)
        p = p if p.is_absolute() else base / p
        return None if p.exists() else f"required file {p} is missing"
    if r.kind == "env":
        return None if os.environ.get(r.target) else f"required environment variable {r.target} is not set"
    try:
        found = importlib.util.find_spec(r.target) is not None
    except (ImportError, ValueError):  # a dotted name whose parent package is missing
        found = False
    return None if found else f"required module {r.target} is not importable"


def missing_requirements(
    contracts: DomainContracts, skills: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Skill → the problems of its unmet requirements, for ``skills`` (default: every skill)."""
    base = Path(contracts.source).parent if contracts.source else Path.cwd()
    wanted = None if skills is None else set(skills)
    out: dict[str, list[str]] = {}
    for c in contracts.skills:
        if wanted is not None and c.name not in wanted:
            continue
        probs = [p for r in c.requires if (p := requirement_problem(r, base)) is not None]
        if probs:
            out[c.name] = probs
    return out


def check_requirements(contracts: DomainContracts, skills: Iterable[str] | None = None) -> None:
    """Raise :class:`MissingRequirementError` when a requirement of ``skills`` (default: all) is not met."""
    missing = missing_requirements(contracts, skills)
    if missing:
        raise MissingRequirementError(contracts.source, missing)
