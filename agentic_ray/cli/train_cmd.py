"""``agentic-ray train | eval | trace``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import app
from agentic_ray.cli.common import init_ray, metrics_table, parse_overrides
from agentic_ray.cli.exit_codes import EXIT_USAGE, exit_code_for, status_line


@app.command("train")
def train(
    config: Annotated[Path | None, typer.Option(help="Experiment YAML (configs/<experiment>.yaml).")] = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue RUN_DIR (a path or URI) from its last checkpoint.")
    ] = None,
    run_dir: Annotated[
        str | None,
        typer.Option(help="Where to write the run, a path or URI (default: <storage path>/<name>-<time>)."),
    ] = None,
    storage_path: Annotated[
        str | None,
        typer.Option(
            help="Root of run directories: an absolute path or a URI (s3://, gs://, file://). Default: the "
            "setting storage_path, else $AGENTIC_RAY_STORAGE_PATH, else ~/agentic_ray_results."
        ),
    ] = None,
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: embedded local Ray).")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a setting: key.path=value (YAML).")
    ] = None,
) -> None:
    """Train: imitation → RL → reflection, with gates, per-stage checkpoints and evaluation.

    Exits 0 when the run finished, 3 when it stopped at a failed gate, 4 when auto-pause paused it
    (see agentic_ray/cli/exit_codes.py), so `ray job submit` reports those jobs as FAILED.
    """
    from agentic_ray.cli.preflight import PreflightError, check_env, load_resume
    from agentic_ray.settings import SettingsError, load_settings
    from agentic_ray.stages.pipeline import run_pipeline
    from agentic_ray.stages.run_storage import RunStorage

    overrides = parse_overrides(set_)
    if storage_path is not None:
        overrides["storage_path"] = storage_path
    try:  # every check before Ray starts or a run directory exists
        if config is not None:
            settings = load_settings(config, overrides)
        elif resume is not None:
            storage = RunStorage(resume)
            if not storage.pull():
                raise PreflightError(f"--resume {storage}: no such run directory")
            settings = load_resume(storage.local_dir)
        else:
            raise typer.BadParameter("give --config or --resume")
        check_env(settings)
    except (SettingsError, PreflightError) as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(EXIT_USAGE) from e
    init_ray(address or settings.ray.address, settings.ray.num_cpus)
    out = run_pipeline(settings, run_dir=run_dir, resume=resume)
    typer.echo(f"\nrun directory: {out['run_dir']}  (status: {out['status']})")
    typer.echo(metrics_table(out["final"]))
    typer.echo(status_line(out["status"], out.get("gates")))
    raise typer.Exit(exit_code_for(out["status"]))


@app.command("eval")
def eval_cmd(
    run_dir: Annotated[
        str, typer.Argument(help="A run directory (path or URI) written by `agentic-ray train`.")
    ],
    checkpoint: Annotated[str, typer.Option(help="Stage checkpoint: reflection, rl, il or latest.")] = "",
    tasks_per_family: Annotated[int | None, typer.Option(help="Validation tasks per family.")] = None,
) -> None:
    """Re-evaluate a run's checkpoint on the fixed validation tasks and print the metrics.

    Exits like the run did: 3 if it stopped at a failed gate, 4 if it paused, 0 if it finished.
    """
    from agentic_ray.cli.preflight import PreflightError, load_run_settings
    from agentic_ray.eval.evaluator import ModulePolicy, evaluate_policy, validation_env_config
    from agentic_ray.eval.policy_loading import CheckpointError, load_policy_module, pick_checkpoint
    from agentic_ray.stages.pipeline import PipelineState
    from agentic_ray.stages.run_storage import RunStorage

    storage = RunStorage(run_dir)
    local = storage.local_dir
    try:
        if not storage.pull():
            raise PreflightError(f"no run at {storage}")
        settings = load_run_settings(local)
        ckpt = pick_checkpoint(local, checkpoint or None)
        module = load_policy_module(ckpt)
    except (PreflightError, CheckpointError, FileNotFoundError) as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(EXIT_USAGE) from e
    # The same validation env as the run's own evaluations (fixed fault share, no curriculum).
    env_cfg = validation_env_config(settings.env, settings.eval.fault_share)
    res = evaluate_policy(
        ModulePolicy(module),
        env_cfg,
        tasks_per_family or settings.eval.tasks_per_family,
        cu_ablation=settings.eval.cu_ablation,
    )
    typer.echo(f"checkpoint: {ckpt}")
    typer.echo(metrics_table(res.metrics.to_dict()))
    typer.echo(json.dumps({"attribution": res.attribution}, indent=2))
    state = PipelineState.load(local) if (local / "state.json").exists() else None
    if state is not None and state.status in ("gate_failed", "paused"):
        typer.echo(status_line(state.status, state.gates))
        raise typer.Exit(exit_code_for(state.status))


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
