"""Run configs/quickstart.yaml end to end and print one JSON line.

Keys: ``wall_s``; ``rl_gain`` (RL's last completion minus imitation's); the final model's ``tcsr``, ``tcsr_policy`` (calls the policy controls: injected outages left
out), ``dvr``, ``cu`` with ``cu_ci`` and ``cu_n`` (first-failure pairs), ``spt`` and ``spt_over_optimal`` (successful
episodes only), ``completion`` with ``completion_n`` (validation episodes) and ``high_risk_share``; the same keys
per stage under ``stages`` (each stage's last evaluation); ``expert`` (the scripted expert's ``tcsr``,
``tcsr_policy``, ``spt`` and ``completion`` on the same validation tasks); ``status``, ``gates`` and ``run_dir``. Seed 000's bars for comparison: TCSR ≥ 0.995, DVR ≥ 0.98, CU ≥ 0.40, SPT ≤ 6.2.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
KEYS = (
    "tcsr",
    "tcsr_policy",
    "dvr",
    "dvr_progress",
    "cu",
    "cu_ci",
    "cu_n",
    "cu_pairs_dropped",
    "evidence_uplift",
    "evidence_uplift_ci",
    "evidence_uplift_n",
    "spt",
    "spt_over_optimal",
    "completion",
    "first_pass_completion",
    "completion_n",
    "high_risk_share",
)


def expert_on_the_same_tasks(run_dir: Path) -> dict[str, float]:
    """The scripted expert's figures on the run's own validation tasks (the ceiling: the tasks it fails are
    injected outages of a tool the task needs)."""
    from agentic_ray.eval.evaluator import ExpertPolicy, evaluate_policy, validation_env_config
    from agentic_ray.settings import ExperimentSettings

    s = ExperimentSettings.model_validate_json((run_dir / "settings.json").read_text())
    env = validation_env_config(s.env, s.eval.fault_share)
    m = evaluate_policy(ExpertPolicy(), env, s.eval.tasks_per_family).metrics.to_dict()
    return {k: m[k] for k in ("tcsr", "tcsr_policy", "spt", "completion")}


def train(config: str | Path, run_dir: Path, sets: list[str]) -> float:
    """``agentic-ray train`` of ``config`` into ``run_dir`` (offline W&B, then the ``--set`` overrides ``sets``), in
    a child process; exits with its code after printing the end of its output if it fails. Returns its wall time."""
    cmd = [
        sys.executable,
        "-m",
        "agentic_ray.cli",
        "train",
        "--config",
        str(config),
        "--run-dir",
        str(run_dir),
    ]
    for kv in ["wandb.mode=offline", *sets]:
        cmd += ["--set", kv]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(proc.returncode)
    return time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default=str(REPO / "configs" / "quickstart.yaml"))
    ap.add_argument("--run-dir", default=None, help="default: a fresh temporary directory")
    ap.add_argument("--set", action="append", default=[], help="setting overrides, as for agentic-ray train")
    args = ap.parse_args()
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="agray_quickstart_")) / "run"
    wall = train(args.config, run_dir, args.set)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in rows if "tcsr" in r]
    stages = {}
    for r in evals:
        stages[r["stage"]] = {k: r.get(k) for k in KEYS}
    state = json.loads((run_dir / "state.json").read_text())
    final = {k: evals[-1].get(k) for k in KEYS} if evals else {}
    il_c, rl_c = stages.get("il", {}).get("completion"), stages.get("rl", {}).get("completion")
    expert = expert_on_the_same_tasks(run_dir)
    settings = json.loads((run_dir / "settings.json").read_text())
    out = {
        "oracle": settings["model"]["reflection_source"] == "oracle_env",
        "wall_s": round(wall, 1),
        "rl_gain": None if il_c is None or rl_c is None else round(rl_c - il_c, 4),
        **{f"completion_{st}": stages.get(st, {}).get("completion") for st in ("il", "rl", "reflection")},
        "expert_completion": expert["completion"],
        **final,
        "stages": stages,
        "expert": expert,
        "status": state["status"],
        "gates": state["gates"],
        "run_dir": str(run_dir),
    }
    publish("quickstart", [out])


if __name__ == "__main__":
    main()
