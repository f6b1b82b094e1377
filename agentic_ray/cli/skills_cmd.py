"""``agentic-ray skills validate | serve | check | handoffs``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import skills_app
from agentic_ray.cli.common import domain_contracts, registered_domain, table


@skills_app.command("validate")
def skills_validate(
    path: Annotated[Path, typer.Argument(help="A skill YAML file, or a folder of them.")],
) -> None:
    """Validate skill contracts. Exits 1 with file, skill and field named on the first bad file."""
    from agentic_ray.skills.contracts import ContractError, load_contracts

    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    if not files:
        typer.echo(f"no YAML files under {path}", err=True)
        raise typer.Exit(1)
    bad = 0
    for f in files:
        try:
            dc = load_contracts(f)
            typer.echo(f"ok  {f}: domain {dc.domain}, {len(dc.skills)} skills")
        except ContractError as e:
            bad += 1
            typer.echo(str(e), err=True)
    raise typer.Exit(1 if bad else 0)


@skills_app.command("serve")
def skills_serve(
    domain: Annotated[str | None, typer.Option(help="Registered domain to host (e.g. ecommerce).")] = None,
    contracts: Annotated[
        Path | None, typer.Option(help="Or: a contract file whose handlers to host.")
    ] = None,
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8321,
    failure_rate: Annotated[float, typer.Option(help="Share of calls failing with UPSTREAM_ERROR.")] = 0.0,
    timeout_rate: Annotated[float, typer.Option(help="Share of calls hanging past their timeout.")] = 0.0,
    garbage_rate: Annotated[float, typer.Option(help="Share of calls returning a garbled payload.")] = 0.0,
    latency_ms: Annotated[float, typer.Option(help="Mean added latency (ms).")] = 0.0,
    latency_std_ms: Annotated[float, typer.Option(help="Std of added latency (ms).")] = 0.0,
    latency_dist: Annotated[str, typer.Option(help="normal or lognormal.")] = "normal",
    seed: Annotated[int | None, typer.Option(help="Fault RNG seed.")] = None,
    audit: Annotated[
        Path | None, typer.Option(help="Audit SQLite file whose human-handoff queue GET /handoffs serves.")
    ] = None,
) -> None:
    """Host a domain's simulated tools as a real FastAPI service with fault injection.

    Exits 2 before listening when a contract does not load, a handler does not import or a `requires:` resource
    is missing (the message names the skill and the resource).
    """
    import uvicorn

    from agentic_ray.skills.backends import FaultConfig
    from agentic_ray.skills.contracts import ContractError
    from agentic_ray.skills.requirements import MissingRequirementError
    from agentic_ray.skills.server import create_app

    faults = FaultConfig(
        failure_rate=failure_rate,
        timeout_rate=timeout_rate,
        garbage_rate=garbage_rate,
        latency_ms=latency_ms,
        latency_std_ms=latency_std_ms,
        latency_dist=latency_dist,
        seed=seed,
    )
    try:
        dc, world_from_dict, world = domain_contracts(domain, contracts)
        app = create_app(dc, faults, world_from_dict, world, audit_path=audit)
    except (ContractError, MissingRequirementError, KeyError) as e:
        typer.echo(str(e).strip('"'), err=True)
        raise typer.Exit(2) from e
    uvicorn.run(app, host=host, port=port, log_level="warning")


@skills_app.command("check")
def skills_check(
    domain: Annotated[str, typer.Option(help="Registered domain (e.g. ecommerce).")] = "ecommerce",
    url: Annotated[
        str | None, typer.Option(help="Call a running skill server instead of in-process.")
    ] = None,
    seed: Annotated[int, typer.Option(help="World seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines instead of a table.")] = False,
) -> None:
    """Run every skill of a domain once through the ToolExecutor and print a table."""
    from agentic_ray.envs.skill_check import run_skill_check

    registered_domain(domain)
    rows = run_skill_check(domain, url=url, seed=seed)
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r))
    else:
        typer.echo(table(rows, ["skill", "code", "ok", "latency_ms", "attempts", "fallback", "via"]))
    failed = [r for r in rows if not r["ok"]]
    typer.echo(f"\n{len(rows) - len(failed)}/{len(rows)} skills returned OK through the executor")
    raise typer.Exit(1 if failed else 0)


@skills_app.command("handoffs")
def skills_handoffs(
    audit: Annotated[
        Path, typer.Option(help="The audit SQLite file (env.audit_path / ToolExecutor audit_path).")
    ],
    status: Annotated[str, typer.Option(help="open, resolved or all.")] = "open",
    resolve: Annotated[int | None, typer.Option(help="Mark this handoff id resolved.")] = None,
    note: Annotated[str, typer.Option(help="Resolution note (with --resolve).")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines instead of a table.")] = False,
) -> None:
    """List the human-handoff queue (calls the gateway could not complete), or resolve one item."""
    from agentic_ray.skills.handoff_queue import STATUSES, HandoffQueue

    if not audit.is_file():
        typer.echo(f"no audit file {audit}", err=True)
        raise typer.Exit(2)
    if status not in (*STATUSES, "all"):
        typer.echo(f"--status must be one of {[*STATUSES, 'all']}, got {status!r}", err=True)
        raise typer.Exit(2)
    q = HandoffQueue(audit)
    try:
        if resolve is not None:
            if not q.resolve(resolve, note):
                typer.echo(f"no open handoff {resolve} in {audit}", err=True)
                raise typer.Exit(1)
            typer.echo(f"resolved handoff {resolve}")
            return
        items = q.list(None if status == "all" else status)
    finally:
        q.close()
    if as_json:
        for h in items:
            typer.echo(json.dumps(h.to_dict()))
        return
    rows = [{**h.to_dict(), "payload": json.dumps(h.payload)} for h in items]
    typer.echo(
        table(rows, ["id", "status", "trace_id", "skill", "reason", "message", "payload"]) if rows else ""
    )
    typer.echo(f"{len(items)} {status} handoff(s) in {audit}")
