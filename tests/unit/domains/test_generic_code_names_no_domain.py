"""Nothing outside a domain's package names its tools, node types or fields (house style 13).

Every string constant in the code of the generic packages (docstrings aside) is checked against the e-commerce
domain's skill names, entity types and schema field names, and against its family names.
"""

from __future__ import annotations

import ast
from pathlib import Path

from agentic_ray.domains import get_domain

ROOT = Path(__file__).resolve().parents[3] / "agentic_ray"
DOMAIN_PACKAGES = {ROOT / "domains" / "ecommerce", ROOT / "domains" / "helpdesk"}


GENERIC_WORDS: tuple[tuple[str, str], ...] = (
    ("agentic_ray/rewards/judge_service.py", "'user'"),  # an OpenAI chat message role
    ("agentic_ray/rewards/layers/llm_judge_layer.py", "'user'"),  # the same role
    ("agentic_ray/domains/protocol.py", "'category'"),  # FieldSpec.kind, a feature encoding
    ("agentic_ray/envs/observation.py", "'category'"),  # the same encoding
    ("agentic_ray/stages/pipeline.py", "'status'"),  # a run's status
    ("agentic_ray/cli/train_cmd.py", "'status'"),
    ("agentic_ray/rewards/reward_actor_pool.py", "'status'"),  # a ledger row's status
    ("agentic_ray/rewards/reward_ledger.py", "'status'"),
)
"""Words some domain field shares with generic code in another meaning: (file, literal) pairs, each explained."""


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
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def _generic_files() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if not any(pkg in p.parents for pkg in DOMAIN_PACKAGES)]


def test_generic_packages_name_no_ecommerce_tool_type_or_field() -> None:
    names = _domain_names("ecommerce")
    hits = [
        f"{p.relative_to(ROOT.parent)}:{line}: {value!r}"
        for p in _generic_files()
        for line, value in _string_constants(p)
        if value in names
    ]
    hits = [h for h in hits if not any(h.startswith(f) and h.endswith(v) for f, v in GENERIC_WORDS)]
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
