"""Seed 000's two comparisons on the inspection domain (issue 30), run by ``benchmarks/inspection.py --compare``.

* ``reward``: the layered rewards of ``configs/inspection.yaml`` (L1 execution, L2 efficiency, L3 risk and plan,
  the dense localisation IoU, detection F1 and ranking NDCG layers and the model-based detection quality; L1 pays a
  goal call its share of the task's goals and the detection layers the improvement over detect's defaults, so the
  return pays for progress toward completion, not for calls: ``benchmarks/inspection_reward_signal.py``) against
  one sparse end-of-task reward: the ``task_outcome`` layer alone (1 when the task completed, 0 otherwise, on the
  last step; :mod:`agentic_ray.rewards.layers.task_outcome_layer`), set through ``rewards.layers`` only. With a
  reward pool the layers' sum replaces the env's per-step reward, so no call result and no shaping reaches the
  learner before the episode's end (``tests/unit/test_inspection_compare.py`` scores a real episode to check it).
  Seed 000: 2,800 -> 620 episodes.
* ``fusion``: the gated cross-attention encoder (``model.modality_fusion: gated``) against a flat concatenation
  of the same features (``flat``), both with the layered rewards. Seed 000: flattening slowed convergence by 60%.

The layered and the gated arm are the same run (the config as it is), trained once per seed and shared by both
comparisons.

**Setting.** Each run is the pipeline itself (:class:`~agentic_ray.stages.pipeline.Pipeline`, stages ``il`` then
``rl``, as ``agentic-ray train`` runs them) on the config with the arm's one change, from a *small* imitation
start: ``--il-demos`` (default 40) scripted-expert demonstrations at the config's 30 epochs, the same ones for every
arm at a seed (the reward arms start from the same module; the fusion arms imitate them with their own encoders).
Why not the config's own start (120 demonstrations): in the record's three runs its 40 RL iterations left
validation completion where imitation had put it (0.5, 0.5 and 0.6 on 10 tasks, imitation and end of RL alike), so
from there every run of every arm would be censored. Why not from scratch: the untrained policy inspects no part
and completes no task (``tests/learning/test_inspection_aaac.py``), so the sparse arm's reward would stay 0 until a
task completes by chance and, at ~8k env steps, the comparison would likely measure nothing but that. 40
demonstrations leave room: greedy validation completion 0.35 (20 tasks, seed 0), F1 0.73.

RL uses the config's settings (lr 1e-4, one epoch, critic warm-up, no entropy bonus) except the KL anchor to the
imitation policy (``algo.training.anchor_kl_coeff=0``, :data:`SETTING`): the anchor was added to keep RL near a good
imitation policy, and near a weak one it holds back exactly the learning that is measured. ``--set KEY=VALUE``
changes any setting of every arm. The budget, ``--iterations 96`` of 256 env steps (about 25k env steps, ~2,550
episodes, near seed 000's sparse figure of 2,800), took 7-15 minutes per run with two at once on a loaded 2-CPU box
(29-61 env steps/s), about 25-45 minutes for a 3-seed ``reward`` campaign. It was 32 (~800 episodes) until the
fourth campaign: at that budget RL moved greedy completion by about one task of the curve's 20 and every run was
censored, while from ~1,500 episodes on it rose in both arms (below).

**Not shown by the seven campaigns run so far** (``benchmarks/results/inspection-compare-*.json``, 3 seeds, 6 in the
sixth): issue 30's 2x. In the first three every run but one sparse seed per early campaign was censored, so their
ratios were not measurements of convergence. The first two (40 iterations at ``--set algo.lr=0.001``, since at the
config's 1e-4 the RL stage left greedy completion where imitation had put it): in the first (2026-12-05) it went
layered 0.38 -> 0.43, sparse 0.38 -> 0.42, flat 0.35 -> 0.35 (ratios 0.81 and 0.99); in the second (2026-12-06,
after the numeric-target encoding fix and the task context) layered 0.40 -> 0.37, sparse 0.40 -> 0.42, flat 0.35 ->
0.35 (ratios 0.999 and 0.961). The third (2026-12-06, ``reward`` only, 32 iterations at ``--set algo.lr=0.0003``,
after the layered reward was made to pay for progress: its return's correlation with completion 0.02 -> 0.79 on 200
sampled episodes of the imitation start) went layered 0.40 -> 0.38, sparse 0.40 -> 0.45, ratio 1.023. The fourth
(2026-12-06, the third's setting at 96 iterations) is the first in which the RL stage raised completion: greedy
completion stayed at 0.3-0.55 for the first ~1,500 episodes of every run, then rose in 5 of 6: layered 0.40 -> 0.65
(3 of 3 reached 0.6, mean 2,032 episodes [1,586, 2,397]), sparse 0.40 -> 0.58 (2 of 3; mean 2,473 with one censored
at 2,593), ratio 1.217 [0.97, 1.635], a lower bound: the layered rewards converged about as fast as the sparse one,
not 2x faster.

**Why RL is slow here, and why the layered reward helps it little** (``benchmarks/inspection_rl_diagnosis.py``, 10
validation tasks per family, a layered run of this setting at 32 iterations, seed 0). The imitation start fails at a
task's last decision: 91% of its greedy failures are one identical ``db_update`` (the wrong parts or finding) or
``rank_topk`` (a subset of the line) repeated until the step budget runs out, because the observation after the
wrong call leads the greedy policy to the same call; sampled, the policy retries with other arguments (18% of its
failures are loops) and completes more (0.44 against 0.36 greedy). Greedy completion rises only once the mode of
that call's pointer-set head flips to the right parts, which took RL (lr 3e-4, one epoch of 4 minibatches per 256
env steps) ~1,500-2,500 episodes; in 32 iterations greedy completion went 0.36 -> 0.42 (4 epochs: 0.38; lr 1e-3
with 4 epochs: the curve fell to 0.25-0.35). The information is in the observation: the rule policy at detect's
defaults records serial_reconcile's mismatched parts from the ``manifest_match`` flags (10 of 10 completed; the
imitation and RL policies 1-2 of 10). That deciding call earns the same in both arms: the layered reward's dense
terms pay for the steps the start already does right (detect's quality, the goal calls), and for the record or rank
call nothing short of the exact goal (a ``db_update`` with 2 of 3 cracked parts earns what one with none does), while
``ranking_ndcg`` scores a ranking over the parts the call was given, so a ``rank_topk`` over a subset of the line can
score 1 (on 60 sampled top_cracks episodes of the imitation start, 177 of 278 ranking calls ranked a subset and scored
0.967 on average, 0.913 over the whole line, against 0.951 for the full rankings). A partial-credit record layer and
a ranking scored over the whole line are the candidates for a layered reward that informs that call: both exist as
options off by default (the ``record_credit`` layer, ``ranking_ndcg``'s ``over: line``).

**Fifth campaign, the two options** (2026-12-06, the fourth's setting, only the layered arm changed: ``--set
'rewards.layers.record_credit={}' --set rewards.layers.ranking_ndcg.params.over=line``; the sparse arm's settings
key is unchanged, so its three kept runs were reused; runs in
``benchmarks/results/inspection_compare_runs_reward96_options.jsonl``; 394-471 s per run, load1 1.0-3.1): layered
0.40 -> 0.55, 3 of 3 reached 0.6 at mean 2,153 episodes [1,727, 2,552] (seeds 1,727 / 2,552 / 2,179, against
2,112 / 2,397 / 1,586 without the options), ratio 1.149 [0.911, 1.449], a lower bound: no faster than without them.
On the 200 sampled episodes of ``inspection_reward_signal.py`` the options move the return little: its correlation
with completion 0.791 -> 0.795; ``record_credit`` (weight 0.1) sums 0.565 raw on completed episodes (camera_fault's
judge no finding) and -0.273 on failed ones (corr 0.53), 0.18 of a completed episode's weighted return of 3.5;
``over: line`` changes the ranking layer's raw sum on failed episodes 0.260 -> 0.257 (its value is a potential, so
an episode earns its last ranking's NDCG, and a subset ranking loses about 0.05 of it).

**Sixth campaign, a charge for the loop** (2026-12-06, the fourth's setting, only the layered arm changed: ``--set
rewards.layers.execution.params.repeat_value=-1``, each successful repeat of an identical call that satisfied no goal
earns -1 in L1 instead of 0; the sparse arm's three kept runs reused, then seeds 3-5 run for both arms; runs in
``benchmarks/results/inspection_compare_runs_reward96_repeat.jsonl``; 368-455 s per run, load1 0.2-3.9). On seeds
0-2: layered 0.40 -> 0.73, 3 of 3 reached 0.6 at mean 1,409 episodes [846, 1,757] (seeds 1,625 / 846 / 1,757),
ratio 1.755 [1.476, 2.747], a lower bound. It did not hold on three more seeds: layered 2,092 / 658 / censored at
2,968 (seed 5 ended at 0.45), sparse 753 / 858 / 1,611; on all six, layered 1,658 [1,065, 2,272] (5 of 6 reached),
sparse 1,774 [1,158, 2,355] (5 of 6), ratio 1.07 [0.627, 1.793] (in env steps 1.164 [0.74, 1.772]), final
completion 0.68 against 0.64. Seeds 3 and 4 start at 0.5 (imitation completes 10 of 20 curve tasks), two tasks from
the target, and their first crossings are single evaluations (sparse seed 3 read 0.6 at 753 episodes, then
0.45-0.55 for the next 14 evaluations): across seeds the spread (658 to censored in one arm) is larger than any
difference between the arms.

**Seventh campaign, from scratch** (2026-12-06, the fourth's setting with ``--set 'stages.run=[rl]'``: no imitation,
both arms from the untrained policy; ``--target 0.2``, chosen before the runs since neither arm was expected near 0.6;
runs in ``benchmarks/results/inspection_compare_runs_scratch96.jsonl``, 348-476 s per run, not recorded as the
comparison's record). The layered arm reached completion 0.2 in 3 of 3 seeds, at 4,111 / 3,860 / 5,492 episodes
(7,186 / 7,197 / 9,242 env steps), and stayed at 0.2 (4 of 20 curve tasks) to the end of the budget; the sparse arm
completed no curve task in any seed through 24,700 env steps (2,645-2,802 episodes). This is the regime in which a
dense reward matters: the sparse reward never fired. The benchmark's episode count cannot express it as a ratio
(0.61 [0.482, 0.726], "lower"): the layered policy's episodes were about 2 steps long, the sparse policy's about 9,
so the sparse arm's censoring point (its budget in episodes) lies below the layered arm's crossing. In env steps the
layered arm reached the target at least 3.1x sooner than the sparse one: the comparison line prints
``"env_steps_ratio": 3.136, "env_steps_ratio_ci": [2.671, 3.436], "bound": "lower"`` (24,694 env steps against a
mean of 7,875). These six runs were made before the RL clock was fixed for a run without imitation: their
``env_steps_per_s`` (0.33) was rewritten as env steps over wall time.

**Why the 2x is not shown, after seven campaigns.** (1) From an imitation start the sparse reward is not sparse: the
start completes 35-50% of tasks, so about half of the sampled episodes carry the end-of-task signal (seed 000 does
not say what its runs started from; from scratch, the seventh campaign, the sparse reward never fired and the
layered one found completion, which is where it helps). (2) What RL has to learn is the deciding record or rank call
(above), and every dense term tried tells that call little more than the outcome does: partial credit for the
record, NDCG over the line, a charge for repeating it (campaigns five and six). (3) ``episodes_to_target`` at 20
curve tasks is the first of 24 noisy evaluations to cross 0.6, and its spread across seeds is as wide as the 2x the
issue asks to resolve.

**Measure.** Every ``--eval-every`` RL iterations the pipeline evaluates the policy greedily on
``--curve-tasks-per-family`` validation tasks of each of the 5 families, faults off (``eval.fault_share=0``, as the
benchmark's policy rows); the imitation policy's evaluation is the curve's start (0 episodes). A run's
``episodes_to_target`` is the number of training episodes sampled when the curve's ``--target-metric``
(``completion``, the default, or ``f1``) first reaches ``--target``; a run that never reaches it within the budget
(``--iterations`` RL iterations of 256 env steps) is *censored*: it counts at the episodes of its last evaluation, a
lower bound. ``env_steps_to_target`` counts env steps the same way: where the arms' episodes differ in length (from
scratch, one arm's were ~2 steps and the other's ~9) only it compares the sample cost; seed 000 counts episodes. Per
arm: the mean over seeds with its 95% bootstrap interval over seeds, ``reached`` (runs that reached the target, of
``runs``), the start and final completion and F1 (the curve's first and last evaluations, means with intervals), and
``per_seed``. Per comparison, one more line: the ratio of the two arms' means of ``episodes_to_target``
(``env_steps_ratio``: of ``env_steps_to_target``; ``sparse / layered``, ``flat / gated``: above 1, the first arm
converged faster) with a paired bootstrap interval over seeds
(:func:`~agentic_ray.eval.bootstrap.ratio_of_sums_ci`); where an arm has censored runs the ratio is a bound
(``bound``: ``lower`` when only the second arm has, ``upper`` when only the first). The target is applied to the
recorded curves, so another ``--target`` reuses the runs of ``--runs``.

Runs are kept in ``--runs`` (JSON lines, one per (run, seed)) and reused while their fully resolved settings are
the same (any changed setting or code default reruns them); each runs in its own subprocess with a private Ray.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported as benchmarks.<name>
from worker_runs import append_run, first_reaching, load_runs, run_worker, settings_fingerprint

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "inspection.yaml"

RUNS: dict[str, dict[str, Any]] = {
    "config": {},
    # scaled but not shifted, so that an episode that did not complete still scores 0
    "sparse": {"rewards.layers": {"task_outcome": {"normalize": "scale"}}},
    "flat": {"model.modality_fusion": "flat"},
}
"""Run -> its one change to the config (dotted settings keys; ``rewards.layers`` replaces the config's layers)."""

COMPARISONS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "reward": (("layered", "config"), ("sparse", "sparse")),
    "fusion": (("gated", "config"), ("flat", "flat")),
}
"""Comparison -> its ``(arm, run)`` pairs, the reference arm first."""

