"""RL beyond imitation (issue 13, section 3): imitation from a limited set of demonstrations, then RL, per seed.

For each seed and method the pipeline runs stages ``il`` then ``rl`` on ``configs/quickstart.yaml`` (with
``--set`` overrides) from ``--demos`` demonstrations, evaluates imitation's and RL's final policy greedily on the
same ``--tasks`` validation tasks, and measures CU on RL's final policy (the fix rate with the diagnosis minus
with the same failure evidence but the diagnosis withheld, over at least ``--cu-pairs`` paired first failures on a
caller-error validation env, :mod:`agentic_ray.eval.correction`).

Defaults: 25 demonstrations, 60 RL iterations (about 31k env steps) at ``--lr`` 3e-4, the quickstart config's own
values since 30ea409 (before, its 1000 demonstrations reached the expert and its gentle RL held that policy). At 100
demonstrations imitation completes 0.865 of the 200 tasks against the expert's 0.895 (``il_headroom`` 0.03), so
a 10-point gain cannot be shown there; at 25 it completes 0.585.

Methods: ``rl`` (the config's RL stage at ``--lr``) and ``rl_bc`` (plus the DAPG-style decaying BC term on the
demonstrations, ``stages.rl.bc_lr``). One JSON line per method: ``method``, ``il_completion``, ``rl_completion``,
``rl_gain`` (RL minus imitation, mean over seeds), ``rl_gain_ci`` (95% bootstrap interval over the seed x task
pairs of per-task completion differences), ``expert_completion`` (the scripted expert on the same tasks: the
ceiling) and ``il_headroom`` (that minus imitation's completion: the most RL can gain), ``cu``, ``cu_ci``,
``cu_pairs`` (summed over seeds; ``cu`` is their pooled mean), ``seeds``, ``tasks``, ``iterations``,
``env_steps``, ``wall_s``, and ``oracle`` (whether the policy read the env's privileged root cause). Goal: RL ≥ imitation + 10 points
at 3 seeds x 200 tasks.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]


def run_seed(settings: Any, cu_pairs: int) -> dict[str, Any]:
    """Imitation then RL; the two final evaluations' per-task completion and RL's CU pairs (none if
    ``cu_pairs`` is 0). Needs a running Ray."""
    from agentic_ray.algorithms.build import current_module
    from agentic_ray.eval.evaluator import ModulePolicy, correction_ablation, cu_env_config
    from agentic_ray.stages.pipeline import Pipeline

    out: dict[str, Any] = {}

    class Recording(Pipeline):
        def evaluate(self, stage: str, iteration: int, extra: dict[str, Any] | None = None) -> Any:
            res = super().evaluate(stage, iteration, extra)
            out[stage] = [r.completed for r in res.records]
            out[f"{stage}_env_steps"] = self.state.env_steps
            if cu_pairs and stage == "rl" and iteration == self.s.stages.rl.iterations:
                cu = correction_ablation(
                    ModulePolicy(current_module(self.algo)),
                    cu_env_config(self.eval_env, self.s.eval.cu_caller_error_share),
                    self.s.eval.tasks_per_family,
                    min_pairs=cu_pairs,
                )
                out["cu"] = cu
            return res

    run_dir = Path(tempfile.mkdtemp(prefix="agray_rl_over_il_")) / "run"
    Recording(settings, run_dir, progress=lambda _m: None).run()
    return out


def seed_overrides(
    seed: int, method: str, demos: int, iterations: int, lr: float, bc_lr: float, tasks_per_family: int
) -> dict[str, Any]:
    """The settings overrides of one seed's run: stages il and rl only, the RL gate off, one evaluation at the
    end of each stage on ``tasks_per_family`` tasks of each family, no traces."""
    return {
        "seed": seed,
        "wandb.mode": "disabled",
        "stages.run": ["il", "rl"],
        "stages.il.demos": demos,
        "stages.il.max_repeats": 0,
        "stages.rl.iterations": iterations,
        "stages.rl.gate_dvr": 0.0,
        "algo.lr": lr,
        "stages.rl.bc_lr": bc_lr if method == "rl_bc" else 0.0,
        "eval.every": iterations,
        "eval.tasks_per_family": tasks_per_family,
        "eval.traces_per_eval": 0,
        "eval.cu_ablation": False,
    }


def expert_completion(settings: Any, tasks_per_family: int) -> float:
    """The scripted expert's completion on the same validation tasks: the ceiling, since every task it fails is
    an injected outage of a tool the task needs (``il_headroom`` is this minus imitation's completion)."""
    from agentic_ray.eval.evaluator import ExpertPolicy, evaluate_policy, validation_env_config

    env = validation_env_config(settings.env, settings.eval.fault_share)
    return float(evaluate_policy(ExpertPolicy(), env, tasks_per_family).metrics.completion)


def bootstrap_ci(x: np.ndarray, seed: int = 0) -> list[float] | None:
    from scipy.stats import bootstrap

    if len(x) < 2 or x.std() == 0:
        return [float(x.mean()), float(x.mean())] if len(x) else None
    ci = bootstrap(
        (x,), np.mean, confidence_level=0.95, method="percentile", random_state=seed
    ).confidence_interval
    return [float(ci.low), float(ci.high)]


def main() -> None:
    from agentic_ray.eval.correction import correction_uplift_paired
    from agentic_ray.settings import load_settings

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default=str(REPO / "configs" / "quickstart.yaml"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=["rl", "rl_bc"], choices=["rl", "rl_bc"])
    ap.add_argument(
        "--demos", type=int, default=25, help="demonstrations (100 leave imitation 3 points under the expert)"
    )
    ap.add_argument("--tasks", type=int, default=200, help="validation tasks (spread over the families)")
    ap.add_argument("--iterations", type=int, default=60, help="RL iterations")
    ap.add_argument("--lr", type=float, default=3e-4, help="RL learning rate (algo.lr)")
    ap.add_argument("--cu-pairs", type=int, default=100)
    ap.add_argument("--bc-lr", type=float, default=1e-3, help="rl_bc: stages.rl.bc_lr")
    ap.add_argument("--set", action="append", default=[], help="setting overrides, key=value (YAML value)")
    a = ap.parse_args()
    import ray
    import yaml

    from agentic_ray.settings import ExperimentSettings

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="agray_", dir="/tmp"),
        configure_logging=False,
        log_to_driver=False,
    )
    fams = len(ExperimentSettings().env.family_list())
    tpf = max(1, round(a.tasks / fams))
    expert = expert_completion(load_settings(a.config, {"seed": a.seeds[0], "wandb.mode": "disabled"}), tpf)
    lines: list[dict] = []
    for method in a.methods:
        t0 = time.time()
        il, rl, gains, pairs, dropped, steps = [], [], [], [], 0, []
        oracle = False
        for seed in a.seeds:
            over = seed_overrides(seed, method, a.demos, a.iterations, a.lr, a.bc_lr, tpf)
            for kv in a.set:
                k, v = kv.split("=", 1)
                over[k] = yaml.safe_load(v)
            settings = load_settings(a.config, over)
            oracle = oracle or settings.model.uses_oracle
            r = run_seed(settings, a.cu_pairs)
            il.append(np.mean(r["il"]))
            rl.append(np.mean(r["rl"]))
            gains += (np.asarray(r["rl"], float) - np.asarray(r["il"], float)).tolist()
            if "cu" in r:
                pairs += r["cu"].cu.pair_list
                dropped += r["cu"].cu.dropped
            steps.append(r["rl_env_steps"])
        cu = correction_uplift_paired(pairs, dropped)
        line = {
            "method": method,
            "oracle": oracle,
            "il_completion": round(float(np.mean(il)), 4),
            "rl_completion": round(float(np.mean(rl)), 4),
            "rl_gain": round(float(np.mean(rl) - np.mean(il)), 4),
            "rl_gain_ci": bootstrap_ci(np.asarray(gains)),
            "expert_completion": round(expert, 4),
            "il_headroom": round(expert - float(np.mean(il)), 4),
            "cu": cu.cu,
            "cu_ci": list(cu.ci) if cu.ci else None,
            "cu_pairs": cu.pairs,
            "cu_by_cause": cu.by_cause,
            "il_per_seed": [round(float(x), 4) for x in il],
            "rl_per_seed": [round(float(x), 4) for x in rl],
            "seeds": len(a.seeds),
            "tasks": tpf * fams,
            "demos": a.demos,
            "iterations": a.iterations,
            "env_steps": int(np.mean(steps)),
            "wall_s": round(time.time() - t0, 1),
        }
        lines.append(line)
    ray.shutdown()
    publish("rl_over_il", lines)


if __name__ == "__main__":
    main()
