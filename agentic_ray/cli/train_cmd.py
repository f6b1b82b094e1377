"""``agentic-ray train | eval | trace``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentic_ray.cli.app import app
from agentic_ray.cli.common import UserError, init_ray, metrics_table, parse_overrides, run_directory
from agentic_ray.cli.exit_codes import exit_code_for, status_line


def _local_run(where: str, need: str = "settings.json") -> Path:
    """A run directory given as a path or URI -> its local working copy (pulled from the storage location), or a
    one-line :class:`UserError`."""
    from agentic_ray.stages.run_storage import RunStorage

    storage = RunStorage(where)
    if not storage.pull():
        raise UserError(f"no such run directory: {where} does not exist")
    return run_directory(storage.local_dir, need)


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

    Exits 0 when the run finished, 3 when it stopped at a failed gate, 4 when auto-pause paused it, 5 when a
    stage's policy was worse than the one it received and the earlier checkpoint went forward (see
    agentic_ray/cli/exit_codes.py), so `ray job submit` reports those jobs as FAILED; 2 on a usage error.
    """
    from agentic_ray.cli.preflight import PreflightError, check_env, load_resume
    from agentic_ray.eval.report import REPORT_FILE
    from agentic_ray.progress import make_progress
    from agentic_ray.settings import SettingsError, load_settings
    from agentic_ray.stages.pipeline import STATE_FILE, run_pipeline

    overrides = parse_overrides(set_)
    if storage_path is not None:
        overrides["storage_path"] = storage_path
    if config is not None and resume is not None:
        raise UserError("give --config or --resume, not both (a resumed run keeps its own settings.json)")
    if resume is not None and overrides:
        raise UserError(
            f"--set cannot be combined with --resume: the run continues with {resume}/settings.json as "
            "it started (start a new run with --config and --set to change settings)"
        )
    local_run: Path | None = None  # the resumed run's local working copy (a URI run is pulled once)
    try:  # every check before Ray starts or a run directory exists
        if config is not None:
            if not config.exists():
                raise UserError(f"config file {config} does not exist")
            settings = load_settings(config, overrides)
        elif resume is not None:
            local_run = _local_run(resume, STATE_FILE)
            settings = load_resume(local_run)
        else:
            raise UserError("give --config CONFIG.yaml to start a run, or --resume RUN_DIR to continue one")
        check_env(settings)
    except (SettingsError, PreflightError) as e:
        raise UserError("; ".join(str(e).splitlines())) from e
    out = None
    if resume is not None and local_run is not None:
        from agentic_ray.stages.pipeline import finished_run
        from agentic_ray.stages.run_storage import RunStorage

        out = finished_run(local_run, list(settings.stages.run))
        if out is not None:
            out["run_dir"] = str(RunStorage(resume))
            typer.echo(
                f"run directory: {out['run_dir']}\nevery stage of this run has finished: nothing to resume"
            )
    if out is None:
        init_ray(address or settings.ray.address, settings.ray.num_cpus)
        out = run_pipeline(settings, run_dir=run_dir, resume=resume, progress=make_progress())
    run = out["run_dir"]
    typer.echo("")
    typer.echo(metrics_table(out["final"]))
    typer.echo(f"\nrun directory: {run}  (status: {out['status']})")
    typer.echo(f"report:        {run}/{REPORT_FILE}")
    typer.echo(f"dashboard:     agentic-ray dashboard {run}")
    typer.echo(status_line(out["status"], out.get("gates")))
    raise typer.Exit(exit_code_for(out["status"]))


@app.command("eval")
def eval_cmd(
    run_dir: Annotated[
        str, typer.Argument(help="A run directory (path or URI) written by `agentic-ray train`.")
    ],
    checkpoint: Annotated[str, typer.Option(help="Stage checkpoint: reflection, rl, il or latest.")] = "",
    tasks_per_family: Annotated[int | None, typer.Option(min=1, help="Validation tasks per family.")] = None,
    cu: Annotated[
        bool | None,
        typer.Option(
            "--cu/--no-cu",
            help="Run the Correction Uplift ablation (default: as the run's eval.cu_ablation). It rolls paired "
            "episodes until eval.cu_min_pairs first failures, so it is most of eval's time.",
        ),
    ] = None,
    allow_oracle: Annotated[
        bool,
        typer.Option(
            "--allow-oracle",
            help="Evaluate a policy trained with the env's privileged root cause (model.reflection_source: "
            "oracle_env), an oracle ablation; refused without this flag.",
        ),
    ] = False,
) -> None:
    """Re-evaluate a run's checkpoint on the fixed validation tasks and print the metrics.

    Exits like the run did: 3 if it stopped at a failed gate, 4 if it paused, 0 if it finished. A policy trained
    with the oracle is refused unless ``--allow-oracle`` is given; its metrics then print ``oracle: true``.
    """
    from agentic_ray.cli.preflight import PreflightError, load_run_settings
    from agentic_ray.eval.evaluator import ModulePolicy, cu_env_config, evaluate_policy, validation_env_config
    from agentic_ray.eval.policy_loading import (
        STAGE_ORDER,
        CheckpointError,
        load_policy_module,
        pick_checkpoint,
        uses_oracle,
    )
    from agentic_ray.stages.pipeline import PipelineState

    if checkpoint and checkpoint not in STAGE_ORDER:
        raise UserError(f"--checkpoint {checkpoint}: expected one of {', '.join(STAGE_ORDER)}")
    run = _local_run(run_dir)
    try:
        settings = load_run_settings(run)
        ckpt = pick_checkpoint(run, checkpoint or None)
        module = load_policy_module(ckpt, allow_oracle=allow_oracle)
    except FileNotFoundError as e:
        raise UserError(f"{run_dir} has no {checkpoint or 'stage'} checkpoint yet ({e})") from e
    except (PreflightError, CheckpointError) as e:
        raise UserError("; ".join(str(e).splitlines())) from e
    # The same validation env as the run's own evaluations (fixed fault share, no curriculum).
    env_cfg = validation_env_config(settings.env, settings.eval.fault_share)
    res = evaluate_policy(
        ModulePolicy(module),
        env_cfg,
        tasks_per_family or settings.eval.tasks_per_family,
        cu_ablation=settings.eval.cu_ablation if cu is None else cu,
        cu_env=cu_env_config(env_cfg, settings.eval.cu_caller_error_share),
        cu_min_pairs=settings.eval.cu_min_pairs,
    )
    typer.echo(f"checkpoint: {ckpt}")
    typer.echo(f"oracle: {str(uses_oracle(module)).lower()}")
    typer.echo(metrics_table(res.metrics.to_dict()))
    typer.echo(json.dumps({"attribution": res.attribution, "correction": res.correction}, indent=2))
    state = PipelineState.load(run) if (run / "state.json").exists() else None
    if state is not None and state.status in ("gate_failed", "paused", "regressed"):
        typer.echo(status_line(state.status, state.gates))
        raise typer.Exit(exit_code_for(state.status))


@app.command("trace")
def trace_cmd(
    run_dir: Annotated[str, typer.Argument(help="A run directory (path or URI).")],
    trace_id: Annotated[str, typer.Argument(help="Episode trace id, or any step's gateway trace id.")],
) -> None:
    """Print an evaluated episode step by step: probabilities, arguments, masks, results, rewards, attention."""
    from agentic_ray.eval.traces import TRACES_FILE, find_trace, format_trace

    run = _local_run(run_dir, TRACES_FILE)
    t = find_trace(run, trace_id)
    if t is None:
        raise UserError(f"no trace {trace_id} in {run_dir}/{TRACES_FILE}")
    typer.echo(format_trace(t))
