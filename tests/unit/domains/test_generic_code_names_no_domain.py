"""Nothing outside a domain's package names its tools, node types or fields (house style 13).

Every string constant in the code of the generic packages (docstrings and field descriptions aside) is checked against the e-commerce
domain's skill names, entity types and schema field names, and against its family names.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agentic_ray.domains import get_domain

ROOT = Path(__file__).resolve().parents[3] / "agentic_ray"
DOMAIN_PACKAGES = {
    ROOT / "domains" / name
    for name in ("ecommerce", "ecommerce_memory", "helpdesk", "helpdesk_memory", "inspection")
}


GENERIC_WORDS: dict[str, str] = {
    "user": "an OpenAI chat message role (the LLM judge)",
    "category": "FieldSpec.kind: a one-hot feature encoding",
    "status": "a run's, a ledger row's or a reward result's status",
    "kind": "the kind of a consequence, a fault or a reward message",
    "priority": "Goal.priority: a goal DAG field (the goal bodies that serving builds from a parse)",
}
"""Common words that some domain also uses as a field or type name, and what they mean in generic code."""


def _domain_names(name: str) -> set[str]:
    d = get_domain(name)
    names = {c.name for c in d.contracts().skills} | set(d.schema.type_names) | set(d.families)
    names |= {f.name for t in d.schema.entity_types for f in t.fields}
    names |= {lk.field for lk in d.schema.links} | {h.name for h in d.schema.goal_hints}
    return names


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # a field's description is documentation too (it may cite a measured example)
    docstrings |= {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword)
        and node.arg == "description"
        and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def _generic_files() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if not any(pkg in p.parents for pkg in DOMAIN_PACKAGES)]


@pytest.mark.parametrize("domain", ["ecommerce", "helpdesk", "inspection"])
def test_generic_packages_name_no_domain_tool_type_or_field(domain: str) -> None:
    names = _domain_names(domain)
    hits = [
        f"{p.relative_to(ROOT.parent)}:{line}: {value!r}"
        for p in _generic_files()
        for line, value in _string_constants(p)
        if value in names - set(GENERIC_WORDS)
    ]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("domain", ["ecommerce", "helpdesk", "inspection"])
def test_generic_strings_mention_no_domain_skill(domain: str) -> None:
    """Skill names are dotted and distinctive, so they are also looked for inside longer strings (a hypothesis text
    in the evaluator once advised "inventory.check" to every domain)."""
    skills = {c.name for c in get_domain(domain).contracts().skills}
    hits = [
        f"{p.relative_to(ROOT.parent)}:{line}: {value!r}"
        for p in _generic_files()
        for line, value in _string_constants(p)
        for skill in skills
        if re.search(rf"(?<![\w.]){re.escape(skill)}(?![\w.])", value)
    ]
    assert not hits, "\n".join(hits)


def test_the_check_would_catch_a_name() -> None:
    """The checker itself: a literal skill name in generic code is found."""
    names = _domain_names("ecommerce")
    probe = ROOT.parent / "tests" / "unit" / "domains" / "_probe_generic.py"
    probe.write_text('"""doc naming refund.trigger is fine."""\nX = "refund.trigger"\n')
    try:
        assert [v for _, v in _string_constants(probe) if v in names] == ["refund.trigger"]
    finally:
        probe.unlink()
