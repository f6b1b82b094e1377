"""What a finished sweep writes into its directory.

::

    trials.csv                     every trial, ranked: front, objectives, all validation metrics, swept values
    pareto_<a>_vs_<b>.csv / .png   the Pareto front of each configured metric pair, and its plot
    best/rank<k>_<trial>.yaml      experiment files of the best-ranked trials (``agentic-ray train --config``)
    summary.json                   counts, wall time, best trial, the default trial and who dominates it
"""

from __future__ import annotations

import copy
import csv
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from agentic_ray.settings import ExperimentSettings, apply_overrides
from agentic_ray.sweeps.ranking import compare_to_default, modes, pair_front, rank_trials
from agentic_ray.sweeps.sweep_config import SweepSettings
from agentic_ray.sweeps.validation_metrics import VALIDATION_METRICS

TRIALS_CSV = "trials.csv"
SUMMARY_JSON = "summary.json"
BEST_DIR = "best"


def pareto_stem(pair: Sequence[str]) -> str:
    return f"pareto_{pair[0]}_vs_{pair[1]}"


def _metric_columns(objectives: Sequence[str]) -> list[str]:
    return list(objectives) + [m for m in VALIDATION_METRICS if m not in objectives]


def _csv_rows(
    rows: Sequence[dict[str, Any]], objectives: Sequence[str]
) -> tuple[list[str], list[dict[str, Any]]]:
    params = sorted({p for r in rows for p in r.get("params", {})})
    metrics = _metric_columns(objectives)
    head = [
        "rank",
        "pareto_rank",
        "trial_id",
        "is_default",
        "status",
        "pipeline_status",
        "evaluations",
        "stage",
    ]
    cols = head + metrics + params + ["error"]
    out = []
    for r in rows:
        line = {c: r.get(c) for c in head}
        line.update({m: r.get("metrics", {}).get(m) for m in metrics})
        line.update({p: r.get("params", {}).get(p) for p in params})
        line["error"] = r.get("error")
        out.append(line)
    return cols, out


def write_csv(path: Path, rows: Sequence[dict[str, Any]], objectives: Sequence[str]) -> None:
    cols, lines = _csv_rows(rows, objectives)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(lines)


