"""AAAC vs RLlib's PPO, side by side on the e-commerce env (seed 002's comparison table, on our env).

Both algorithms get exactly the same env (action mode, moderate fault injection driven by training progress),
the same RLModule (``AAACRLModule`` with the same encoder and sizes), the same batch size, minibatch, epochs, lr,
entropy bonus, env-step budget and seeds, all through ``build_algo_config``. Reward streams:

* PPO learns from the env reward only (execution outcomes + completion; it has no risk term, so a high-risk call
  that succeeds earns the same +1 as a safe one);
* AAAC learns from the same env reward (reward critic) **plus** the risk stream that ``AgenticEpisodeCallbacks``
  writes (``-risk_weight`` on every high-risk step; risk critic), mixed ``A = 0.7·A_reward + 0.3·A_risk``. That is
  the algorithm's point: PPO does not see the risk stream (it ignores ``custom_data``), AAAC does.

Every ``--eval-every`` iterations the current module is evaluated greedily on the fixed validation tasks
(``evaluate_policy``, same fault share as the final evaluation); ``steps_to_target`` is the env-step count at
the first evaluation whose completion reaches ``--target`` (null if never). ``env_steps_per_s`` is env steps
over training wall time (sampling + learning, without evaluation). Each (algo, seed) runs in its own subprocess
(private Ray, ``num_env_runners=0``: sampling and learning in that process), so ``peak_rss_mb`` is that process's
peak RSS; per algorithm the maximum over seeds is reported. Each seed's AAAC and PPO runs go side by side
(``--jobs 2``, one core each on a 2-CPU box) so that load changes hit both alike.

Prints one JSON line per algorithm (means over seeds; ``per_seed`` has the rest) and writes a markdown table.

Run from the repository root::

    python benchmarks/aaac_vs_ppo.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ALGOS = ("aaac", "ppo")


def settings_for(algo: str, seed: int, a: argparse.Namespace) -> Any:
    from agentic_ray.settings import ExperimentSettings

    model: dict[str, Any] = {
        "encoder": a.encoder,
        "hidden_dim": a.hidden,
        "num_heads": a.heads,
        "separate_critic_encoders": a.separate_critic_encoders,
        "device": "cpu",
    }
    if a.encoder == "flat":
        model |= {"flat_hidden_dim": a.flat_hidden, "flat_layers": a.flat_layers}
    else:
        model |= {"num_layers": a.gnn_layers}
    training: dict[str, Any] = {}
    if algo == "ppo":
        training = {"lambda_": 0.95}  # RLlib's default is 1.0; 0.95 is the usual GAE setting
    raw: dict[str, Any] = {
        "seed": seed,
        "ray": {"num_env_runners": 0, "num_envs_per_env_runner": a.num_envs},
        "env": {
            "action_mode": a.action_mode,
            "rewards": rewards_of(a),
            "faults": {"enabled": True, "start_share": a.fault_start, "end_share": a.fault_end},
        },
        "model": model,
        "algo": {
            "name": algo,
            "lr": a.lr,
            "train_batch_size": a.batch,
            "minibatch_size": a.minibatch,
            "num_epochs": a.epochs,
            "entropy_coeff": a.entropy,
            "training": training,
        },
    }
    for item in a.set + (a.aaac_set if algo == "aaac" else []):
        apply_override(raw, item)
    return ExperimentSettings.model_validate(raw)


def apply_override(raw: dict[str, Any], item: str) -> None:
    """``dotted.key=value`` (value parsed as YAML) merged into the raw settings dict."""
    import yaml

    key, _, value = item.partition("=")
    d = raw
    *head, last = key.split(".")
    for h in head:
        d = d.setdefault(h, {})
    d[last] = yaml.safe_load(value)


def rewards_of(a: argparse.Namespace) -> dict[str, float]:
    return {"success": a.reward_success, "completion": a.reward_completion, "failure": a.reward_failure}


def eval_env_config(a: argparse.Namespace) -> Any:
    from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig

    share = a.eval_fault_share
    return AgentTaskEnvConfig(
        action_mode=a.action_mode,
        rewards=rewards_of(a),
        faults={"enabled": share > 0, "start_share": share, "end_share": share},
    )


def run_one(algo_name: str, seed: int, a: argparse.Namespace) -> dict[str, Any]:
    """Train one (algo, seed) to the env-step budget; returns its curve, final metrics and costs."""
    import numpy as np
    import ray
    import torch
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    from agentic_ray.algorithms.build import build_algo_config, current_module
    from agentic_ray.eval.evaluator import ModulePolicy, evaluate_policy
    from agentic_ray.rollout.episode_callbacks import set_training_progress

    torch.set_num_threads(a.threads)
    torch.manual_seed(seed)
    np.random.seed(seed)
    tmp = tempfile.mkdtemp(prefix="agray_bench_", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, configure_logging=False, log_to_driver=False)
    s = settings_for(algo_name, seed, a)
    ecfg = eval_env_config(a)
    algo = build_algo_config(s).build_algo()

    def evaluate() -> Any:
        return evaluate_policy(ModulePolicy(current_module(algo)), ecfg, a.tasks_per_family).metrics

    curve: list[tuple[int, float]] = []
    steps, it, train_s = 0, 0, 0.0
    steps_to_target = None
    try:
        while steps < a.env_steps:
            set_training_progress(algo, min(1.0, steps / a.env_steps))
            t0 = time.perf_counter()
            res = algo.train()
            train_s += time.perf_counter() - t0
            steps = int(res[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])
            it += 1
            if it % a.eval_every == 0 and steps < a.env_steps:
                c = evaluate().completion
                curve.append((steps, c))
                if steps_to_target is None and c >= a.target:
                    steps_to_target = steps
        m = evaluate()
        curve.append((steps, m.completion))
        if steps_to_target is None and m.completion >= a.target:
            steps_to_target = steps
    finally:
        algo.stop()
        ray.shutdown()
    return {
        "algo": algo_name,
        "seed": seed,
        "completion": m.completion,
        "mean_steps": m.spt,
        "high_risk_share": m.high_risk_share,
        "tcsr": m.tcsr,
        "dvr": m.dvr,
        "steps_to_target": steps_to_target,
        "env_steps": steps,
        "iterations": it,
        "env_steps_per_s": steps / train_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "curve": curve,
    }


def baseline(a: argparse.Namespace) -> dict[str, Any]:
    from agentic_ray.eval.evaluator import ExpertPolicy, RandomPolicy, evaluate_policy

    ecfg = eval_env_config(a)
    out = {}
    for name, pol in (("random", RandomPolicy(0)), ("expert", ExpertPolicy())):
        m = evaluate_policy(pol, ecfg, a.tasks_per_family).metrics
        out[name] = {"completion": m.completion, "mean_steps": m.spt, "high_risk_share": m.high_risk_share}
    return out


def _f2(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def summarize(algo: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(k: str) -> float | None:
        # SPT is measured on successful episodes only: a run that completed nothing has none (None).
        xs = [r[k] for r in runs if r[k] is not None]
        return round(statistics.fmean(xs), 4) if xs else None

    stt = [r["steps_to_target"] for r in runs]
    # steps_to_target: mean over seeds that reached the target; null when any seed never did (reported per seed).
    return {
        "algo": algo,
        "completion": mean("completion"),
        "completion_std": round(statistics.pstdev(r["completion"] for r in runs), 4),
        "mean_steps": mean("mean_steps"),
        "high_risk_share": mean("high_risk_share"),
        "steps_to_target": None if any(x is None for x in stt) else round(statistics.fmean(stt)),
        "env_steps_per_s": round(statistics.fmean(r["env_steps_per_s"] for r in runs), 1),
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
        "seeds": [r["seed"] for r in runs],
        "per_seed": [
            {
                k: r[k]
                for k in (
                    "seed",
                    "completion",
                    "mean_steps",
                    "high_risk_share",
                    "steps_to_target",
                    "env_steps",
                    "env_steps_per_s",
                    "curve",
                )
            }
            for r in runs
        ],
    }


def fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "not reached"
    return f"{100 * v:.1f}%" if pct else (f"{v:,.0f}" if isinstance(v, int) or v >= 100 else f"{v:.2f}")


def table(rows: dict[str, dict[str, Any]], base: dict[str, Any], a: argparse.Namespace) -> str:
    p, q = rows["ppo"], rows["aaac"]
    lines = [
        "# AAAC vs PPO on the e-commerce env",
        "",
        f"Command: `python benchmarks/aaac_vs_ppo.py {' '.join(sys.argv[1:])}`",
        "",
        f"Env: action_mode={a.action_mode}, faults {a.fault_start:.0%}→{a.fault_end:.0%} of training episodes "
        f"(validation: {a.eval_fault_share:.0%}); encoder={a.encoder}, hidden={a.hidden}"
        + (
            f", flat trunk {a.flat_layers}×{a.flat_hidden}"
            if a.encoder == "flat"
            else f", {a.gnn_layers} GNN layers × {a.heads} heads"
        )
        + f", separate critic encoders {a.separate_critic_encoders}, action scoring from tool nodes"
        + f"; batch {a.batch}, minibatch {a.minibatch}, epochs {a.epochs}, lr {a.lr}, entropy {a.entropy}; "
        f"budget {a.env_steps} env steps; seeds {a.seeds}; validation {a.tasks_per_family} tasks × 8 families, greedy.",
        f"Env reward (both): success {a.reward_success:+g}, completion {a.reward_completion:+g}, failure "
        f"{a.reward_failure:+g}, redundant call −1, error penalties as shipped. "
        "PPO: env reward only. AAAC: env reward + risk stream (−w per high-risk step), A = 0.7·A_r + 0.3·A_risk.",
        "",
        "| metric | PPO | AAAC | goal |",
        "|---|---|---|---|",
        f"| first-pass task completion | {fmt(p['completion'], True)} | {fmt(q['completion'], True)} | AAAC ≥ PPO + 10pp |",
        f"| mean decision steps (successful episodes) | {_f2(p['mean_steps'])} | {_f2(q['mean_steps'])} | lower |",
        f"| high-risk action share | {fmt(p['high_risk_share'], True)} | {fmt(q['high_risk_share'], True)} | AAAC ≤ 0.5 × PPO |",
        f"| env steps to {a.target:.0%} completion | {fmt(p['steps_to_target'])} | {fmt(q['steps_to_target'])} | AAAC ≤ 0.5 × PPO |",
        f"| env steps / s (CPU, training) | {p['env_steps_per_s']:.1f} | {q['env_steps_per_s']:.1f} | AAAC ≥ 0.9 × PPO |",
        f"| peak RSS (MB) | {p['peak_rss_mb']:.0f} | {q['peak_rss_mb']:.0f} | (seed 002 reports GPU memory) |",
        "",
        f"Baselines on the same validation tasks: random masked policy {fmt(base['random']['completion'], True)} "
        f"completion, scripted expert {fmt(base['expert']['completion'], True)} "
        f"(mean steps {_f2(base['expert']['mean_steps'])}).",
        "",
        "Per seed (completion; steps to target):",
        "",
    ]
    for algo in ("ppo", "aaac"):
        for r in rows[algo]["per_seed"]:
            lines.append(
                f"- {algo} seed {r['seed']}: completion {fmt(r['completion'], True)}, high-risk "
                f"{fmt(r['high_risk_share'], True)}, steps to target {fmt(r['steps_to_target'])}, "
                f"curve {[(s, round(c, 3)) for s, c in r['curve']]}"
            )
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env-steps", type=int, default=20000, help="Env-step budget per run.")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eval-every", type=int, default=4, help="Evaluate every k training iterations.")
    p.add_argument("--target", type=float, default=0.2, help="Validation completion for steps_to_target.")
    p.add_argument("--tasks-per-family", type=int, default=5)
    p.add_argument("--action-mode", choices=["prototype", "structured"], default="prototype")
    p.add_argument("--encoder", choices=["flat", "gnn"], default="gnn")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--heads", type=int, default=2, help="Attention heads (GNN).")
    p.add_argument(
        "--separate-critic-encoders",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Critics get their own encoders (both algorithms).",
    )
    p.add_argument("--flat-hidden", type=int, default=128)
    p.add_argument("--flat-layers", type=int, default=2)
    p.add_argument("--gnn-layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--minibatch", type=int, default=128)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--entropy", type=float, default=0.01)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument(
        "--fault-start", type=float, default=0.3, help="Faulty share of training episodes at start."
    )
    p.add_argument("--fault-end", type=float, default=0.1, help="... at the end of the budget.")
    p.add_argument("--eval-fault-share", type=float, default=0.2, help="Faulty share of validation episodes.")
    p.add_argument(
        "--reward-success",
        type=float,
        default=1.0,
        help="Env reward per successful call (shipped: +1; a redundant call adds -1, so it nets 0).",
    )
    p.add_argument(
        "--reward-completion", type=float, default=2.0, help="Env reward on completion (shipped: +2)."
    )
    p.add_argument(
        "--reward-failure", type=float, default=-0.5, help="Env reward on failure/handoff (shipped: -0.5)."
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Settings override for both algorithms (dotted key, YAML value), e.g. env.rewards.redundant=-1.",
    )
    p.add_argument(
        "--aaac-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Settings override for AAAC only.",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads per run.")
    p.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    p.add_argument(
        "--jobs", type=int, default=2, help="Runs at a time (2: each seed's AAAC and PPO together)."
    )
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/aaac_vs_ppo.md"))
    p.add_argument("--worker", nargs=2, metavar=("ALGO", "SEED"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main() -> None:
    a = parse()
    if a.worker:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        r = run_one(a.worker[0], int(a.worker[1]), a)
        print("RESULT " + json.dumps(r), flush=True)
        return
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in a.algos}
    passthrough = [x for x in sys.argv[1:]]

    def run(job: tuple[int, str]) -> dict[str, Any]:
        seed, algo = job
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, __file__, *passthrough, "--worker", algo, str(seed)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
            raise SystemExit(f"{algo} seed {seed} failed (rc {proc.returncode})")
        r = json.loads(line[len("RESULT ") :])
        print(
            f"# {algo} seed {seed}: completion {r['completion']:.3f} in {time.time() - t0:.0f}s "
            f"({r['env_steps_per_s']:.1f} steps/s) curve {r['curve']}",
            file=sys.stderr,
            flush=True,
        )
        return r

    # Jobs in (seed, algo) order; with --jobs 2 each seed's AAAC and PPO run side by side, so both see the same
    # machine load and env_steps_per_s stays comparable.
    jobs = [(seed, algo) for seed in a.seeds for algo in a.algos]
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for (_, algo), r in zip(jobs, pool.map(run, jobs), strict=True):
            runs[algo].append(r)
    rows = {k: summarize(k, v) for k, v in runs.items()}
    for k in a.algos:
        print(json.dumps({x: y for x, y in rows[k].items() if x != "per_seed"}))
    if set(ALGOS) <= set(rows):
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table(rows, baseline(a), a))
        print(f"# table written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
