"""Run a small reward-weight sweep and print one JSON line: does a swept configuration beat the defaults?

Default: ``tune_sweeps/reward_weights_mobo.yaml``, i.e. 8 trials (the quickstart's own values first, then 7 from
Optuna's multi-objective TPE) of the quickstart's RL stage from one shared imitation checkpoint, in
``risk_mode: soft`` (high-risk shortcuts may run), ranked on validation completion (max) and high-risk share (min).

Keys: ``trials``, ``errored``, ``wall_s`` (imitation included), ``pareto_points`` (trials on the front of the
sweep's objectives); ``best`` (the rank-1 trial: ``trial_id``, ``completion``, ``high_risk_share``,
``consequence_rate``, ``tcsr_policy``, ``spt``, ``params``) next to ``default`` (the same for the quickstart's values); ``dominating_default`` (trials
that Pareto-dominate the default), ``default_on_front``; ``spread`` (each shown metric's [min, max] over the
finished trials: how far the searched settings moved it at all); ``sweep_dir``.

Rerun after changing the env or the budget with ``--set`` (sweep fields) or ``--set overrides.<setting>=value``
(the experiment), e.g. ``--set num_samples=15`` or ``--set overrides.stages.rl.iterations=16``.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
SHOWN = ("completion", "high_risk_share", "consequence_rate", "tcsr_policy", "spt")


def _brief(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"trial_id": row["trial_id"], **{k: row["metrics"].get(k) for k in SHOWN}, "params": row["params"]}


def _spread(trials_csv: Path) -> dict[str, list[float]]:
    with trials_csv.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("status") == "TERMINATED"]
    out = {}
    for m in SHOWN:
        vals = [float(r[m]) for r in rows if r.get(m) not in (None, "")]
        if vals:
            out[m] = [round(min(vals), 4), round(max(vals), 4)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "tune_sweeps" / "reward_weights_mobo.yaml"))
    ap.add_argument("--sweep-dir", default=None, help="default: a fresh temporary directory")
    ap.add_argument("--set", action="append", default=[], help="overrides, as for agentic-ray sweep --set")
    ap.add_argument(
        "--resume",
        default=None,
        help="finish an interrupted run of this benchmark: its SWEEP_DIR/sweep (agentic-ray sweep --resume); "
        "wall_s then counts only the resumed part",
    )
    args = ap.parse_args()
    if args.resume and (args.set or args.sweep_dir):
        ap.error("--resume continues the sweep as it was started: --set and --sweep-dir do not apply")
    cmd = [sys.executable, "-m", "agentic_ray.cli", "sweep"]
    if args.resume:
        sweep_dir = Path(args.resume)
        cmd += ["--resume", str(sweep_dir)]
    else:
        sweep_dir = Path(args.sweep_dir or tempfile.mkdtemp(prefix="agray_sweep_bench_")) / "sweep"
        cmd += ["--config", args.config, "--sweep-dir", str(sweep_dir)]
        cmd += [arg for s in args.set for arg in ("--set", s)]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.time() - t0
    summary_file = sweep_dir / "summary.json"
    if not summary_file.exists():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(proc.returncode or 1)
    s = json.loads(summary_file.read_text())
    vs = s["vs_default"]["objectives"]
    out = {
        "trials": s["trials"],
        "errored": s["errored"],
        "wall_s": round(wall, 1),
        "pareto_points": s["pareto_points"],
        "objectives": s["objectives"],
        "best": _brief(s["best"]),
        "default": _brief(s["default"]),
        "dominating_default": vs["dominating_default"],
        "default_on_front": vs["default_on_front"],
        "spread": _spread(sweep_dir / "trials.csv"),
        "sweep_dir": str(sweep_dir),
        "resumed": bool(args.resume),
        "exit_code": proc.returncode,
    }
    publish("sweep", [out])


if __name__ == "__main__":
    main()
