"""``agentic-ray train`` refuses bad input before Ray starts or a run directory exists ("nothing half-way")."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from agentic_ray.skills.contracts import domain_file
from tests.helpers.cli import invoke


def _ray_started() -> bool:
    """Whether this process has a Ray connection (the shared integration cluster may already be up)."""
    return "ray" in sys.modules and bool(sys.modules["ray"].is_initialized())


def _experiment(tmp_path: Path, **env: object) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(yaml.safe_dump({"name": "pre", "storage_path": str(tmp_path / "runs"), "env": env}))
    return p


def test_unknown_field_exits_2_naming_file_and_field(tmp_path):
    p = tmp_path / "exp.yaml"
    p.write_text(
        yaml.safe_dump(
            {"name": "pre", "storage_path": str(tmp_path / "runs"), "stages": {"rl": {"iters": 3}}}
        )
    )
    ray_before = _ray_started()
    r = invoke(["train", "--config", str(p)])
    assert r.exit_code == 2 and f"{p}: field stages.rl.iters: unknown field" in r.output, r.output
    assert not (tmp_path / "runs").exists() and _ray_started() == ray_before


def test_missing_required_resource_exits_2_before_anything_starts(tmp_path):
    contracts = yaml.safe_load(domain_file("ecommerce").read_text())
    refund = next(s for s in contracts["skills"] if s["name"] == "refund.trigger")
    refund["requires"] = [{"kind": "file", "target": "payments/ledger.db"}]
    cfile = tmp_path / "ecommerce.yaml"
    cfile.write_text(yaml.safe_dump(contracts))
    ray_before = _ray_started()
    r = invoke(["train", "--config", str(_experiment(tmp_path, contracts_path=str(cfile)))])
    assert r.exit_code == 2, r.output
    assert (
        "skill refund.trigger: required file" in r.output and str(tmp_path / "payments/ledger.db") in r.output
    )
    assert not (tmp_path / "runs").exists() and _ray_started() == ray_before


def test_broken_contract_file_exits_2(tmp_path):
    cfile = tmp_path / "ecommerce.yaml"
    cfile.write_text("domain: ecommerce\nskills: [\n")
    r = invoke(["train", "--config", str(_experiment(tmp_path, contracts_path=str(cfile)))])
    assert r.exit_code == 2 and f"{cfile}: cannot read YAML" in r.output, r.output
    assert not (tmp_path / "runs").exists()