SEED_000 = {
    "reward": "sparse 2,800 -> layered 620 episodes (ratio 4.5); issue 30's goal: ratio >= 2",
    "fusion": "flattening slowed convergence by 60% (ratio 1.6)",
}

SETTING: dict[str, Any] = {"algo.training.anchor_kl_coeff": 0.0}
"""What every run changes in the config's RL besides the budgets (see the module docstring)."""

PRIVATE_RAY: dict[str, Any] = {
    "num_cpus": 2,
    "include_dashboard": False,
    "configure_logging": False,
    "log_to_driver": False,
}
"""How each worker starts its own local Ray (quiet, no dashboard)."""

CURVE = ("stage", "episodes", "env_steps", "completion", "f1")
"""The fields of one curve point, in order."""


def settings_for(run: str, seed: int, a: argparse.Namespace) -> Any:
    """The validated settings of ``run`` at ``seed``: the config, the benchmark's setting, ``--set``, the run's
    change."""
    import yaml

    from agentic_ray.settings import load_settings

    overrides: dict[str, Any] = {
        "seed": seed,
        "wandb.mode": "disabled",
        "stages.run": ["il", "rl"],
        "stages.il.demos": a.il_demos,
        "stages.rl.iterations": a.iterations,
        "eval.every": a.eval_every,
        "eval.tasks_per_family": a.curve_tasks_per_family,
        "eval.fault_share": 0.0,
        "eval.traces_per_eval": 0,
        "eval.failed_traces_per_eval": 0,
        **SETTING,
        **{k: yaml.safe_load(v) for k, _, v in (x.partition("=") for x in a.set)},
        **RUNS[run],
    }
    return load_settings(CONFIG, overrides)


