"""The ``agentic-ray`` command line. Entry points build configuration and call one function each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="agentic-ray: train tool-using agents with RL on Ray.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
skills_app = typer.Typer(help="Skill contracts and the tool gateway.", no_args_is_help=True)
app.add_typer(skills_app, name="skills")


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
) -> None:
    """Host a domain's simulated tools as a real FastAPI service with fault injection."""
    import uvicorn

    from agentic_ray.skills.backends import FaultConfig
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
    dc, world_from_dict, world = _domain_contracts(domain, contracts)
    uvicorn.run(create_app(dc, faults, world_from_dict, world), host=host, port=port, log_level="warning")


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
    from agentic_ray.skills.check import run_skill_check

    rows = run_skill_check(domain, url=url, seed=seed)
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r))
    else:
        typer.echo(_table(rows, ["skill", "code", "ok", "latency_ms", "attempts", "fallback", "via"]))
    failed = [r for r in rows if not r["ok"]]
    typer.echo(f"\n{len(rows) - len(failed)}/{len(rows)} skills returned OK through the executor")
    raise typer.Exit(1 if failed else 0)


@app.command("train")
def train(
    config: Annotated[Path | None, typer.Option(help="Experiment YAML (configs/<experiment>.yaml).")] = None,
    resume: Annotated[
        Path | None, typer.Option(help="Continue RUN_DIR from its last completed checkpoint.")
    ] = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="Where to write the run (default: runs/<name>-<time>).")
    ] = None,
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: embedded local Ray).")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a setting: key.path=value (YAML).")
    ] = None,
) -> None:
    """Train: imitation → RL → reflection, with gates, per-stage checkpoints and evaluation."""
    import yaml

    from agentic_ray.settings import ExperimentSettings, SettingsError, load_settings
    from agentic_ray.stages.pipeline import run_pipeline

    overrides = {k: yaml.safe_load(v) for k, _, v in (x.partition("=") for x in (set_ or []))}
    try:
        if config is not None:
            settings = load_settings(config, overrides)
        elif resume is not None:
            settings = ExperimentSettings.model_validate_json((resume / "settings.json").read_text())
        else:
            raise typer.BadParameter("give --config or --resume")
    except SettingsError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from e
    _init_ray(address or settings.ray.address, settings.ray.num_cpus)
    out = run_pipeline(settings, run_dir=run_dir, resume=resume)
    typer.echo(f"\nrun directory: {out['run_dir']}  (status: {out['status']})")
    typer.echo(_metrics_table(out["final"]))
    raise typer.Exit(0 if out["status"] in ("finished", "gate_failed", "paused") else 1)


@app.command("eval")
def eval_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `agentic-ray train`.")],
    checkpoint: Annotated[str, typer.Option(help="Stage checkpoint: reflection, rl, il or latest.")] = "",
    tasks_per_family: Annotated[int | None, typer.Option(help="Validation tasks per family.")] = None,
) -> None:
    """Re-evaluate a run's checkpoint on the fixed validation tasks and print the metrics."""
    from agentic_ray.eval.evaluator import ModulePolicy, evaluate_policy, validation_env_config
    from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint
    from agentic_ray.settings import ExperimentSettings

    settings = ExperimentSettings.model_validate_json((run_dir / "settings.json").read_text())
    ckpt = pick_checkpoint(run_dir, checkpoint or None)
    module = load_policy_module(ckpt)
    # The same validation env as the run's own evaluations (fixed fault share, no curriculum).
    env_cfg = validation_env_config(settings.env, settings.eval.fault_share)
    res = evaluate_policy(
        ModulePolicy(module),
        env_cfg,
        tasks_per_family or settings.eval.tasks_per_family,
        cu_ablation=settings.eval.cu_ablation,
    )
    typer.echo(f"checkpoint: {ckpt}")
    typer.echo(_metrics_table(res.metrics.to_dict()))
    typer.echo(json.dumps({"attribution": res.attribution}, indent=2))


@app.command("trace")
def trace_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.")],
    trace_id: Annotated[str, typer.Argument(help="Episode trace id, or any step's gateway trace id.")],
) -> None:
    """Print an evaluated episode step by step: probabilities, arguments, masks, results, rewards, attention."""
    from agentic_ray.eval.traces import find_trace, format_trace

    t = find_trace(run_dir, trace_id)
    if t is None:
        typer.echo(f"no trace {trace_id} in {run_dir}", err=True)
        raise typer.Exit(1)
    typer.echo(format_trace(t))


def _init_ray(address: str | None, num_cpus: int | None) -> None:
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


def _metrics_table(m: dict[str, Any]) -> str:
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
    return _table(rows, ["metric", "value"]) if rows else "(no evaluation)"


def _domain_contracts(domain: str | None, contracts: Path | None) -> tuple[Any, Any, Any]:
    from agentic_ray.skills.contracts import load_contracts

    if contracts is not None:
        return load_contracts(contracts), None, None
    if domain is None:
        raise typer.BadParameter("give --domain or --contracts")
    from agentic_ray.skills.domains import get_domain

    d = get_domain(domain)
    return load_contracts(d.contracts_path), d.world_from_dict, d.make_world(0)


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
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


if __name__ == "__main__":
    app()