def plot_pair(
    path: Path, rows: Sequence[dict[str, Any]], front: Sequence[dict[str, Any]], pair: Sequence[str]
) -> None:
    """Scatter of every trial on two metrics, the front highlighted and joined, the default trial starred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = pair
    pts = [r for r in rows if all(isinstance(r.get("metrics", {}).get(m), int | float) for m in pair)]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.scatter(
        [r["metrics"][a] for r in pts], [r["metrics"][b] for r in pts], c="0.7", label="trials", zorder=2
    )
    ax.plot(
        [r["metrics"][a] for r in front],
        [r["metrics"][b] for r in front],
        "o-",
        color="tab:red",
        label="Pareto front",
        zorder=3,
    )
    at: dict[tuple[float, float], list[str]] = {}  # duplicates share one label
    for r in front:
        at.setdefault((r["metrics"][a], r["metrics"][b]), []).append(str(r["trial_id"]))
    for xy, ids in at.items():
        label = ", ".join(ids[:2]) + (f" +{len(ids) - 2}" if len(ids) > 2 else "")
        ax.annotate(label, xy, fontsize=7, xytext=(3, 3), textcoords="offset points")
    for r in pts:
        if r.get("is_default"):
            ax.scatter(
                [r["metrics"][a]],
                [r["metrics"][b]],
                marker="*",
                s=220,
                c="tab:blue",
                label="default",
                zorder=4,
            )
    ma, mb = modes(pair)
    ax.set_xlabel(f"{a} ({ma})")
    ax.set_ylabel(f"{b} ({mb})")
    ax.set_title(f"{len(pts)} trials, {len(front)} on the front")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def best_config_name(row: dict[str, Any]) -> str:
    return f"rank{row['rank']}_{row['trial_id']}.yaml"


def best_config_yaml(
    base_raw: dict[str, Any], row: dict[str, Any], sweep: SweepSettings, sweep_dir: Path
) -> str:
    """An experiment file with the trial's values: the base experiment (and the sweep's overrides) plus them.

    Raises:
        pydantic.ValidationError: the result is not a valid experiment (never expected: trials ran on it).
    """
    raw = apply_overrides(copy.deepcopy(base_raw), dict(row["params"]))
    raw["name"] = f"{sweep.name}-rank{row['rank']}"
    ExperimentSettings.model_validate(copy.deepcopy(raw))
    metrics = ", ".join(
        f"{m}={row['metrics'][m]:.4f}"
        for m in _metric_columns(sweep.objectives)
        if isinstance(row["metrics"].get(m), int | float)
    )
    header = [
        f"# Found by sweep {sweep.name!r} ({sweep_dir}): trial {row['trial_id']}, rank {row['rank']}, "
        f"Pareto rank {row['pareto_rank']}{' (the default values)' if row.get('is_default') else ''}.",
        f"# Validation at its last evaluation: {metrics}.",
        "# Swept values: " + ", ".join(f"{k}={v}" for k, v in sorted(row["params"].items())) + ".",
        f"# Train it: agentic-ray train --config {sweep_dir / BEST_DIR / best_config_name(row)}",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(raw, sort_keys=False)


def write_outputs(
    sweep_dir: Path,
    sweep: SweepSettings,
    rows: Sequence[dict[str, Any]],
    base_raw: dict[str, Any],
    wall_s: float,
) -> dict[str, Any]:
    """Write every output file of a sweep; returns the summary (also written as ``summary.json``)."""
    ranked = rank_trials(rows, sweep.objectives)
    write_csv(sweep_dir / TRIALS_CSV, ranked, sweep.objectives)
    fronts: dict[str, list[str]] = {}
    for pair in sweep.pareto_pairs:
        front = pair_front(ranked, pair)
        write_csv(sweep_dir / f"{pareto_stem(pair)}.csv", front, sweep.objectives)
        plot_pair(sweep_dir / f"{pareto_stem(pair)}.png", ranked, front, pair)
        fronts[pareto_stem(pair)] = [r["trial_id"] for r in front]
    best_dir = sweep_dir / BEST_DIR
    best_dir.mkdir(exist_ok=True)
    best_files = []
    for row in [r for r in ranked if r["rank"] is not None][: sweep.best_configs]:
        path = best_dir / best_config_name(row)
        path.write_text(best_config_yaml(base_raw, row, sweep, sweep_dir))
        best_files.append(str(path))
    scored = [r for r in ranked if r["rank"] is not None]
    summary = {
        "sweep_dir": str(sweep_dir),
        "trials": len(ranked),
        "errored": sum(r.get("status") == "ERROR" for r in ranked),
        # How each trial's pipeline ended (finished, gate_failed, paused...); the CLI's exit code reads it.
        "pipeline_status": dict(Counter(r["pipeline_status"] for r in ranked if r.get("pipeline_status"))),
        "wall_s": round(wall_s, 1),
        "objectives": list(sweep.objectives),
        "pareto_points": sum(r["pareto_rank"] == 0 for r in scored),
        "pareto_fronts": fronts,
        "best": _brief(scored[0]) if scored else None,
        "default": _brief(next((r for r in scored if r.get("is_default")), None)),
        "vs_default": {
            "objectives": compare_to_default(scored, sweep.objectives),
            **{pareto_stem(p): compare_to_default(scored, p) for p in sweep.pareto_pairs},
        },
        "best_configs": best_files,
    }
    (sweep_dir / SUMMARY_JSON).write_text(json.dumps(summary, indent=2, default=str))
    return summary


def _brief(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    keep = ("trial_id", "rank", "pareto_rank", "is_default", "evaluations", "metrics", "params")
    return {k: row.get(k) for k in keep}
