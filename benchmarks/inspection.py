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

Not yet here (issue 30, phase 2, which needs issues 25 and 26 on main): the AAAC-trained policy, the
multimodal encoder's gates, and seed 000's two comparisons (layered vs sparse reward, gated vs flat).

    python benchmarks/inspection.py [--tasks-per-family 10]
"""

from __future__ import annotations

import argparse
import json
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


def run_policy(plan: Planner, tasks_per_family: int) -> dict[str, Any]:
    """Every validation task once: the quality figures, completion and mean steps."""
    env = AgentTaskEnv(
        AgentTaskEnvConfig(domain="inspection", split="validation", validation_per_family=tasks_per_family)
    )
    records = []
    env.reset(seed=0)
    for i in range(tasks_per_family * len(env.families)):
        if i:
            env.reset()
        while True:
            _obs, _r, term, trunc, info = env.step(env.encode_action(*plan(env.view())))
            if term or trunc:
                records.append(EpisodeRecord.from_dict(info[EPISODE_RECORD]))
                break
    env.close()
    m = final_metrics(records)
    return {
        "f1": round(m["f1"], 4),
        "iou": round(m["iou"], 4),
        "ndcg": round(m["ndcg"], 4),
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks-per-family", type=int, default=10)
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
        row[name] = run_policy(plan, args.tasks_per_family)
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