def settings_key(run: str, a: argparse.Namespace) -> str:
    """Hash of the run's fully resolved settings without the seed: a recorded run is reused only when it matches."""
    return settings_fingerprint(settings_for(run, 0, a))


def train_run(run: str, seed: int, a: argparse.Namespace) -> dict[str, Any]:
    """One (run, seed): the pipeline's imitation and RL stages in a private Ray, and the curve of its evaluations
    (:data:`CURVE` per point, the imitation policy's first)."""
    import ray
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_EPISODES_LIFETIME

    from agentic_ray.rewards.call_outcomes import final_metrics
    from agentic_ray.stages.pipeline import Pipeline

    s = settings_for(run, seed, a)
    ray_dir = tempfile.mkdtemp(prefix="agray_insp_", dir="/tmp")
    run_dir = Path(tempfile.mkdtemp(prefix="insp_cmp_", dir="/tmp"))
    curve: list[list[Any]] = []
    pipe: Pipeline | None = None
    t0 = time.perf_counter()
    rl_start = [t0]  # when imitation's evaluation ended: RL's clock starts there (from scratch: t0)

    def on_evaluation(row: dict[str, Any], res: Any) -> None:
        assert pipe is not None
        episodes = pipe.algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_EPISODES_LIFETIME), default=0)
        f1 = final_metrics(res.records)["f1"]
        point = [
            row["stage"],
            int(episodes),
            row["env_steps"],
            row["completion"],
            None if math.isnan(f1) else f1,
        ]
        curve.append(point)
        if row["stage"] == "il":
            rl_start[0] = time.perf_counter()
        print(f"# {run} seed {seed}: {dict(zip(CURVE, point, strict=True))}", file=sys.stderr, flush=True)

    try:
        ray.init(_temp_dir=ray_dir, **PRIVATE_RAY)
        pipe = Pipeline(
            s, run_dir, progress=lambda m: print(m, file=sys.stderr, flush=True), on_evaluation=on_evaluation
        )
        out = pipe.run()
    finally:
        ray.shutdown()
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(ray_dir, ignore_errors=True)
    # the imitation policy that RL started from; with ``--set 'stages.run=[rl]'`` (from scratch) the first evaluation
    start = max((i for i, p in enumerate(curve) if p[0] == "il"), default=0)
    curve = curve[start:]
    rl_s = time.perf_counter() - rl_start[0]
    return {
        "run": run,
        "seed": seed,
        "status": out["status"],
        "curve": curve,
        "episodes": curve[-1][1],
        "env_steps": curve[-1][2],
        "wall_s": round(time.perf_counter() - t0, 1),
        "il_s": round(rl_start[0] - t0, 1),
        "env_steps_per_s": round(curve[-1][2] / max(rl_s, 1e-9), 2),
        "modality_fusion": s.model.modality_fusion,
        "reward_layers": s.rewards.enabled_layers() if s.rewards is not None else [],
    }


