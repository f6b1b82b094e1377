"""Dependencies point one way: envs depend on domains, never the reverse; models and skills know no env.

Checked on the import statements of every module (module-level and function-local imports alike).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "agentic_ray"

FORBIDDEN = {
    "domains": (
        "agentic_ray.envs",
        "agentic_ray.models",
        "agentic_ray.eval",
        "agentic_ray.stages",
        "agentic_ray.rollout",
    ),
    "models": ("agentic_ray.envs", "agentic_ray.domains"),
    "skills": ("agentic_ray.envs", "agentic_ray.domains"),
}


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_downstream(package: str) -> None:
    bad = [
        f"{p.relative_to(ROOT.parent)} imports {m}"
        for p in (ROOT / package).rglob("*.py")
        for m in _imports(p)
        if m.startswith(FORBIDDEN[package])
    ]
    assert not bad, "\n".join(bad)


def test_the_neutral_contract_imports_nothing_of_the_project() -> None:
    assert not [m for m in _imports(ROOT / "graph_spec.py") if m.startswith("agentic_ray")]
