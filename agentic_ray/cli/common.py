"""Helpers shared by the command modules: Ray start-up, tables, domain contracts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

try:  # typer >= 0.24 vendors click and raises its own copy of click's exceptions
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - older typer on the real click
    from click.exceptions import ClickException, UsageError  # type: ignore[assignment]

__all__ = ["ClickException", "UsageError", "UserError"]


class UserError(ClickException):
    """An error the user can fix (a wrong path, a bad option): printed as one line, exit code 2."""

    exit_code = 2


def run_directory(path: Path, need: str = "settings.json") -> Path:
    """``path`` as an absolute run directory, or a :class:`UserError` naming what is missing.

    Args:
        path: what the user typed (relative paths are resolved against the working directory).
        need: a file the command needs inside the run directory.
    """
    p = path.expanduser().resolve()
    if not p.exists():
        raise UserError(f"no such run directory: {path} does not exist")
    if not p.is_dir():
        raise UserError(f"{path} is not a directory (give a run directory written by `agentic-ray train`)")
    if need and not (p / need).exists():
        raise UserError(f"{path} is not a run directory: it has no {need}")
    return p


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``--set key.path=value`` options → ``{"key.path": value}`` (values parsed as YAML).

    Raises:
        UserError: an item without ``=`` or key, a value that is not YAML, the same key twice with different
            values, or a key set both as a value and as a section (``a=1`` and ``a.b=2``).
    """
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key or any(not part for part in key.split(".")):
            raise UserError(f"--set {item!r}: expected key.path=value, e.g. --set stages.rl.iterations=20")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise UserError(
                f"--set {item!r}: the value is not valid YAML ({' '.join(str(e).split())})"
            ) from e
        if key in out and out[key] != value:
            raise UserError(f"--set {key} is given twice with different values ({out[key]!r} and {value!r})")
        for other in out:
            if other.startswith(key + ".") or key.startswith(other + "."):
                raise UserError(
                    f"--set {other} and --set {key} conflict: one sets a section the other is inside"
                )
        out[key] = value
    return out


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
        "tcsr_policy",
        "dvr",
        "dvr_progress",
        "entity_recall_at_5",
        "forgetting",
        "cu",
        "evidence_uplift",
        "spt",
        "spt_over_optimal",
        "completion",
        "first_pass_completion",
        "high_risk_share",
    ]
    rows = [
        {
            "metric": k,
            "value": "n/a" if m.get(k) is None else f"{m[k]:.3f}",
            "n": m.get(f"{k}_n", ""),
        }
        for k in keys
        if k in m
    ]
    return table(rows, ["metric", "value", "n"]) if rows else "(no evaluation)"


def domain_contracts(domain: str | None, contracts: Path | None) -> tuple[Any, Any, Any]:
    from agentic_ray.skills.contracts import load_contracts

    if contracts is not None:
        return load_contracts(contracts), None, None
    if domain is None:
        raise typer.BadParameter("give --domain or --contracts")
    from agentic_ray.domains import sample_world

    d = registered_domain(domain)
    return d.contracts(), d.world_from_dict, sample_world(d)


def registered_domain(name: str) -> Any:
    """The registered domain ``name``, or a :class:`UserError` listing the known ones."""
    from agentic_ray.domains import get_domain

    try:
        return get_domain(name)
    except KeyError as e:  # documented: an unknown domain, the message lists the known ones
        raise UserError(str(e.args[0])) from e


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
