"""Industrial visual inspection (issue 30): detection, localisation and ranking quality per policy; one JSON line.

On the fixed validation tasks of every family (``--tasks-per-family`` each, faults off), with the frozen detector:

* ``expert``: the scripted expert (detector parameters tuned per part on the ground truth: the reference level);
* ``default_threshold``: the observation-only rule policy with ``detect`` at the contract's defaults, then rank
  and record from what the tools revealed (:class:`~agentic_ray.domains.inspection.baseline.FixedThresholdPolicy`);
* ``best_constant_threshold``: the same rule policy at the confidence threshold that scored the best held-out F1
  when the detector was built (``detector.json``): how much a single better constant gains, without adapting.

Per policy: ``f1`` (each inspected part's last detection call, cracks at IoU >= 0.5, averaged over parts),
``iou`` (localisation IoU, over parts with a crack), ``ndcg`` (the ranking call of ``top_cracks`` tasks),
``completion`` and ``steps``. Also the detector's and the quality scorer's recorded versions and held-out figures,
and the run's ``wall_s``.

With ``--run-dir RUN`` (a run of ``agentic-ray train --config configs/inspection.yaml``): also ``trained``, that
run's policy (greedy, its last stage's checkpoint) on the same tasks, and ``gates``, the mean ``gate_image``,
``gate_text`` and ``gate_struct`` of its multimodal encoder over the observations of those episodes (each over the
part nodes that revealed the modality; see :mod:`agentic_ray.models.multimodal_node_encoder`).

Not yet here (issue 30): a trained policy that is a quality target (the shipped config is a small run), and seed
000's two comparisons at 3 seeds (layered vs sparse reward, gated vs flat: ``model.modality_fusion``).

    python benchmarks/inspection.py [--tasks-per-family 10] [--run-dir RUN]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.domains import get_domain
from agentic_ray.domains.inspection import detector as det
from agentic_ray.domains.inspection.baseline import FixedThresholdPolicy
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD
from agentic_ray.rewards.call_outcomes import final_metrics
from agentic_ray.rewards.episode_record import EpisodeRecord

Planner = Callable[[EpisodeView], tuple[str, dict[str, Any]]]
Actor = Callable[[AgentTaskEnv, dict[str, np.ndarray]], Any]
"""``(env, observation) -> env action``."""


def planner_actor(plan: Planner) -> Actor:
    """A scripted planner as an actor (its ``(skill, params)`` encoded by the env)."""
    return lambda env, _obs: env.encode_action(*plan(env.view()))


def run_policy(
    act: Actor, tasks_per_family: int, seen: list[dict[str, np.ndarray]] | None = None
) -> dict[str, Any]:
    """Every validation task once: the quality figures, completion and mean steps (``seen`` collects the
    observations the actor acted on)."""
    env = AgentTaskEnv(
        AgentTaskEnvConfig(domain="inspection", split="validation", validation_per_family=tasks_per_family)
    )
    records = []
    obs, _ = env.reset(seed=0)
    for i in range(tasks_per_family * len(env.families)):
        if i:
            obs, _ = env.reset()
        while True:
            if seen is not None:
                seen.append(obs)
            obs, _r, term, trunc, info = env.step(act(env, obs))
            if term or trunc:
                records.append(EpisodeRecord.from_dict(info[EPISODE_RECORD]))
                break
    env.close()
    m = final_metrics(records)

    def fig(x: float) -> float | None:  # None (JSON null) when nothing was measured (no ranking call: NaN)
        return None if math.isnan(x) else round(x, 4)

    return {
        "f1": fig(m["f1"]),
        "iou": fig(m["iou"]),
        "ndcg": fig(m["ndcg"]),
        "completion": round(float(np.mean([r.completed for r in records])), 4),
        "steps": round(float(np.mean([r.num_steps for r in records])), 2),
        "parts": m["n_items"],
        "rankings": m["n_rankings"],
    }


def publish_rows(rows: list[dict[str, Any]]) -> None:
    """Print and record the rows through ``benchmarks/results_record.publish``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from results_record import publish

    publish("inspection", rows)


def trained_policy(run_dir: str, tasks_per_family: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's greedy policy on the validation tasks, and its mean modality gates over what it saw."""
    import torch

    from agentic_ray.eval.evaluator import ModulePolicy
    from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint
    from agentic_ray.models.multimodal_node_encoder import gate_means
    from agentic_ray.models.obs_batching import stack_observations

    ckpt = pick_checkpoint(run_dir)
    module = load_policy_module(ckpt)
    module.eval()
    policy = ModulePolicy(module)
    seen: list[dict[str, np.ndarray]] = []
    row = run_policy(lambda _env, obs: policy.forward([obs]).actions[0], tasks_per_family, seen)
    row["checkpoint"] = str(ckpt)
    with torch.no_grad():
        enc = module.model.encode(stack_observations(seen))
    gates = {k: round(v, 4) for k, v in gate_means(enc.modality_gates, enc.node_masks).items()}
    gates["fusion"] = module.model.config.modality_fusion if enc.modality_gates else "flat"
    return row, gates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks-per-family", type=int, default=10)
    ap.add_argument("--run-dir", default=None, help="a training run whose policy to evaluate (see above)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    d = get_domain("inspection")
    record = det.detector().record
    sweep = record["heldout"]["f1_by_threshold"]
    best_t = float(max(sweep, key=sweep.get))
    quality = json.loads((d.data_dir / "quality_scorer.json").read_text())
    policies: dict[str, Planner] = {
        "expert": d.expert().plan,
        "default_threshold": FixedThresholdPolicy().plan,
        "best_constant_threshold": FixedThresholdPolicy(
            {**det.DEFAULT_PARAMS, "confidence_threshold": best_t}
        ).plan,
    }
    row: dict[str, Any] = {
        "benchmark": "inspection",
        "tasks_per_family": args.tasks_per_family,
        "families": list(d.families),
    }
    for name, plan in policies.items():
        row[name] = run_policy(planner_actor(plan), args.tasks_per_family)
    if args.run_dir:
        row["trained"], row["gates"] = trained_policy(args.run_dir, args.tasks_per_family)
    row["best_constant_threshold"]["confidence_threshold"] = best_t
    row["detector"] = {
        "version": det.detector().version,
        "heldout_f1_at_defaults": record["heldout"]["f1"],
        "heldout_f1_by_threshold": sweep,
    }
    row["quality_scorer"] = {
        "version": f"{quality['version']}@{quality['sha256'][:12]}",
        "heldout_mae": quality["training"]["holdout_mae"],
        "heldout_mae_of_mean": quality["training"]["holdout_mae_of_mean"],
    }
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    publish_rows([row])


if __name__ == "__main__":
    main()
