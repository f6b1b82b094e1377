"""Chaos on the training plane, bounded (a few minutes on 2 CPUs): prints one JSON line.

Scenarios (each stops by itself; see ``tests/helpers/chaos_scenarios.py``, ``resume_scenario.py`` and
``two_node_cluster.py``, which the chaos tests share):

1. reward actors (judge, model scorer, ledger) killed in turn while PPO trains;
2. an EnvRunner SIGKILLed mid-iteration (RLlib restarts it); ``env_runner_recovery_s`` is the time from the kill
   to the first trained episode that the restarted runner sampled;
3. a run that stopped at a failed RL gate (a scripted validation DVR of 0.5 under ``gate_dvr`` 0.9), resumed: it
   must stop at the gate again (``gate_resume_ok``);
4. ``agentic-ray train`` SIGKILLed mid-stage and resumed with ``--resume``, against the same run never interrupted
   (``resume_ok``: finished, metric series continuous, learner update count, ledger and normalisers equal, and the
   restart diff of trained (episode, reward) pairs empty);
5. two ``ray start`` nodes (1 CPU each) against this process's one-node Ray with 2 CPUs (``two_node_speedup``:
   env steps/s of 2 EnvRunners spread over the two nodes, before the kill, over those of 2 EnvRunners on one node;
   both share the same 2 physical cores, so no speedup is possible here), then the worker node SIGKILLed mid-run
   (``node_loss_ok``: EnvRunners and reward actors were on both nodes, training went on on the head and the audit
   is clean).

``rewards_lost``, ``rewards_double_counted``, ``value_mismatches``, ``rewards_imputed`` and ``episodes_dropped``
(by reason) add up the ledger audits of scenarios 1, 2, 4 and 5 (``imputed_by_scenario`` splits the imputed ones). ``tcsr_30pct_faults`` is the TCSR of scenario 4's final policy on
the validation tasks with 30% of episodes under injected tool faults, beside the same policy with none (TCSR counts
calls the policy controls: failures the injected fault caused are excluded, see ``StepRecord.injected``).

    python benchmarks/chaos.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("WANDB_MODE", "offline")


def gate_resume(work: Path) -> dict[str, Any]:
    """Stop at a failed RL gate, resume, and see whether it stops there again.

    The failure is forced: the validation DVR is scripted to 0.5 (as in ``tests/integration/test_pipeline.py``),
    because on this env the business masks keep every plan's order valid (DVR 1.0 even for an untrained policy).
    """
    from agentic_ray.settings import load_settings
    from agentic_ray.stages import pipeline as pipeline_mod
    from agentic_ray.stages.pipeline import PipelineState, run_pipeline
    from tests.helpers.resume_scenario import TINY

    real = pipeline_mod.evaluate_policy

    def dvr_half(*a: Any, **kw: Any) -> Any:
        res = real(*a, **kw)
        res.metrics.dvr = 0.5
        return res

    run = work / "gate"
    sets = {
        "wandb": {"mode": "disabled"},
        "stages": {"run": ["rl", "reflection"], "rl": {"iterations": 1, "gate_dvr": 0.9}},
        "eval": {"cu_ablation": False},
    }
    pipeline_mod.evaluate_policy = dvr_half
    try:
        first = run_pipeline(load_settings(TINY, sets), run_dir=run, progress=lambda _m: None)
        again = run_pipeline(load_settings(TINY, sets), resume=run, progress=lambda _m: None)
    finally:
        pipeline_mod.evaluate_policy = real
    state = PipelineState.load(run)
    ok = (
        first["status"] == again["status"] == state.status == "gate_failed"
        and "rl" not in state.completed
        and not (run / "checkpoints" / "reflection").exists()
    )
    return {"gate_resume_ok": ok}


def tcsr_under_faults(run: Path) -> dict[str, float]:
    """TCSR of a run's final policy on its validation tasks with 30% and with 0% of episodes faulty."""
    from agentic_ray.eval.evaluator import ModulePolicy, evaluate_policy, validation_env_config
    from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint
    from agentic_ray.settings import ExperimentSettings

    s = ExperimentSettings.model_validate_json((run / "settings.json").read_text())
    module = load_policy_module(pick_checkpoint(run))
    out = {}
    for name, share in (("faults_30pct", 0.3), ("no_faults", 0.0)):
        res = evaluate_policy(ModulePolicy(module), validation_env_config(s.env, share), 2, cu_ablation=False)
        out[name] = round(res.metrics.tcsr, 4)
    return out


