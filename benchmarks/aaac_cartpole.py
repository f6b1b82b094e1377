"""AAAC beside RLlib's PPO on CartPole-v1, at the same seeds: env steps until the episode return reaches 450.

Arms (``--arms``):

* ``aaac``: the learning test's settings (``agentic_ray/algorithms/aaac/tuned_examples/cartpole_aaac.py``);
* ``ppo``: RLlib's PPO with its tuned CartPole example's settings (new API stack: lr 3e-4, 6 epochs,
  ``vf_loss_coeff`` 0.01, one hidden layer of 32 linear units with a shared value trunk; RLlib's other defaults:
  batch 4000, minibatch 128, GAE λ 1.0, clip 0.3), :func:`cartpole_ppo_config`;
* the AAAC ablations, one component removed each: ``aaac_fixed_lambda`` (one λ, ``--fixed-lambda``, for every
  episode), ``aaac_one_critic`` (no risk critic), ``aaac_no_kl`` (no β-KL term) and ``aaac_no_warmup`` (no critic
  warm-up). The tuned AAAC config has no warm-up (0 updates), so ``aaac_no_warmup`` differs from ``aaac`` only when
  ``--warmup N`` gives the AAAC arms one.

Seed 0 is the seed the AAAC example was first tuned on, so the default seeds are 1-5. Each (arm, seed) runs in its
own subprocess with a private local Ray (``num_env_runners=0``: sampling and learning in that process), one after
the other.

Prints one JSON line per (arm, seed) and one summary line per arm: ``algo``, ``seeds``, ``seeds_reached``,
``env_steps_to_target`` (per seed, null if not reached), ``median_env_steps_to_target``,
``min_env_steps_to_target``/``max_env_steps_to_target`` (null when a seed never reached it), and
``ratio_to_ppo`` (the arm's median over PPO's, when PPO ran; the goal is AAAC ≤ 1.25). ``--set key=value`` (YAML
value) overrides an ``AAACConfig.training`` argument of the AAAC arms; ``--log`` writes each iteration's return,
entropy, value loss, KL, β and mean λ as JSON lines.

Run from the repository root::

    python benchmarks/aaac_cartpole.py --seeds 1 2 3 4 5
    python benchmarks/aaac_cartpole.py --arms aaac ppo aaac_fixed_lambda aaac_one_critic aaac_no_kl --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker_runs import report, run_worker  # noqa: E402 (benchmarks/ is the script's directory)

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

ARMS: dict[str, Any] = {
    "aaac": lambda a: {},
    "ppo": None,
    "aaac_fixed_lambda": lambda a: {"fixed_lambda": a.fixed_lambda},
    "aaac_one_critic": lambda a: {"use_risk_critic": False},
    "aaac_no_kl": lambda a: {"use_beta_kl": False},
    "aaac_no_warmup": lambda a: {"critic_warmup_updates": 0},
}
"""Arm -> the ``AAACConfig.training`` arguments of the ablation (None: RLlib's PPO)."""


def cartpole_ppo_config(seed: int) -> Any:
    """RLlib's PPO with its tuned CartPole-v1 example's settings (``tuned_examples/ppo/cartpole_ppo.py`` of the
    new API stack, which the installed wheel does not ship), sampling in the driver like the AAAC arm."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    return (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(lr=0.0003, num_epochs=6, vf_loss_coeff=0.01)
        .rl_module(
            model_config=DefaultModelConfig(
                fcnet_hiddens=[32], fcnet_activation="linear", vf_share_layers=True
            )
        )
        .debugging(seed=seed)
    )


def arm_config(arm: str, seed: int, a: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """``(algorithm config, the AAAC training overrides it carries)`` of one arm at one seed."""
    import yaml

    from agentic_ray.algorithms.aaac.tuned_examples.cartpole_aaac import cartpole_aaac_config

    if ARMS[arm] is None:
        return cartpole_ppo_config(seed), {}
    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in a.set)}
    if a.warmup:
        overrides["critic_warmup_updates"] = a.warmup
    overrides |= ARMS[arm](a)
    return cartpole_aaac_config(seed, **overrides), overrides


def run_seed(arm: str, seed: int, a: argparse.Namespace) -> dict[str, Any]:
    import ray
    import torch

    from agentic_ray.algorithms.aaac.tuned_examples.cartpole_aaac import train_until_return

    torch.set_num_threads(a.threads)
    config, overrides = arm_config(arm, seed, a)
    tmp = tempfile.mkdtemp(prefix="agray_cp_", dir="/tmp")
    ray.init(num_cpus=1, include_dashboard=False, _temp_dir=tmp, configure_logging=False, log_to_driver=False)
    log = open(a.log, "a") if a.log else None  # noqa: SIM115 (closed below)

    def on_iteration(row: dict[str, Any]) -> None:
        if log is not None:
            log.write(json.dumps({"algo": arm, "seed": seed, **row}) + "\n")
            log.flush()

    try:
        out = train_until_return(
            config, target_return=a.target, max_env_steps=a.max_env_steps, on_iteration=on_iteration
        )
    finally:
        if log is not None:
            log.close()
        ray.shutdown()
    out.pop("lambda_means")
    return {"algo": arm, "seed": seed, **out, "overrides": overrides}


def summary(arm: str, rows: list[dict[str, Any]], a: argparse.Namespace) -> dict[str, Any]:
    """One arm's line over its seeds."""
    steps = [r["env_steps_to_target"] for r in rows]
    reached = [x for x in steps if x is not None]
    complete = len(reached) == len(rows)
    return {
        "algo": arm,
        "env": "CartPole-v1",
        "target_return": a.target,
        "max_env_steps": a.max_env_steps,
        "seeds": [r["seed"] for r in rows],
        "seeds_reached": len(reached),
        "env_steps_to_target": steps,
        "median_env_steps_to_target": statistics.median(reached) if reached else None,
        "min_env_steps_to_target": min(reached) if complete else None,
        "max_env_steps_to_target": max(reached) if complete else None,
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arms", nargs="+", choices=list(ARMS), default=["aaac", "ppo"])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--target", type=float, default=450.0)
    p.add_argument("--max-env-steps", type=int, default=300_000)
    p.add_argument("--fixed-lambda", type=float, default=0.95, help="λ of aaac_fixed_lambda.")
    p.add_argument(
        "--warmup", type=int, default=0, help="Critic warm-up updates of the AAAC arms (aaac_no_warmup: 0)."
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="AAACConfig.training override."
    )
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per run.")
    p.add_argument("--log", default=None, help="Append per-iteration diagnostics (JSON lines) to this file.")
    p.add_argument("--worker", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main() -> None:
    a = parse()
    if a.worker is not None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        report(run_seed(a.worker[0], int(a.worker[1]), a))
        return
    lines = {}
    for arm in a.arms:
        rows = []
        for seed in a.seeds:  # the same seeds for every arm
            row = run_worker(__file__, [*sys.argv[1:], "--worker", arm, str(seed)], f"{arm} seed {seed}")
            rows.append(row)
            print(json.dumps(row), flush=True)
        lines[arm] = summary(arm, rows, a)
    ppo = lines.get("ppo", {}).get("median_env_steps_to_target")
    for line in lines.values():
        med = line["median_env_steps_to_target"]
        line["ratio_to_ppo"] = None if not ppo or med is None else round(med / ppo, 3)
    publish("aaac_cartpole", list(lines.values()))


if __name__ == "__main__":
    main()
