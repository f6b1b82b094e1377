"""Helpers shared by the command modules: Ray start-up, tables, domain contracts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def init_ray(address: str | None, num_cpus: int | None) -> None:
    """Connect to a cluster, or start an embedded local Ray with its own temp dir."""
    import os
    import tempfile

    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address or os.environ["RAY_ADDRESS"], log_to_driver=False)
    else:
        root = os.environ.get(
            "AGENTIC_RAY_TMPDIR", "/tmp"
        )  # keep it short: Ray's socket paths have a length cap
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            _temp_dir=tempfile.mkdtemp(prefix="agray_", dir=root),
            log_to_driver=False,
            configure_logging=False,
        )


def metrics_table(m: dict[str, Any]) -> str:
    keys = [
        "tcsr",
        "dvr",
        "entity_recall_at_5",
        "cu",
        "spt",
        "spt_over_optimal",
        "completion",
        "high_risk_share",
    ]
    rows = [{"metric": k, "value": "n/a" if m.get(k) is None else f"{m[k]:.3f}"} for k in keys if k in m]
    return table(rows, ["metric", "value"]) if rows else "(no evaluation)"


def domain_contracts(domain: str | None, contracts: Path | None) -> tuple[Any, Any, Any]:
    from agentic_ray.skills.contracts import load_contracts

    if contracts is not None:
        return load_contracts(contracts), None, None
    if domain is None:
        raise typer.BadParameter("give --domain or --contracts")
    from agentic_ray.domains import get_domain, sample_world

    d = get_domain(domain)
    return d.contracts(), d.world_from_dict, sample_world(d)


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.2f}"
        if isinstance(v, list):
            return "; ".join(map(str, v)) or "-"
        return "-" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    w = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w[i]) for i, c in enumerate(cols))
    sep = "  ".join("-" * x for x in w)
    return "\n".join([line, sep] + ["  ".join(v.ljust(w[i]) for i, v in enumerate(row)) for row in cells])