def main() -> None:
    import ray

    from tests.helpers.chaos_scenarios import (
        kill_env_runner_while_training,
        kill_reward_actors_while_training,
    )
    from tests.helpers.resume_scenario import sigkill_and_resume
    from tests.helpers.two_node_cluster import run_two_node_driver, throughput
    from tests.helpers.two_node_training import train_and_measure

    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="agray_chaos_", dir="/tmp"))
    audits: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    line: dict[str, Any] = {}
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="agray_chaos_ray_", dir="/tmp"),
        configure_logging=False,
        log_to_driver=False,
    )
    try:
        t = time.perf_counter()
        r1 = kill_reward_actors_while_training(min_iterations=4, duration_s=15.0)
        audits["reward_actor_kills"] = r1.audit.to_dict()
        line["reward_actor_kills"] = len(r1.events)
        seconds["reward_actor_kills"] = time.perf_counter() - t

        t = time.perf_counter()
        r2 = kill_env_runner_while_training()
        audits["env_runner_kill"] = r2.audit.to_dict()
        rec = r2.extra["recovery_s"]
        line["env_runner_recovery_s"] = None if rec is None else round(rec, 1)
        seconds["env_runner_kill"] = time.perf_counter() - t

        t = time.perf_counter()
        line.update(gate_resume(work))
        seconds["gate_resume"] = time.perf_counter() - t

        t = time.perf_counter()
        r4 = sigkill_and_resume(work / "resume")
        audits["sigkill_resume"] = r4.audit.to_dict()
        line["resume_ok"] = r4.ok
        line["restart_diff"] = r4.diff.named()[:5] or "equal"
        line["tcsr_30pct_faults"] = tcsr_under_faults(work / "resume" / "ref")
        seconds["sigkill_resume"] = time.perf_counter() - t

        t = time.perf_counter()
        one = train_and_measure(iterations=4)  # this process's Ray: one node, 2 CPUs
        seconds["one_node"] = time.perf_counter() - t
    finally:
        ray.shutdown()

    t = time.perf_counter()
    two = run_two_node_driver(head_cpus=1, worker_cpus=1, kill_worker=True, iterations=7, kill_after=3)
    seconds["two_node"] = time.perf_counter() - t
    if two.get("ok"):
        audits["node_loss"] = two["audit"]
        pre_kill = {"iterations": two["iterations"][:3]}
        line["steps_per_s_1_node"] = round(throughput(one), 1)
        line["steps_per_s_2_nodes"] = round(throughput(pre_kill), 1)
        line["two_node_speedup"] = round(throughput(pre_kill) / max(throughput(one), 1e-9), 3)
        line["node_loss_ok"] = bool(
            two["audit"]["ok"]
            and len(two["alive_nodes_at_end"]) == 1
            and len(set(two["placement"]["env_runners"])) == 2
            and len(set(two["placement"]["reward_actors"])) == 2
            and sum(x["env_steps"] for x in two["iterations"][4:]) > 0
        )
    else:
        line["node_loss_ok"] = False
        line["two_node_error"] = two.get("error", two.get("driver_log_tail", "")[-500:])

    dropped: Counter[str] = Counter()
    for a in audits.values():
        dropped.update(a["drop_reasons"])
    out = {
        "rewards_lost": sum(a["lost"] for a in audits.values()),
        "rewards_double_counted": sum(a["double_counted"] for a in audits.values()),
        "value_mismatches": sum(a["value_mismatches"] for a in audits.values()),
        "rewards_imputed": sum(a["imputed"] for a in audits.values()),
        "imputed_by_scenario": {k: a["imputed"] for k, a in audits.items()},
        "pending_unaccounted": sum(a["pending"] for a in audits.values()),
        "episodes_dropped": dict(dropped),
        **line,
        "audits_ok": {k: a["ok"] for k, a in audits.items()},
        "trained": {k: a["trained"] for k, a in audits.items()},
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    publish("chaos", [out])


if __name__ == "__main__":
    main()
