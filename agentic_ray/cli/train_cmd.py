"""``agentic-ray train | eval | trace``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import app
from agentic_ray.cli.common import init_ray, metrics_table


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

    from agentic_ray.cli.preflight import PreflightError, check_env, load_resume
    from agentic_ray.settings import SettingsError, load_settings
    from agentic_ray.stages.pipeline import run_pipeline

    overrides = {k: yaml.safe_load(v) for k, _, v in (x.partition("=") for x in (set_ or []))}
    try:  # every check before Ray starts or a run directory exists
        if config is not None:
            settings = load_settings(config, overrides)
        elif resume is not None:
            settings = load_resume(resume)
        else:
            raise typer.BadParameter("give --config or --resume")
        check_env(settings)
    except (SettingsError, PreflightError) as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from e
    init_ray(address or settings.ray.address, settings.ray.num_cpus)
    out = run_pipeline(settings, run_dir=run_dir, resume=resume)
    typer.echo(f"\nrun directory: {out['run_dir']}  (status: {out['status']})")
    typer.echo(metrics_table(out["final"]))
    raise typer.Exit(0 if out["status"] in ("finished", "gate_failed", "paused") else 1)


@app.command("eval")
def eval_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `agentic-ray train`.")],
    checkpoint: Annotated[str, typer.Option(help="Stage checkpoint: reflection, rl, il or latest.")] = "",
    tasks_per_family: Annotated[int | None, typer.Option(help="Validation tasks per family.")] = None,
) -> None:
    """Re-evaluate a run's checkpoint on the fixed validation tasks and print the metrics."""
    from agentic_ray.cli.preflight import PreflightError, load_run_settings
    from agentic_ray.eval.evaluator import ModulePolicy, cu_env_config, evaluate_policy, validation_env_config
    from agentic_ray.eval.policy_loading import CheckpointError, load_policy_module, pick_checkpoint

    try:
        settings = load_run_settings(run_dir)
        ckpt = pick_checkpoint(run_dir, checkpoint or None)
        module = load_policy_module(ckpt)
    except (PreflightError, CheckpointError, FileNotFoundError) as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from e
    # The same validation env as the run's own evaluations (fixed fault share, no curriculum).
    env_cfg = validation_env_config(settings.env, settings.eval.fault_share)
    res = evaluate_policy(
        ModulePolicy(module),
        env_cfg,
        tasks_per_family or settings.eval.tasks_per_family,
        cu_ablation=settings.eval.cu_ablation,
        cu_env=cu_env_config(env_cfg, settings.eval.cu_caller_error_share),
        cu_min_pairs=settings.eval.cu_min_pairs,
    )
    typer.echo(f"checkpoint: {ckpt}")
    typer.echo(metrics_table(res.metrics.to_dict()))
    typer.echo(json.dumps({"attribution": res.attribution, "correction": res.correction}, indent=2))


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
