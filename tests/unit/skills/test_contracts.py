"""Contract loading: every YAML under configs/ loads; bad files name file, skill and field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agentic_ray.cli import app
from agentic_ray.skills.backends import PythonBackend
from agentic_ray.skills.contracts import ContractError, load_contracts
from agentic_ray.skills.executor import ToolExecutor
from tests.unit.skills import fixtures

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def test_every_yaml_under_configs_loads():
    files = sorted(CONFIGS.rglob("*.yaml"))
    assert files, "no YAML under configs/"
    for f in files:
        data = yaml.safe_load(f.read_text())
        assert isinstance(data, dict), f
        if f.parent.name == "skills":
            assert load_contracts(f).skills


def _write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(
    ("mutate", "field", "skill"),
    [
        (lambda d: d["skills"][0]["input"]["confidence"].update(min=2.0), "input.confidence", "detect.run"),
        (lambda d: d["skills"][2].update(sla={"timeout_ms": -1}), "sla.timeout_ms", "stock.check"),
        (lambda d: d["skills"][3]["input"]["amount"].update(type="decimal"), "input.amount", "refund.pay"),
        (lambda d: d["skills"][1].update(colour="blue"), "colour", "detect.backup"),
        (lambda d: d["skills"][0]["fallback"].append({"skill": "ghost.skill"}), "fallback", "detect.run"),
        (
            lambda d: d["skills"][3]["preconditions"][0].update(after="ghost.skill"),
            "preconditions",
            "refund.pay",
        ),
        (lambda d: d["skills"][0]["input"]["mode"].update(default="turbo"), "input.mode", "detect.run"),
        # impossible bounds and defaults
        (
            lambda d: d["skills"][0]["input"]["confidence"].update(min=float("nan")),
            "input.confidence",
            "detect.run",
        ),
        (
            lambda d: d["skills"][0]["input"]["max_detections"].update(default=99),
            "input.max_detections",
            "detect.run",
        ),
        (lambda d: d["skills"][0]["input"]["mode"].update(choices=[]), "input.mode", "detect.run"),
        (lambda d: d["skills"][0]["input"]["note"].update(default="x" * 17), "input.note", "detect.run"),
        (lambda d: d["skills"][0]["sla"].update(breaker_min_calls=30), "sla", "detect.run"),
        (
            lambda d: d["skills"][2].update(handler="tests.unit.skills.fixtures.stock"),
            "handler",
            "stock.check",
        ),
        # references that can never hold
        (lambda d: d.update(node_types=["user", "order"]), "input.part.node_type", "detect.run"),
        (
            lambda d: d["skills"][0]["fallback"].append({"skill": "stock.check"}),
            "fallback.1.skill",
            "detect.run",
        ),
        (
            lambda d: d["skills"][3]["preconditions"][0].update(where={"stock": 3}),
            "preconditions.0.where",
            "refund.pay",
        ),
        (
            lambda d: d["skills"][3]["preconditions"][0].update(where={"in_stock": "yes"}),
            "preconditions.0.where.in_stock",
            "refund.pay",
        ),
        (
            lambda d: d["skills"][3]["preconditions"][0].update(same=["amount"]),
            "preconditions.0.same",
            "refund.pay",
        ),
        (
            lambda d: d["skills"][3]["preconditions"][0].update(after="refund.pay"),
            "preconditions.0.after",
            "refund.pay",
        ),
    ],
)
def test_bad_file_names_file_skill_and_field(tmp_path, mutate, field, skill):
    data = copy.deepcopy(fixtures.CONTRACTS)
    mutate(data)
    p = _write(tmp_path, data)
    with pytest.raises(ContractError) as ei:
        load_contracts(p)
    msg = str(ei.value)
    assert str(p) in msg and field in msg and skill in msg, msg


def test_a_fallback_rule_the_domain_does_not_define_is_refused(tmp_path):
    data = copy.deepcopy(fixtures.CONTRACTS)
    data["skills"][2]["fallback"].append({"rule": "pray"})
    p = _write(tmp_path, data)
    dc = load_contracts(p)  # rules are the domain's: the file alone cannot know them
    with pytest.raises(ContractError) as ei:
        dc.check_rules(fixtures.RULES)
    assert str(p) in str(ei.value) and "stock.check" in str(ei.value) and "pray" in str(ei.value)
    with pytest.raises(ContractError):
        ToolExecutor(dc, PythonBackend(), rules=fixtures.RULES)
    dc.check_rules({**fixtures.RULES, "pray": lambda s, p: {}})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("domain: toy\nskills: [\n  - name: a.b\n", "cannot read YAML"),
        ("domain: toy\n  skills: x\n", "cannot read YAML"),
        ("- domain: toy\n", "top level must be a mapping"),
        ("", "top level must be a mapping"),
    ],
)
def test_malformed_yaml_is_a_contract_error_naming_the_file(tmp_path, text, problem):
    p = tmp_path / "broken.yaml"
    p.write_text(text)
    with pytest.raises(ContractError) as ei:
        load_contracts(p)
    assert str(p) in str(ei.value) and problem in str(ei.value)
    if problem == "cannot read YAML":
        assert "line" in str(ei.value)  # where in the file
    r = CliRunner().invoke(app, ["skills", "validate", str(p)])
    assert r.exit_code == 1 and problem in r.output


def test_shipped_contracts_declare_their_node_types():
    from agentic_ray.skills.contracts import EntityListParam, EntityParam, domain_file

    for name in ("ecommerce", "helpdesk"):
        dc = load_contracts(domain_file(name))
        used = {
            p.node_type
            for s in dc.skills
            for p in s.input.values()
            if isinstance(p, EntityParam | EntityListParam)
        }
        assert dc.node_types is not None and used == set(dc.node_types)


def test_cli_validate_reports_and_exits_nonzero(tmp_path):
    good = _write(tmp_path, fixtures.CONTRACTS)
    r = CliRunner().invoke(app, ["skills", "validate", str(good)])
    assert r.exit_code == 0 and "6 skills" in r.output
    data = copy.deepcopy(fixtures.CONTRACTS)
    data["skills"][0]["retry"] = {"max_retries": -1}
    bad = tmp_path / "worse.yaml"
    bad.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(app, ["skills", "validate", str(bad)])
    assert r.exit_code == 1 and "retry.max_retries" in r.output and "detect.run" in r.output


def test_default_retry_policy_is_two_retries_exponential():
    dc = load_contracts(_write(Path(pytest.importorskip("tempfile").mkdtemp()), fixtures.CONTRACTS))
    r = dc.by_name()["stock.check"].retry
    assert r.max_retries == 2 and r.backoff_multiplier == 2.0


@pytest.mark.parametrize("domain", ["ecommerce", "helpdesk"])
def test_skills_check_runs_every_skill_ok(domain):
    from agentic_ray.envs.skill_check import run_skill_check
    from agentic_ray.skills.contracts import domain_file

    rows = run_skill_check(domain)
    names = [s.name for s in load_contracts(domain_file(domain)).skills]
    assert [r["skill"] for r in rows] == names and len(names) >= 12
    assert all(r["ok"] and r["code"] == "OK" for r in rows), [r for r in rows if not r["ok"]]
    assert {r["via"].split(":")[0] for r in rows} <= {"expert", "contract"}
    r = CliRunner().invoke(app, ["skills", "check", "--domain", domain])
    assert r.exit_code == 0 and f"{len(names)}/{len(names)} skills returned OK" in r.output


def test_a_string_source_is_a_request_fact_or_a_revealed_field():
    """``source: request.<fact>`` copies a request fact (``max_values`` of them at most), ``source: <type>.<field>``
    a revealed field of an entity (issue 26, point 3)."""
    from agentic_ray.skills.contracts import StringParam

    fact = StringParam(source="request.email", max_values=2)
    assert (fact.request_fact, fact.copy_field, fact.max_values) == ("email", None, 2)
    field = StringParam(source="order.address")
    assert (field.request_fact, field.copy_field) == (None, ("order", "address"))
    assert StringParam().request_fact is None and StringParam().copy_field is None
    with pytest.raises(ValueError, match="max_values is for strings copied from a request fact"):
        StringParam(source="order.address", max_values=2)
    with pytest.raises(ValueError, match="String should match pattern"):
        StringParam(source="address")
