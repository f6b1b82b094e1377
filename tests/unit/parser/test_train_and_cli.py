"""``agentic-ray parser train`` builds a parser for a registered domain from its renderings (tiny budget), and the
parser package names no domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_ray.cli import app
from agentic_ray.domains import get_domain
from agentic_ray.parser.goal_parser import GoalParser

PARSER_SRC = Path(__file__).resolve().parents[3] / "agentic_ray" / "parser"


def test_train_command_writes_a_working_parser(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        app(args=["parser", "train", "--domain", "helpdesk", "--out", str(tmp_path), "--per-family", "3"])
    assert e.value.code == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["domain"] == "helpdesk" and line["examples"] == 15
    p = GoalParser.load(tmp_path)
    r = p.parse("I am locked out of my account. Please reset my password and send the new one by SMS.", [])
    assert r.families == ("password_reset",)
    assert (r.clarify is not None and r.clarify.missing == ("badge",)) or r.clarify.missing == ("email",)


def test_parser_package_names_no_domain() -> None:
    src = "\n".join(p.read_text() for p in PARSER_SRC.glob("*.py"))
    for name in ("ecommerce", "helpdesk", "inspection"):
        assert name not in src
        for fam in get_domain(name).families:
            assert f'"{fam}"' not in src, fam


def test_a_domain_without_renderings_is_one_clear_error(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        app(args=["parser", "train", "--domain", "inspection"], prog_name="agentic-ray")
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2
    assert len(err) == 1 and "ships no renderings" in err[0] and "renderings" in err[0]
