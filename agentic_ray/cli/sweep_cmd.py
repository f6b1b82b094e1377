"""``agentic-ray sweep``: a Ray Tune sweep ranked on validation metrics (``tune_sweeps/README.md``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from agentic_ray.cli.app import app
from agentic_ray.cli.common import init_ray, parse_overrides, table
from agentic_ray.cli.exit_codes import exit_code_for, status_line


@app.command("sweep")
def sweep(
    config: Annotated[Path | None, typer.Option(help="Sweep YAML (tune_sweeps/<sweep>.yaml).")] = None,
    resume: Annotated[
        Path | None, typer.Option(help="Continue the interrupted sweep in SWEEP_DIR (Tuner.restore).")
    ] = None,
    sweep_dir: Annotated[
        Path | None, typer.Option(help="Where to write the sweep (default: <storage>/<name>-<time>).")
    ] = None,
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: embedded local Ray, or RAY_ADDRESS).")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override a sweep field (key.path=value); overrides.<setting>=value changes the experiment.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="Validate the sweep and print its space and trial count; run nothing.")
    ] = False,
) -> None:
    """Sweep reward weights and AAAC settings with Ray Tune.

    Exits 0 when every trial finished, 1 if a trial failed after its retries, 3 if a trial (or the shared
    imitation run) stopped at a failed gate, 4 if one paused (agentic_ray/cli/exit_codes.py), so `ray job submit`
    does not report such a sweep as SUCCEEDED; 2 on a usage error.
    """
    from agentic_ray.settings import ExperimentSettings, SettingsError
    from agentic_ray.sweeps import SweepSettings, load_sweep, resume_sweep, run_sweep
    from agentic_ray.sweeps.sweep_runner import EXPERIMENT_FILE, SWEEP_FILE, ImitationStopped

    if (config is None) == (resume is None):
        raise typer.BadParameter("give either --config or --resume")
    try:
        if config is not None:
            s = load_sweep(config, parse_overrides(set_))
            base_raw = s.base_raw()
        else:
            assert resume is not None
            s = SweepSettings.model_validate_json((resume / SWEEP_FILE).read_text())
            base_raw = json.loads((resume / EXPERIMENT_FILE).read_text())
        base = ExperimentSettings.model_validate(base_raw)
        if dry_run:
            _print_plan(s, base_raw)
            return
    except SettingsError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from e
    init_ray(address or base.ray.address, base.ray.num_cpus)
    try:
        out = resume_sweep(resume) if resume is not None else run_sweep(s, sweep_dir)
    except ImitationStopped as e:
        typer.echo(f"{e}; {status_line(e.status)}", err=True)
        raise typer.Exit(exit_code_for(e.status)) from None
    _print_summary(out.summary)
    typer.echo(f"sweep {'ended' if out.exit_code else 'finished'}: exit {out.exit_code}")
    raise typer.Exit(out.exit_code)


def _print_plan(s: Any, base_raw: dict[str, Any]) -> None:
    from agentic_ray.sweeps.progress import format_params, short_name
    from agentic_ray.sweeps.search_space import build_search_space, param_space
    from agentic_ray.sweeps.sweep_runner import expected_trials

    space = build_search_space(s, base_raw)
    typer.echo(
        f"sweep {s.name}: searcher {s.searcher}, {expected_trials(s, param_space(s, space, base_raw))} trials"
    )
    typer.echo(f"objectives: {', '.join(s.objectives)}; Pareto pairs: {s.pareto_pairs}")
    if space.layers:
        bounds = ", ".join(
            f"{n} [{a:g}, {b:g}]" for n, a, b in zip(space.layers, space.lo, space.hi, strict=True)
        )
        typer.echo(f"reward weights (sum {space.total:g}): {bounds}")
    for path, spec in s.params.items():
        typer.echo(
            f"{short_name(path)} ({path}): {spec.model_dump(exclude_none=True, exclude_defaults=True)}"
        )
    typer.echo(f"default trial: {format_params(space.defaults) if s.include_default else 'off'}")


def _print_summary(summary: dict[str, Any]) -> None:
    best, default = summary.get("best"), summary.get("default")
    shown = [("best", best)] if best is not None else []
    if default is not None:
        if best is not None and default["trial_id"] == best["trial_id"]:
            shown = [("best, default", best)]
        else:
            shown.append(("default", default))
    rows = [
        {
            "": label,
            "trial": r["trial_id"],
            "rank": r["rank"],
            "front": r["pareto_rank"],
            **{m: r["metrics"].get(m) for m in summary["objectives"]},
        }
        for label, r in shown
    ]
    typer.echo("")
    if rows:
        typer.echo(table(rows, list(rows[0])))
    stopped = summary.get("pipeline_status", {})
    extra = "".join(
        f", {stopped[k]} {what}"
        for k, what in (("gate_failed", "stopped at a failed gate"), ("paused", "paused"))
        if stopped.get(k)
    )
    typer.echo(
        f"sweep directory: {summary['sweep_dir']}  "
        f"({summary['trials']} trials, {summary['errored']} failed{extra})"
    )
    typer.echo(f"ranked table: trials.csv; Pareto fronts: {', '.join(summary['pareto_fronts'])} (.csv, .png)")
    for path in summary["best_configs"]:
        typer.echo(f"best config: {path}")