def to_target(r: dict[str, Any], metric: str, target: float, unit: str = "episodes") -> tuple[int, bool]:
    """``(episodes_to_target, reached)`` of one run: the training episodes (``unit="env_steps"``: env steps) at the
    first evaluation whose ``metric`` reaches ``target``, or, censored, those of its last evaluation (the budget)
    and False."""
    at = CURVE.index(unit)
    hit = first_reaching(r["curve"], target, at=at, value=CURVE.index(metric))
    return (r["curve"][-1][at], False) if hit is None else (int(hit), True)


def _mean_ci(values: list[float | None]) -> tuple[float | None, list[float] | None]:
    from agentic_ray.eval.bootstrap import bootstrap_mean_ci

    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    ci = bootstrap_mean_ci(vals)
    return round(statistics.fmean(vals), 4), None if ci is None else [round(x, 4) for x in ci]


def arm_line(
    compare: str, arm: str, run: str, rows: list[dict[str, Any]], a: argparse.Namespace
) -> dict[str, Any]:
    """One arm's JSON line over its seeds (see the module docstring)."""
    hits = [to_target(r, a.target_metric, a.target) for r in rows]
    line: dict[str, Any] = {
        "benchmark": "inspection",
        "compare": compare,
        "arm": arm,
        "run": run,
        "target": {"metric": a.target_metric, "level": a.target},
        "seeds": [r["seed"] for r in rows],
        "runs": len(rows),
        "reached": sum(ok for _, ok in hits),
    }
    line["episodes_to_target"], line["episodes_to_target_ci"] = _mean_ci([e for e, _ in hits])
    steps = [to_target(r, a.target_metric, a.target, unit="env_steps")[0] for r in rows]
    line["env_steps_to_target"], line["env_steps_to_target_ci"] = _mean_ci(steps)
    line["budget_episodes"] = round(statistics.fmean(r["episodes"] for r in rows))
    for k in ("completion", "f1"):
        i = CURVE.index(k)
        line[f"start_{k}"], line[f"start_{k}_ci"] = _mean_ci([r["curve"][0][i] for r in rows])
        line[f"final_{k}"], line[f"final_{k}_ci"] = _mean_ci([r["curve"][-1][i] for r in rows])
    line |= {
        "env_steps": round(statistics.fmean(r["env_steps"] for r in rows)),
        "env_steps_per_s": round(statistics.fmean(r["env_steps_per_s"] for r in rows), 2),
        "wall_s": round(statistics.fmean(r["wall_s"] for r in rows), 1),
        "modality_fusion": rows[0]["modality_fusion"],
        "reward_layers": rows[0]["reward_layers"],
        "per_seed": [
            {
                "seed": r["seed"],
                "episodes_to_target": e,
                "env_steps_to_target": n,
                "reached": ok,
                "curve": r["curve"],
            }
            for r, (e, ok), n in zip(rows, hits, steps, strict=True)
        ],
    }
    return line


