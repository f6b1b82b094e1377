"""AAAC against PPO baselines and AAAC's own ablations on one domain's env (seed 002's table, on our envs).

``--domain`` (default ``ecommerce``) chooses the registered domain every arm trains and is evaluated on, e.g. the
multi-turn memory tasks (``helpdesk_memory``, ``ecommerce_memory``: 2 to about 15 steps, the setting of seed 002's
adaptive λ), beside the short e-commerce tasks. A domain other than e-commerce records as its own variant
(``aaac_vs_ppo-<setting>-<domain>``).

Every arm gets exactly the same env (action mode, fault injection driven by training progress), the same RLModule
(``AAACRLModule``, same encoder and sizes), batch, minibatch, epochs, lr, entropy bonus, env-step budget and seeds,
all through ``build_algo_config``. Arms:

* ``aaac``: env reward (reward critic) + the risk stream (risk critic), ``A = 0.7·A_reward + 0.3·A_risk``;
* ``ppo``: RLlib's PPO on the env reward only (it ignores ``custom_data``, so it never sees the risk stream);
* ``ppo_risk_folded``: PPO on ``reward + risk`` with one critic: does a *separate* risk critic matter?
* ``ppo_lagrangian``: PPO with a cost critic on ``−risk`` and a learned Lagrange multiplier (budget
  ``--cost-limit`` per episode): does AAAC's fixed 0.7/0.3 mix hold up against a learned trade-off?
* ``aaac_fixed_lambda`` (λ = ``--fixed-lambda`` for every episode), ``aaac_one_critic`` (no risk critic: the
  advantage is the reward critic's) and ``aaac_no_kl`` (no β-KL term): one AAAC component removed each.

The env runs in ``--risk-mode soft`` (default): the domain's high-risk shortcuts stay allowed (fewer steps), and with
the contract's probability a shortcut causes a delayed consequence (a complaint, a chargeback) that the env's reward
never sees. The risk stream is the L3 risk layer's score of the episode record, written by
``AgenticEpisodeCallbacks`` (``−w`` on every high-risk step, ``−consequence_scale·w`` per consequence on the last
step), so every arm that uses it sees the same signal, and PPO on the env reward sees none of it.

Every ``--eval-every`` iterations the current module is evaluated greedily on ``--curve-tasks`` validation tasks;
``steps_to_target`` is the env-step count at the first evaluation whose completion reaches ``--target``. At the
end each run is evaluated on ``--tasks`` validation tasks (default 200: 20 of each of the 10 e-commerce families)
twice: greedily (``completion``, ``spt``, ``high_risk_share_greedy``) and with actions sampled from the policy from
a fixed torch seed per run seed (``high_risk_share``, ``consequences_per_episode``, ``completion_sampled``). The
high-risk share is the sampled one: it measures the probability the policy still puts on high-risk calls, while a
greedy policy reads 0 for every arm after ~1k env steps and cannot tell the arms apart.
``env_steps_per_s`` is env steps over training wall time (sampling + learning, without evaluation). Each
(arm, seed) runs in its own subprocess (private Ray, ``num_env_runners=0``).

Prints one JSON line per arm: ``algo``, ``completion`` and ``completion_ci``, ``high_risk_share`` and
``high_risk_ci`` (means over seeds, 95% percentile-bootstrap intervals over seeds), ``steps_to_target`` (mean over
seeds; null when a seed never reached it), ``env_steps_per_s``, ``seeds``, and a few more (``consequences_*``,
``high_risk_share_greedy``, ``completion_sampled``, ``spt``, ``tcsr_policy``, ``tasks``). The ``--runs`` file keeps
each run's ``per_seed`` details, with the last learner metrics (``learner_final``: AAAC's β, entropy and the
risk diagnostics of ``TwoCriticAdvantages``; PPO-Lagrangian's multiplier and episode cost). Runs are reused by
their flags and the hash of their arm's fully resolved settings (``resolved``): a run made under other resolved
settings (another code default), or before the hash was recorded, is run again rather than reused, unless
``--reuse-stale`` (each arm's line then counts those, ``stale_runs``).
With every arm run, it also writes a markdown table.

``--eval-at-start`` also evaluates the untrained module on the final tasks (``start_completion``, ``start_high_risk_share``
in ``per_seed``); ``--eval-sampled`` samples every evaluation's actions (curve and final) instead of taking greedy
ones. ``tests/learning/test_aaac_soft_risk.py`` runs the AAAC arm through :func:`train_arm` with both.

``--init-demos N`` starts every arm from behaviour cloning of N scripted-expert demonstrations (the same ones for
every arm at a seed; the pipeline's ``stages.il`` settings, changed with ``--set``) instead of from scratch: the
setting of seed 002's 68.2% → 83.7%, where RL improves an imitation policy.

``--setting scratch|imitation`` chooses the defaults of the two settings the issue-25 comparison runs (any flag
given explicitly still wins): ``scratch`` (the defaults above: prototype actions, 20k env steps from a fresh module)
and ``imitation`` (from the same 25-demonstration imitation policy, as the pipeline's RL stage after imitation:
structured actions, ``stages.il`` 24 epochs at lr 0.002, RL lr 3e-4, 1 epoch, entropy 0.003, AAAC β₀ 1.0 and 2
critic warm-up updates, ``--eval-at-start``; see :data:`SETTINGS`).

First-pass completion (``first_pass_completion``, ``first_pass_ci``): the task completed and no delayed consequence
(a complaint, a chargeback) came back for it, from the same evaluation as ``completion``, beside it; with greedy
evaluations also ``first_pass_completion_sampled`` from the sampled one (where the shortcuts, and so the
consequences, are). Each line also says ``oracle`` (whether the arm's policy read the env's privileged root cause;
false unless ``--set model.reflection_source=oracle_env``) and ``stale_runs``; PPO-Lagrangian's line gives its
final multiplier (``lagrange_multiplier``, mean over seeds, and ``lagrange_multiplier_per_seed``) and the step
``--lagrangian-lr`` it was trained with.

``--risk-mode hard`` runs the production masks instead (every high-risk shortcut forbidden: no risk signal).

Run from the repository root (full run: 7 arms × 5 seeds; quick smoke: fewer seeds and tasks)::

    python benchmarks/aaac_vs_ppo.py
    python benchmarks/aaac_vs_ppo.py --seeds 0 --tasks 40 --env-steps 4000 --arms aaac ppo

``--tasks`` and ``--curve-tasks`` must be multiples of the domain's family count (10 for e-commerce, 2 for
``helpdesk_memory``, 3 for ``ecommerce_memory``). With every arm run, the markdown table goes to ``--out``
(default ``benchmarks/results/aaac_vs_ppo_table[-variant].md``; the hand-kept notes in
``benchmarks/results/aaac_vs_ppo.md`` are not written).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
    from benchmarks.worker_runs import settings_fingerprint
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]
    from worker_runs import settings_fingerprint  # type: ignore[no-redef]

# arm -> (settings.algo.name, extra .training() arguments); callables get the parsed flags.
ARMS: dict[str, tuple[str, Any]] = {
    "aaac": ("aaac", lambda a: {}),
    "ppo": ("ppo", lambda a: {"lambda_": a.ppo_lambda}),
    "ppo_risk_folded": ("ppo_risk_folded", lambda a: {"lambda_": a.ppo_lambda}),
    "ppo_lagrangian": (
        "ppo_lagrangian",
        lambda a: {"lambda_": a.ppo_lambda, "cost_limit": a.cost_limit, "lagrangian_lr": a.lagrangian_lr},
    ),
    "aaac_fixed_lambda": ("aaac", lambda a: {"fixed_lambda": a.fixed_lambda}),
    "aaac_one_critic": ("aaac", lambda a: {"use_risk_critic": False}),
    "aaac_no_kl": ("aaac", lambda a: {"use_beta_kl": False}),
}


SETTINGS: dict[str, dict[str, Any]] = {
    "scratch": {},
    "imitation": {
        "init_demos": 25,
        "action_mode": "structured",
        "lr": 3e-4,
        "epochs": 1,
        "entropy": 0.003,
        "eval_at_start": True,
        "set": ["stages.il.epochs=24", "stages.il.lr=0.002"],
        "aaac_set": ["algo.training.beta_0=1.0", "algo.training.critic_warmup_updates=2"],
    },
}
"""``--setting`` -> the flag defaults of that setting (``imitation``: the pipeline's RL after imitation, as in
``configs/quickstart.yaml``; the results note's ``--init-demos 25`` runs)."""


def settings_for(arm: str, seed: int, a: argparse.Namespace) -> Any:
    from agentic_ray.settings import ExperimentSettings

    algo, training_of = ARMS[arm]

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
    raw: dict[str, Any] = {
        "seed": seed,
        "ray": {"num_env_runners": 0, "num_envs_per_env_runner": a.num_envs},
        "env": {
            **env_fields(a),
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
            "training": training_of(a),
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


def env_fields(a: argparse.Namespace) -> dict[str, Any]:
    """The env settings every arm shares (action mode, rewards, risk mode)."""
    return {
        "domain": a.domain,
        "action_mode": a.action_mode,
        "rewards": rewards_of(a),
        "risk_mode": a.risk_mode,
    }


def eval_env_config(a: argparse.Namespace) -> Any:
    from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
    from agentic_ray.envs.faults import FaultScheduleConfig

    share = a.eval_fault_share
    faults = FaultScheduleConfig(enabled=share > 0, start_share=share, end_share=share)
    return AgentTaskEnvConfig(**env_fields(a), faults=faults)


def tasks_per_family(tasks: int, a: argparse.Namespace) -> int:
    """``--tasks`` spread evenly over the domain's task families."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig

    families = len(AgentTaskEnvConfig(**env_fields(a)).family_list())
    if tasks % families or tasks <= 0:
        raise SystemExit(
            f"--tasks/--curve-tasks ({tasks}) must be a positive multiple of {families} (families)."
        )
    return tasks // families


def run_one(arm: str, seed: int, a: argparse.Namespace) -> dict[str, Any]:
    """Train one (arm, seed) to the env-step budget in a private Ray; returns :func:`train_arm`'s result."""
    import ray

    tmp = tempfile.mkdtemp(prefix="agray_bench_", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, configure_logging=False, log_to_driver=False)
    try:
        return train_arm(arm, seed, a)
    finally:
        ray.shutdown()


def imitate(algo: Any, s: Any, demos: int) -> dict[str, Any]:
    """Behaviour cloning of ``demos`` scripted-expert demonstrations into the algorithm's module, as the pipeline's
    imitation stage does (``stages.il`` settings: wrong-sample share, epochs, lr; ``--set`` changes them).

    The demonstrations depend on the seed only, so every arm at a seed imitates the same ones. With
    ``--eval-at-start`` the runs record where each arm started: at seeds 0-4, AAAC's and PPO's imitation policies
    had the same ``start_completion`` (``benchmarks/results/aaac_vs_ppo.md``).
    """
    from agentic_ray.algorithms.build import current_module
    from agentic_ray.stages.demos import collect_demos
    from agentic_ray.stages.imitation import imitate_stage
    from agentic_ray.stages.pipeline import sync_env_runners

    il = s.stages.il
    t0 = time.perf_counter()
    rows = collect_demos(
        s.env, demos, il.wrong_sample_share, seed=s.seed, caller_errors=il.caller_error_kinds
    )
    stats = imitate_stage(current_module(algo), rows, il, s.seed)
    sync_env_runners(algo)
    return {
        "il_demos": demos,
        "il_nll": round(stats["nll"][-1], 4),
        "il_s": round(time.perf_counter() - t0, 1),
    }


def train_arm(arm: str, seed: int, a: argparse.Namespace) -> dict[str, Any]:
    """Train one (arm, seed) to the env-step budget on the running Ray; returns its curve, final metrics and costs.

    The curve holds ``(env steps, completion, high-risk share)`` of each evaluation; with ``--eval-at-start`` the
    untrained module is evaluated first on the final ``--tasks`` (``start_completion``, ``start_high_risk_share``),
    so a run says how far it moved on the same validation tasks.
    """
    import numpy as np
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, LEARNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    from agentic_ray.algorithms.build import build_algo_config, current_module
    from agentic_ray.eval.evaluator import ModulePolicy, evaluate_policy
    from agentic_ray.rollout.episode_callbacks import set_training_progress

    torch.set_num_threads(a.threads)
    torch.manual_seed(seed)
    np.random.seed(seed)
    s = settings_for(arm, seed, a)
    ecfg = eval_env_config(a)
    algo = build_algo_config(s).build_algo()

    def evaluate(tasks: int, sampled: bool = a.eval_sampled) -> Any:
        policy = ModulePolicy(current_module(algo), deterministic=not sampled)
        return evaluate_policy(policy, ecfg, tasks_per_family(tasks, a))

    def evaluate_risk(tasks: int) -> Any:
        """Sampled actions from a fixed torch seed, so every arm draws from the same random numbers."""
        torch.manual_seed(SAMPLING_SEED + seed)
        return evaluate(tasks, sampled=True)

    curve: list[tuple[int, float, float]] = []
    steps, it, train_s = 0, 0, 0.0
    steps_to_target = None
    start: dict[str, Any] = {}
    try:
        if a.init_demos:
            start |= imitate(algo, s, a.init_demos)
        if a.eval_at_start:
            m0 = evaluate(a.tasks).metrics
            start |= {
                "start_completion": m0.completion,
                "start_first_pass_completion": m0.first_pass_completion,
                "start_high_risk_share": m0.high_risk_share,
            }
            if not a.eval_sampled:
                start["start_high_risk_share_sampled"] = evaluate_risk(a.tasks).metrics.high_risk_share
        while steps < a.env_steps:
            set_training_progress(algo, min(1.0, steps / a.env_steps))
            t0 = time.perf_counter()
            res = algo.train()
            train_s += time.perf_counter() - t0
            steps = int(res[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])
            it += 1
            if it % a.eval_every == 0 and steps < a.env_steps:
                cm = evaluate(a.curve_tasks).metrics
                curve.append((steps, cm.completion, cm.high_risk_share))
                if steps_to_target is None and cm.completion >= a.target:
                    steps_to_target = steps
        final = evaluate(a.tasks)
        m = final.metrics
        curve.append((steps, m.completion, m.high_risk_share))
        if steps_to_target is None and m.completion >= a.target:
            steps_to_target = steps
        risk = final if a.eval_sampled else evaluate_risk(a.tasks)
        learner = res.get(LEARNER_RESULTS, {}).get(DEFAULT_MODULE_ID, {})
    finally:
        algo.stop()
    return {
        "algo": arm,
        "seed": seed,
        **start,
        "completion": m.completion,
        "first_pass_completion": m.first_pass_completion,
        "first_pass_completion_sampled": risk.metrics.first_pass_completion,
        "tasks": m.completion_n,
        "spt": m.spt,
        "high_risk_share": risk.metrics.high_risk_share,
        "high_risk_share_greedy": None if a.eval_sampled else m.high_risk_share,
        "completion_sampled": risk.metrics.completion,
        "consequences_per_episode": consequences_per_episode(risk.records),
        # the learner's last update: AAAC's β and how the risk stream reached the policy (None for PPO arms)
        "learner_final": {k: _round(_float(learner.get(k))) for k in learner_keys()},
        "tcsr": m.tcsr,
        "tcsr_policy": m.tcsr_policy,
        "dvr": m.dvr,
        "steps_to_target": steps_to_target,
        "env_steps": steps,
        "iterations": it,
        "env_steps_per_s": steps / train_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "curve": curve,
    }


SAMPLING_SEED = 10_000  # + the run's seed: torch seed of the final sampled evaluation


def learner_keys() -> tuple[str, ...]:
    """Learner metrics kept from the last update: AAAC's β, entropy and risk diagnostics, and PPO-Lagrangian's
    multiplier with the episode cost its dual ascent compares to ``--cost-limit`` (None where an arm does not log
    a key). Imported here, like every ``agentic_ray`` import of this script, so ``--help`` stays fast."""
    from agentic_ray import keys

    return (
        keys.AAAC_BETA,
        keys.AAAC_ENTROPY,
        keys.AAAC_RISK_ROW_SHARE,
        keys.AAAC_ADV_RISK_ON_RISK_ROWS,
        keys.AAAC_ADV_ON_RISK_ROWS,
        keys.AAAC_VF_LOSS_RISK_ON_RISK_ROWS,
        keys.AAAC_ADV_REWARD_STD,
        keys.AAAC_ADV_RISK_STD,
        keys.PPO_LAG_MULTIPLIER,
        keys.PPO_LAG_EPISODE_COST,
    )


def _float(v: Any) -> float | None:
    """A logged metric as a float (None if absent)."""
    if v is None:
        return None
    v = float(v.peek() if hasattr(v, "peek") else v)
    return None if math.isnan(v) else v


def consequences_per_episode(records: list[Any]) -> float:
    """Delayed consequences (complaints, chargebacks) per validation episode: what the risk stream prices."""
    return sum(len(r.consequences) for r in records) / max(1, len(records))


def baseline(a: argparse.Namespace) -> dict[str, Any]:
    from agentic_ray.eval.evaluator import ExpertPolicy, RandomPolicy, evaluate_policy

    ecfg = eval_env_config(a)
    out = {}
    for name, pol in (("random", RandomPolicy(0)), ("expert", ExpertPolicy())):
        res = evaluate_policy(pol, ecfg, tasks_per_family(a.tasks, a))
        m = res.metrics
        out[name] = {
            "completion": m.completion,
            "spt": m.spt,
            "high_risk_share": m.high_risk_share,
            "consequences_per_episode": consequences_per_episode(res.records),
        }
    return out


PPO_LAG_MULTIPLIER = "lagrange_multiplier"  # = agentic_ray.keys.PPO_LAG_MULTIPLIER (checked in main)


def _round(v: float | None, k: int = 4) -> float | None:
    return None if v is None else round(v, k)


def summarize(arm: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One arm's JSON line: means over seeds with 95% bootstrap intervals over seeds (None at one seed)."""
    from agentic_ray.eval.bootstrap import bootstrap_mean_ci

    def mean(k: str) -> float | None:
        vals = [r[k] for r in runs if r.get(k) is not None]
        return round(statistics.fmean(vals), 4) if vals else None

    def ci(k: str) -> list[float] | None:
        interval = bootstrap_mean_ci([r[k] for r in runs])
        return None if interval is None else [round(x, 4) for x in interval]

    stt = [r["steps_to_target"] for r in runs]
    multipliers = [(r.get("learner_final") or {}).get(PPO_LAG_MULTIPLIER) for r in runs]
    return {
        "algo": arm,
        "completion": mean("completion"),
        "completion_ci": ci("completion"),
        "first_pass_completion": mean("first_pass_completion"),
        "first_pass_ci": ci("first_pass_completion"),
        "first_pass_completion_sampled": mean("first_pass_completion_sampled"),
        "high_risk_share": mean("high_risk_share"),
        "high_risk_ci": ci("high_risk_share"),
        "consequences_per_episode": mean("consequences_per_episode"),
        "consequences_ci": ci("consequences_per_episode"),
        "high_risk_share_greedy": mean("high_risk_share_greedy"),
        "completion_sampled": mean("completion_sampled"),
        # from imitation (--init-demos) or with --eval-at-start: where the runs started, on the same tasks
        **(
            {"start_completion": mean("start_completion")}
            if any("start_completion" in r for r in runs)
            else {}
        ),
        # mean over seeds that reached the target; null when any seed never did (per_seed has each)
        "steps_to_target": None if any(x is None for x in stt) else round(statistics.fmean(stt)),
        "env_steps_per_s": round(statistics.fmean(r["env_steps_per_s"] for r in runs), 1),
        "seeds": [r["seed"] for r in runs],
        "tasks": runs[0]["tasks"],
        "env_steps": round(statistics.fmean(r["env_steps"] for r in runs)),
        "spt": mean("spt"),
        "tcsr_policy": mean("tcsr_policy"),
        # PPO-Lagrangian: where its learned multiplier ended, and the step it learned it with
        **(
            {
                "lagrange_multiplier": _round(statistics.fmean(multipliers)),
                "lagrange_multiplier_per_seed": multipliers,
            }
            if all(x is not None for x in multipliers)
            else {}
        ),
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
        "per_seed": [
            {
                k: r.get(k)
                for k in (
                    "seed",
                    "start_completion",
                    "start_first_pass_completion",
                    "start_high_risk_share",
                    "completion",
                    "first_pass_completion",
                    "first_pass_completion_sampled",
                    "spt",
                    "high_risk_share",
                    "high_risk_share_greedy",
                    "consequences_per_episode",
                    "steps_to_target",
                    "env_steps",
                    "curve",
                    "learner_final",
                )
            }
            for r in runs
        ],
    }


def fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "not reached"
    return f"{100 * v:.1f}%" if pct else (f"{v:,.0f}" if isinstance(v, int) or v >= 100 else f"{v:.2f}")


def fmt_ci(v: list[float] | None) -> str:
    return "" if v is None else f" [{100 * v[0]:.1f}, {100 * v[1]:.1f}]"


def table(rows: dict[str, dict[str, Any]], base: dict[str, Any], a: argparse.Namespace) -> str:
    lines = [
        f"# AAAC vs PPO baselines and AAAC ablations on the {a.domain} env ({a.setting})",
        "",
        f"Command: `python benchmarks/aaac_vs_ppo.py {' '.join(sys.argv[1:])}`",
        "",
        f"Env: action_mode={a.action_mode}, risk_mode={a.risk_mode}, faults "
        f"{a.fault_start:.0%}→{a.fault_end:.0%} of training episodes (validation: {a.eval_fault_share:.0%}); "
        f"encoder={a.encoder}, hidden={a.hidden}; batch {a.batch}, minibatch {a.minibatch}, epochs {a.epochs}, "
        f"lr {a.lr}, entropy {a.entropy}; budget {a.env_steps} env steps; seeds {a.seeds}; final validation "
        f"{a.tasks} tasks ({'sampled' if a.eval_sampled else 'greedy'} completion; high-risk share and "
        f"consequences with sampled actions), curve {a.curve_tasks} tasks. Intervals: 95% bootstrap over seeds.",
        "",
        "| arm | completion [95% CI] | first-pass completion [95% CI] | high-risk share [95% CI] | "
        f"consequences / episode | steps to {a.target:.0%} | SPT (successes) | env steps/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, r in rows.items():
        lines.append(
            f"| {arm} | {fmt(r['completion'], True)}{fmt_ci(r['completion_ci'])} | "
            f"{fmt(r['first_pass_completion'], True)}{fmt_ci(r['first_pass_ci'])} | "
            f"{fmt(r['high_risk_share'], True)}{fmt_ci(r['high_risk_ci'])} | "
            f"{r['consequences_per_episode']:.3f} | {fmt(r['steps_to_target'])} | "
            f"{fmt(r['spt'])} | {r['env_steps_per_s']:.1f} |"
        )
    lines += [
        "",
        f"Baselines on the same validation tasks: random masked policy {fmt(base['random']['completion'], True)} "
        f"completion, scripted expert {fmt(base['expert']['completion'], True)} (SPT {fmt(base['expert']['spt'])}).",
        "",
        "Per seed:",
        "",
    ]
    for arm, r in rows.items():
        for x in r["per_seed"]:
            lines.append(
                f"- {arm} seed {x['seed']}: completion {fmt(x['completion'], True)}, high-risk "
                f"{fmt(x['high_risk_share'], True)}, steps to target {fmt(x['steps_to_target'])}, "
                f"curve {[(st, round(c, 3), round(h, 3)) for st, c, h in x['curve']]}"
            )
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--setting",
        choices=list(SETTINGS),
        default="scratch",
        help="The defaults of one of the two compared settings (explicit flags still win; see SETTINGS).",
    )
    p.add_argument(
        "--domain", default="ecommerce", help="Registered domain every arm trains and is evaluated on."
    )
    p.add_argument("--env-steps", type=int, default=20000, help="Env-step budget per run.")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    p.add_argument("--eval-every", type=int, default=4, help="Evaluate every k training iterations.")
    p.add_argument("--target", type=float, default=0.2, help="Validation completion for steps_to_target.")
    p.add_argument(
        "--tasks", type=int, default=200, help="Final validation tasks (a multiple of the family count)."
    )
    p.add_argument("--curve-tasks", type=int, default=40, help="Validation tasks of each curve evaluation.")
    p.add_argument(
        "--eval-at-start",
        action="store_true",
        help="Also evaluate the untrained module on the --tasks (start_completion, start_high_risk_share).",
    )
    p.add_argument(
        "--init-demos",
        type=int,
        default=0,
        help="Start every arm from imitation of this many scripted-expert demonstrations (the same ones at a seed; "
        "stages.il settings) instead of from scratch; 0: from scratch.",
    )
    p.add_argument(
        "--eval-sampled",
        action="store_true",
        help="Evaluations sample actions from the policy (seeded by the run's seed) instead of greedy ones.",
    )
    p.add_argument("--action-mode", choices=["prototype", "structured"], default="prototype")
    p.add_argument(
        "--risk-mode",
        choices=["soft", "hard"],
        default="soft",
        help="Env risk_mode: soft (shortcuts allowed, delayed consequences; the comparison) or hard (masks).",
    )
    p.add_argument(
        "--ppo-lambda", type=float, default=0.95, help="GAE λ of the PPO arms (RLlib's default: 1.0)."
    )
    p.add_argument(
        "--fixed-lambda", type=float, default=0.95, help="λ of aaac_fixed_lambda (= the PPO arms')."
    )
    p.add_argument("--cost-limit", type=float, default=0.1, help="ppo_lagrangian: cost budget per episode.")
    p.add_argument(
        "--lagrangian-lr",
        type=float,
        default=0.05,
        help="ppo_lagrangian: the multiplier's step, λ ← max(0, λ + step·(episode cost − --cost-limit)) per "
        "update; its line prints the final multiplier (raise the step until the budget binds).",
    )
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
    p.add_argument(
        "--jobs", type=int, default=1, help="Runs at a time (one per free core; 1 on a shared machine)."
    )
    p.add_argument(
        "--out",
        default=None,
        help="Markdown table of a full run (default: benchmarks/results/aaac_vs_ppo_table[-variant].md).",
    )
    p.add_argument(
        "--runs",
        default=None,
        help="JSON-lines file of finished (arm, seed) runs: each new run is appended, runs already there with the "
        "same settings are reused, so a full 7 arms x 5 seeds comparison can be run in short pieces.",
    )
    p.add_argument(
        "--reuse-stale",
        action="store_true",
        help="Reuse runs of --runs made under other resolved settings (counted in stale_runs) instead of rerunning.",
    )
    p.add_argument("--worker", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    first, _ = p.parse_known_args(argv)
    p.set_defaults(**SETTINGS[first.setting])
    return p.parse_args(argv)


# Flags that choose which runs to do or where output goes, not how a run trains or is evaluated.
_SELECTION = {"seeds", "arms", "jobs", "out", "runs", "worker", "reuse_stale", "setting"}


# Flags added after runs were recorded: left out of the key at their default, so those runs keep matching.
_ADDED_LATER: dict[str, Any] = {"init_demos": 0, "domain": "ecommerce"}


def variant(a: argparse.Namespace) -> str | None:
    """The record's variant: the setting unless ``scratch``, then the domain unless ``ecommerce`` (None: neither)."""
    parts = [x for x, default in ((a.setting, "scratch"), (a.domain, "ecommerce")) if x != default]
    return "-".join(parts) or None


ARM_FLAGS: dict[str, set[str]] = {
    "ppo_lambda": {"ppo", "ppo_risk_folded", "ppo_lagrangian"},
    "cost_limit": {"ppo_lagrangian"},
    "lagrangian_lr": {"ppo_lagrangian"},
    "fixed_lambda": {"aaac_fixed_lambda"},
    "aaac_set": {arm for arm, (algo, _) in ARMS.items() if algo == "aaac"},
}
"""Flags that shape only some arms' runs: in another arm's key they read as their setting's default, so rerunning
one arm with another value (e.g. PPO-Lagrangian's ``--lagrangian-lr``) keeps every other arm's runs."""


def settings_key(a: argparse.Namespace, arm: str | None = None) -> str:
    """Every flag that shapes a run, as a string: runs are reused from ``--runs`` only when it matches. With
    ``arm``, the flags of :data:`ARM_FLAGS` that do not shape that arm read as their setting's default."""
    if arm is not None:
        defaults = vars(parse(["--setting", a.setting]))
        a = argparse.Namespace(
            **{k: (defaults[k] if arm not in ARM_FLAGS.get(k, {arm}) else v) for k, v in vars(a).items()}
        )
    return json.dumps(
        {
            k: v
            for k, v in sorted(vars(a).items())
            if k not in _SELECTION and not (k in _ADDED_LATER and v == _ADDED_LATER[k])
        },
        sort_keys=True,
    )


def resolved_fingerprint(arm: str, a: argparse.Namespace) -> str:
    """Short hash of the arm's fully resolved settings (every default filled in, seed left out).

    The settings key holds the benchmark's flags only, so a change of a default in the code (e.g. the fix prior
    that every arm's module got with the reflect merge) does not change it. Each new run records this hash;
    :func:`stale_runs` counts the reused runs whose hash differs or was not recorded.
    """
    return settings_fingerprint(settings_for(arm, 0, a))


def stale_runs(runs: list[dict[str, Any]], fingerprint: str) -> int:
    """Runs made with other resolved settings than ``fingerprint``, or before the hash was recorded."""
    return sum(r.get("resolved") != fingerprint for r in runs)


def main() -> None:
    from worker_runs import append_run, load_runs, report, run_worker  # benchmarks/ is the script's directory

    a = parse()
    if a.worker:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        r = run_one(a.worker[0], int(a.worker[1]), a)
        report(r)
        return
    for x in (a.tasks, a.curve_tasks):
        tasks_per_family(x, a)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in a.arms}
    passthrough = [x for x in sys.argv[1:]]
    from agentic_ray import keys

    assert keys.PPO_LAG_MULTIPLIER == PPO_LAG_MULTIPLIER
    keys = {arm: settings_key(a, arm) for arm in a.arms}
    fingerprints = {arm: resolved_fingerprint(arm, a) for arm in a.arms}
    done = {
        k: r
        for k, r in load_runs(a.runs, keys).items()
        if a.reuse_stale or r.get("resolved") == fingerprints.get(k[0])
    }

    def run(job: tuple[int, str]) -> dict[str, Any]:
        seed, arm = job
        if (arm, seed) in done:
            return done[(arm, seed)]
        t0 = time.time()
        r = run_worker(__file__, [*passthrough, "--worker", arm, str(seed)], f"{arm} seed {seed}")
        r["resolved"] = fingerprints[arm]
        append_run(a.runs, r, keys[arm])
        print(
            f"# {arm} seed {seed}: completion {r['completion']:.3f} in {time.time() - t0:.0f}s "
            f"({r['env_steps_per_s']:.1f} steps/s) curve {r['curve']}",
            file=sys.stderr,
            flush=True,
        )
        return r

    # Jobs in (seed, arm) order, so with --jobs > 1 the arms of one seed run at the same time and see the same
    # machine load (env_steps_per_s stays comparable).
    jobs = [(seed, arm) for seed in a.seeds for arm in a.arms]
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for (_, arm), r in zip(jobs, pool.map(run, jobs), strict=True):
            runs[arm].append(r)
    rows = {k: summarize(k, v) for k, v in runs.items()}
    for k, v in runs.items():
        rows[k]["oracle"] = settings_for(k, 0, a).model.uses_oracle
        rows[k]["setting"] = a.setting
        rows[k]["domain"] = a.domain
        if k == "ppo_lagrangian":
            rows[k]["lagrangian_lr"] = a.lagrangian_lr
        rows[k]["stale_runs"] = n = stale_runs(v, fingerprints[k])
        if n:
            print(
                f"# {k}: {n} of {len(v)} reused runs were made with other resolved settings than the current "
                "code's (or before the benchmark recorded them)",
                file=sys.stderr,
            )
    var = variant(a)
    publish(
        "aaac_vs_ppo",
        [{x: y for x, y in rows[k].items() if x != "per_seed"} for k in a.arms],
        variant=var,
    )
    if set(ARMS) <= set(rows):  # the table holds the full comparison only
        out = Path(a.out or ROOT / f"benchmarks/results/aaac_vs_ppo_table{'-' + var if var else ''}.md")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table(rows, baseline(a), a))
        print(f"# table written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
