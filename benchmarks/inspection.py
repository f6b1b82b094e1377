"""Industrial visual inspection (issue 30): detection, localisation and ranking quality per policy; one JSON line.

On the fixed validation tasks of every family (``--tasks-per-family`` each, faults off), with the frozen detector:

* ``expert``: the scripted expert (detector parameters tuned per part on the ground truth: the reference level);
* ``default_threshold``: the observation-only rule policy with ``detect`` at the contract's defaults, then rank
  and record from what the tools revealed (:class:`~agentic_ray.domains.inspection.baseline.FixedThresholdPolicy`);
* ``best_constant_threshold``: the same rule policy at the confidence threshold that scored the best held-out F1
  when the detector was built (``detector.json``): how much a single better constant gains, without adapting;
* ``best_family_params``: the same rule policy with ``detect``'s parameters chosen per task family
  (:class:`~agentic_ray.domains.inspection.baseline.FamilyParamsPolicy`), each the grid point (threshold, NMS
  overlap, max detections, class filter) with the best mean crack F1 over the parts of ``--select-tasks`` training
  tasks of that family (never the validation tasks): what adapting ``detect`` to the request alone gains. A policy
  must adapt to the part's image to do better (the expert's per-part choice is the ceiling).

Per policy: ``f1`` (each inspected part's last detection call, cracks at IoU >= 0.5, averaged over parts),
``iou`` (localisation IoU, over parts with a crack), ``ndcg`` (the ranking call of ``top_cracks`` tasks),
each with ``*_ci``, its 95% bootstrap interval over the validation episodes (the parts of one episode are resampled
together: :func:`~agentic_ray.eval.bootstrap.ratio_of_sums_ci`), ``completion``, ``steps`` and ``detect_threshold``
(per family, the mean confidence threshold of its ``detect`` calls). Also the detector's
and the quality scorer's recorded versions and held-out figures, and the run's ``wall_s``.

With ``--run-dir RUN [RUN ...]`` (runs of ``agentic-ray train --config configs/inspection.yaml``, e.g. one per
seed): also ``trained``, the runs' policies (greedy, each its last stage's checkpoint, or ``--stage``'s) on the
same tasks, and
``gates``, the mean ``gate_image``, ``gate_text`` and ``gate_struct`` of the multimodal encoder over the observations
of those episodes (each over the part nodes that revealed the modality; see
:mod:`agentic_ray.models.multimodal_node_encoder`). With several runs, ``trained`` holds their means and its
``*_ci`` are intervals over the runs; ``trained_per_run`` holds each run's row, with what it trained with
(``run``: config name, seed, stage budgets, fusion). ``goals`` then says whether
issue 30's bar is met (:func:`goals`).

With ``--compare reward|fusion|both``: instead, seed 000's two comparisons, each arm trained by the pipeline at
``--seeds`` (default 0 1 2) from the same small imitation start, with ``episodes_to_target`` (training episodes until
the validation curve reaches ``--target``; runs that never do are censored at the budget and counted in
``reached``), its interval over seeds, start and final completion and F1, and the ratio between the arms: the
layered rewards of ``configs/inspection.yaml`` against one sparse end-of-task reward (the ``task_outcome`` layer
alone), and the gated multimodal encoder against a flat concatenation (``model.modality_fusion: flat``). The
setting, the target and why are in :mod:`inspection_compare` (``benchmarks/inspection_compare.py``). Each
comparison is recorded as ``inspection-compare-<name>``; ``--runs`` keeps the finished runs to resume from.

    python benchmarks/inspection.py [--tasks-per-family 50] [--run-dir RUN [RUN ...]]
    python benchmarks/inspection.py --compare both --seeds 0 1 2 --runs RUNS.jsonl [--jobs 2]
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
from agentic_ray.domains.inspection.baseline import FamilyParamsPolicy, FixedThresholdPolicy
from agentic_ray.domains.inspection.family_params import family_detect_params
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
    return {
        **episode_figures(records),
        "completion": round(float(np.mean([r.completed for r in records])), 4),
        "steps": round(float(np.mean([r.num_steps for r in records])), 2),
        "detect_threshold": detect_thresholds(records),
    }


def detect_thresholds(records: list[EpisodeRecord]) -> dict[str, float]:
    """Per task family, the mean ``confidence_threshold`` of the policy's ``detect`` calls (as the gateway passed
    them on): whether a policy adapts ``detect`` to the task, e.g. a low threshold where cracks are faint."""
    by: dict[str, list[float]] = {}
    for r in records:
        for s in r.steps:
            if s.skill == "detect" and "confidence_threshold" in s.args:
                by.setdefault(r.task_family, []).append(float(s.args["confidence_threshold"]))
    return {f: round(float(np.mean(v)), 3) for f, v in by.items()}


def fig(x: float) -> float | None:
    """A figure for the JSON line: None (JSON null) when nothing was measured (no ranking call: NaN)."""
    return None if math.isnan(x) else round(x, 4)


def episode_figures(records: list[EpisodeRecord]) -> dict[str, Any]:
    """``f1``, ``iou`` and ``ndcg`` (``final_metrics``' per-part and per-ranking means, pooled over the episodes),
    each with ``*_ci``, its 95% bootstrap interval over the validation episodes (clusters: the parts of one episode
    share its detector parameters), and the ``parts`` and ``rankings`` counted. Each episode's detections are
    matched once: the pooled mean is the ratio of the per-episode sums."""
    from agentic_ray.eval.bootstrap import ratio_of_sums_ci

    per = [final_metrics([r]) for r in records]
    out: dict[str, Any] = {}
    for k, n in (("f1", "n_items"), ("iou", "n_localised"), ("ndcg", "n_rankings")):
        counts = [x[n] for x in per]
        sums = [0.0 if c == 0 else x[k] * c for x, c in zip(per, counts, strict=True)]
        out[k] = fig(sum(sums) / sum(counts)) if sum(counts) else None
        ci = ratio_of_sums_ci(sums, counts)
        out[f"{k}_ci"] = None if ci is None else [round(ci[0], 4), round(ci[1], 4)]
    out["parts"] = sum(x["n_items"] for x in per)
    out["rankings"] = sum(x["n_rankings"] for x in per)
    return out


def publish_rows(rows: list[dict[str, Any]]) -> None:
    """Print and record the rows through ``benchmarks/results_record.publish``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from results_record import publish

    publish("inspection", rows)


def trained_policy(
    run_dir: str, tasks_per_family: int, stage: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's greedy policy on the validation tasks, and its mean modality gates over what it saw."""
    import torch

    from agentic_ray.eval.evaluator import ModulePolicy
    from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint
    from agentic_ray.models.multimodal_node_encoder import gate_means
    from agentic_ray.models.obs_batching import stack_observations

    ckpt = pick_checkpoint(run_dir, stage)
    module = load_policy_module(ckpt)
    module.eval()
    policy = ModulePolicy(module)
    seen: list[dict[str, np.ndarray]] = []
    row = run_policy(lambda _env, obs: policy.forward([obs]).actions[0], tasks_per_family, seen)
    row["checkpoint"] = str(ckpt)
    row["run"] = run_settings(run_dir)
    with torch.no_grad():
        enc = module.model.encode(stack_observations(seen))
    gates = {k: round(v, 4) for k, v in gate_means(enc.modality_gates, enc.node_masks).items()}
    gates["fusion"] = module.model.config.modality_fusion if enc.modality_gates else "flat"
    return row, gates


def run_settings(run_dir: str) -> dict[str, Any]:
    """What the run trained with, from its resolved settings: config name, seed and each stage's budget."""
    s = json.loads((Path(run_dir) / "settings.json").read_text())
    st = s.get("stages", {})
    return {
        "name": s.get("name"),
        "seed": s.get("seed"),
        "il_demos": st.get("il", {}).get("demos"),
        "il_epochs": st.get("il", {}).get("epochs"),
        "rl_iterations": st.get("rl", {}).get("iterations"),
        "reflection_iterations": st.get("reflection", {}).get("iterations"),
        "modality_fusion": s.get("model", {}).get("modality_fusion"),
    }


def over_runs(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's row as it is; several runs' (seeds') rows as their mean, with ``*_ci`` then the 95% bootstrap
    interval over the runs (each run's own interval over episodes is in ``trained_per_run``)."""
    from agentic_ray.eval.bootstrap import bootstrap_mean_ci

    if len(rows) == 1:
        return rows[0]
    out: dict[str, Any] = {"runs": len(rows)}
    for k, v in rows[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            vals = [r[k] for r in rows if r.get(k) is not None]
            out[k] = round(float(np.mean(vals)), 4) if vals else None
            if f"{k}_ci" in rows[0]:
                ci = bootstrap_mean_ci(vals)
                out[f"{k}_ci"] = None if ci is None else [round(ci[0], 4), round(ci[1], 4)]
        elif (
            isinstance(v, dict) and k == "detect_threshold"
        ):  # per family: the mean over the runs that called it
            fams = sorted({f for r in rows for f in r[k]})
            out[k] = {f: round(float(np.mean([r[k][f] for r in rows if f in r[k]])), 3) for f in fams}
        elif isinstance(v, str) and k != "checkpoint":
            out[k] = v
    return out


F1_GAIN_GOAL = 0.05
"""Issue 30's F1 bar: the trained policy's F1 over the default-threshold baseline's."""


def goals(trained: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Issue 30's bar: F1 at least the default-threshold baseline's + 0.05 and NDCG at least the baseline's, each with
    intervals that do not overlap (the trained policy's interval wholly above the baseline's)."""

    def above(k: str) -> bool | None:
        t, b = trained.get(f"{k}_ci"), baseline.get(f"{k}_ci")
        return None if t is None or b is None else t[0] > b[1]

    gain = (
        None if trained["f1"] is None or baseline["f1"] is None else round(trained["f1"] - baseline["f1"], 4)
    )
    return {
        "f1_gain": gain,
        "f1_gain_met": gain is not None and gain >= F1_GAIN_GOAL,
        "f1_intervals_disjoint": above("f1"),
        "ndcg_at_least_baseline": None
        if trained["ndcg"] is None or baseline["ndcg"] is None
        else trained["ndcg"] >= baseline["ndcg"],
        "ndcg_intervals_disjoint": above("ndcg"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--tasks-per-family",
        type=int,
        default=100,
        help="validation tasks per family (the default-threshold F1 was 0.715 on 10 per family, 0.681 on 50 and "
        "0.676 on 100: 10 is too few to resolve issue 30's +0.05 bar; on 50 the default-threshold NDCG's interval "
        "[0.9275, 0.9674] still overlapped the record runs' [0.9637, 0.976], on 100 it is [0.9186, 0.9599])",
    )
    ap.add_argument(
        "--run-dir",
        nargs="+",
        default=None,
        help="training runs whose policies to evaluate, e.g. one per seed (see above)",
    )
    ap.add_argument(
        "--stage",
        default=None,
        choices=["il", "rl", "reflection"],
        help="evaluate that stage's checkpoint of each run (default: its last stage's)",
    )
    ap.add_argument(
        "--select-tasks",
        type=int,
        default=30,
        help="training tasks per family that choose best_family_params' parameters",
    )
    import inspection_compare  # benchmarks/ is the script's directory

    inspection_compare.add_arguments(ap)
    args = ap.parse_args()
    if args.worker:
        from worker_runs import report

        report(inspection_compare.train_run(args.worker[0], int(args.worker[1]), args))
        return
    if args.compare:
        inspection_compare.run_campaign(args, __file__)
        return
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
    chosen = family_detect_params(args.select_tasks)
    policies["best_family_params"] = FamilyParamsPolicy(
        {f: {k: v for k, v in p.items() if k in det.DEFAULT_PARAMS} for f, p in chosen.items()}
    ).plan
    row: dict[str, Any] = {
        "benchmark": "inspection",
        "tasks_per_family": args.tasks_per_family,
        "families": list(d.families),
    }
    for name, plan in policies.items():
        row[name] = run_policy(planner_actor(plan), args.tasks_per_family)
    if args.run_dir:
        runs = [trained_policy(r, args.tasks_per_family, args.stage) for r in args.run_dir]
        row["trained"], row["gates"] = over_runs([t for t, _ in runs]), over_runs([g for _, g in runs])
        if len(runs) > 1:
            row["trained_per_run"] = [t for t, _ in runs]
        row["goals"] = goals(row["trained"], row["default_threshold"])
    row["best_constant_threshold"]["confidence_threshold"] = best_t
    row["best_family_params"]["params"] = chosen
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