def ratio_line(compare: str, ref: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """The ratio of ``other``'s mean episodes to target over ``ref``'s, and of its mean env steps to target, each
    with a paired interval over seeds."""
    from agentic_ray.eval.bootstrap import ratio_of_sums_ci

    def ratio_ci(unit: str) -> tuple[float | None, list[float] | None]:
        ref_n = [p[unit] for p in ref["per_seed"]]
        other_n = [p[unit] for p in other["per_seed"]]
        if sum(ref_n) == 0:
            return None, None
        ci = ratio_of_sums_ci(other_n, ref_n)
        return round(sum(other_n) / sum(ref_n), 3), None if ci is None else [round(x, 3) for x in ci]

    censored = {x["arm"]: x["runs"] - x["reached"] for x in (ref, other)}
    ratio, ci = ratio_ci("episodes_to_target")
    steps_ratio, steps_ci = ratio_ci("env_steps_to_target")
    bound = {(False, False): None, (False, True): "lower", (True, False): "upper"}.get(
        (censored[ref["arm"]] > 0, censored[other["arm"]] > 0), "none (both censored)"
    )
    return {
        "benchmark": "inspection",
        "compare": compare,
        "ratio": f"{other['arm']}/{ref['arm']}",
        "episodes_to_target_ratio": ratio,
        "ratio_ci": ci,
        "env_steps_ratio": steps_ratio,
        "env_steps_ratio_ci": steps_ci,
        "bound": bound,
        "censored": censored,
        "seed_000": SEED_000[compare],
    }


def run_campaign(a: argparse.Namespace, script: str) -> None:
    """Every (run, seed) the chosen comparisons need, each in a worker subprocess of ``script`` (reusing
    ``--runs``), then the lines of each comparison, printed and recorded as ``inspection-compare-<name>``."""
    from results_record import publish

    compares = list(COMPARISONS) if a.compare == "both" else [a.compare]
    runs = sorted({run for c in compares for _, run in COMPARISONS[c]}, key=list(RUNS).index)
    keys = {run: settings_key(run, a) for run in runs}
    done = load_runs(a.runs, keys, arm_field="run")
    argv = list(sys.argv[1:])

    def one(job: tuple[int, str]) -> dict[str, Any]:
        seed, run = job
        if (run, seed) in done:
            return done[(run, seed)]
        r = run_worker(script, [*argv, "--worker", run, str(seed)], f"{run} seed {seed}")
        append_run(a.runs, r, keys[run])
        print(f"# {run} seed {seed}: {r['wall_s']:.0f}s, curve {r['curve']}", file=sys.stderr, flush=True)
        return r

    jobs = [(seed, run) for seed in a.seeds for run in runs]  # the runs of one seed side by side (same load)
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results = list(pool.map(one, jobs))
    by_run: dict[str, list[dict[str, Any]]] = {run: [] for run in runs}
    for (_, run), r in zip(jobs, results, strict=True):
        by_run[run].append(r)
    for c in compares:
        lines = [arm_line(c, arm, run, by_run[run], a) for arm, run in COMPARISONS[c]]
        publish("inspection", [*lines, ratio_line(c, *lines)], variant=f"compare-{c}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``--compare`` (see the module docstring)."""
    p.add_argument(
        "--compare",
        choices=[*COMPARISONS, "both"],
        default=None,
        help="run seed 000's comparison(s) instead of the policy table (see benchmarks/inspection_compare.py)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--runs", default=None, help="JSON-lines file of finished runs, reused and appended to")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (one per free core)")
    p.add_argument("--iterations", type=int, default=96, help="RL iterations per run (256 env steps each)")
    p.add_argument("--il-demos", type=int, default=40, help="demonstrations of the imitation start")
    p.add_argument("--eval-every", type=int, default=4, help="RL iterations between curve evaluations")
    p.add_argument(
        "--curve-tasks-per-family", type=int, default=4, help="validation tasks per family per evaluation"
    )
    p.add_argument("--target-metric", choices=["completion", "f1"], default="completion")
    p.add_argument(
        "--target", type=float, default=0.6, help="level of --target-metric that counts as converged"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="settings override for every arm (YAML value)",
    )
    p.add_argument("--worker", nargs=2, metavar=("RUN", "SEED"), help=argparse.SUPPRESS)
