"""Three-stage training, imitation → RL → reflection, as one resumable pipeline with gates and checkpoints.

Run directory layout (``<storage_path>/<name>-<timestamp>/``, see :mod:`agentic_ray.stages.run_storage`)::

    settings.json          the validated settings of the run
    state.json             pipeline progress: completed stages, current stage and iteration, gates, auto-pause
    metrics.jsonl          one line per evaluation (stage, iteration, env steps, the five metrics, causes, error
                           codes injected vs policy, learner stats, reward layers, reward-pool health), and gate rows
    traces.jsonl           step-by-step traces of evaluated episodes (``agentic-ray trace``, the dashboard)
    expert.json            the scripted expert's metrics on the same validation tasks (evaluated once per run)
    checkpoints/<stage>/   RLlib checkpoint at the end of each stage (servable: .../rl_module/default_policy)
    checkpoints/latest/    rolling checkpoint inside a stage, for --resume after a crash
    diagnosis.json         written when auto-pause or a gate stops the run
    report.html            the dashboard's plots in one offline file, rewritten at every evaluation
    wandb/                 offline wandb run (unless wandb.mode is online or disabled)

Gates (seed 000): after IL, validation TCSR ≥ ``il.gate_tcsr``, else IL repeats with more demonstrations up to
``il.max_repeats`` times and the run goes on with a recorded failed gate; after RL, the DVR of non-empty plans
(``dvr_progress``: valid plans that satisfied a goal ÷ episodes; plain DVR counts an empty plan as valid, so a
policy that does nothing scores 1.0) ≥ ``rl.gate_dvr``, else the run stops with a diagnosis (the planning reward
needs revisiting, not more training).

No stage ships a worse policy (``stages.keep_better``, issue 26): after each stage its final validation completion
is compared, task by task, with the evaluation of the policy the stage received (the baseline: the last kept
stage's). When it is worse beyond the noise (:mod:`agentic_ray.stages.stage_guard`: exact one-sided McNemar test
at ``stages.regression_alpha``), the stage's policy is saved as ``checkpoints/<stage>_rejected``, the baseline's
checkpoint is restored and goes forward as ``checkpoints/<stage>``, the gate ``<stage>_completion`` records the
test, and the run ends with status ``regressed`` (exit 5) once its stages are done. The first stage has no
baseline (nothing was evaluated before it) and is kept. With ``stages.guard_tasks_per_family`` set, the test is paired
over a greedy evaluation of that many tasks per family at each stage's end (logged as ``guard_completion``), not the
stage's last evaluation: a few evaluation tasks cannot see a drop (configs/inspection.yaml's 10 did not see its
reflection stage take completion from 0.79 to 0.61 on 100).
"""

from __future__ import annotations

import json
import logging
import numbers
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED,
)

from agentic_ray import keys
from agentic_ray.algorithms.build import build_algo_config, current_module
from agentic_ray.eval.evaluator import (
    EvalResult,
    ExpertPolicy,
    ModulePolicy,
    cu_env_config,
    evaluate_policy,
    validation_env_config,
    validation_tasks,
)
from agentic_ray.eval.metrics import AutoPause, diagnosis_report
from agentic_ray.eval.policy_loading import verify_checkpoint
from agentic_ray.eval.report import EXPERT_FILE, write_report
from agentic_ray.eval.traces import append_traces, trace_reward_layers
from agentic_ray.progress import RunProgress, as_progress
from agentic_ray.rollout.iteration_seeding import iteration_seed, reseed_iteration
from agentic_ray.rollout.reward_pool_wiring import RewardPoolAlgorithmMixin
from agentic_ray.settings import ExperimentSettings
from agentic_ray.stages.run_storage import RunStorage, new_run_location

logger = logging.getLogger(__name__)
STAGES = ("il", "rl", "reflection")
STATE_FILE = "state.json"
METRICS_FILE = "metrics.jsonl"


@dataclass
class PipelineState:
    """What ``--resume`` needs: where the run is, what was decided, and the latest checkpoint."""

    completed: list[str] = field(default_factory=list)
    stage: str | None = None
    iteration: int = 0  # iterations done in the current stage
    env_steps: int = 0
    checkpoint: str | None = None
    gates: dict[str, Any] = field(default_factory=dict)
    auto_pause: dict[str, Any] = field(default_factory=dict)
    status: str = "running"  # running | finished | paused | gate_failed | regressed
    il_demos: int = 0
    baseline: dict[str, Any] = field(default_factory=dict)
    """The kept policy the next stage is judged against: ``stage``, ``checkpoint``, ``completed`` (``[family,
    task seed, completed]`` of its last validation) and ``row`` (that evaluation's metrics row)."""
    regressions: list[str] = field(default_factory=list)
    """Stages whose policy was rejected as worse (their baseline's checkpoint went forward)."""

    def save(self, run_dir: Path) -> None:
        tmp = run_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=2))
        os.replace(tmp, run_dir / STATE_FILE)

    @classmethod
    def load(cls, run_dir: Path) -> PipelineState:
        return cls(**json.loads((run_dir / STATE_FILE).read_text()))


def finished_run(run_dir: Path, stages: list[str]) -> dict[str, Any] | None:
    """``run_pipeline``'s result for a run whose every stage in ``stages`` has finished (status ``finished`` or
    ``regressed``), read from its files; None when there is something to resume.

    ``agentic-ray train --resume`` on such a run answers from this and starts nothing: resuming it used to start
    Ray, build the algorithm, its EnvRunners and the reward actors, skip every stage and stop them again (the
    README's resume command took 24 s in CI, 2026-12-04). The final metrics are the kept policy's, as the run
    reported them: the baseline's row (a rejected stage's policy did not go forward), else the last evaluation."""
    from agentic_ray.eval.report import read_metrics

    state = PipelineState.load(run_dir)
    if state.status not in ("finished", "regressed") or any(s not in state.completed for s in stages):
        return None
    final = state.baseline.get("row")
    if final is None:
        evals = [r for r in read_metrics(run_dir / METRICS_FILE) if "tcsr" in r]
        final = evals[-1] if evals else {}
    return {"status": state.status, "final": final, "gates": state.gates}


class StopPipeline(Exception):
    """A gate or auto-pause ends the run; the state says which."""


def sync_env_runners(algo: Any) -> None:
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group, inference_only=True)


class Pipeline:
    """Runs the stages in ``settings.stages.run`` order; every step is recorded so a killed run can resume."""

    def __init__(
        self,
        settings: ExperimentSettings,
        run_dir: Path,
        state: PipelineState | None = None,
        progress: RunProgress | Callable[[str], None] = print,
        on_evaluation: Callable[[dict[str, Any], EvalResult], None] | None = None,
        storage: RunStorage | None = None,
    ) -> None:
        """``on_evaluation(row, result)`` runs after every evaluation is logged (a Tune trial reports it)."""
        self.s = settings
        self.storage = storage or RunStorage(run_dir)
        self.run_dir = self.storage.local_dir
        self.state = state or PipelineState()
        self.progress = as_progress(progress)
        self.say = self.progress.say
        self.algo: Any = None
        self.auto_pause = AutoPause(settings.eval.auto_pause_patience)
        if self.state.auto_pause:
            self.auto_pause.set_state(self.state.auto_pause)
        self.eval_env = validation_env_config(settings.env, settings.eval.fault_share)
        self.trace_layers = trace_reward_layers(settings.rewards, settings.env.domain)
        self.cu_env = cu_env_config(self.eval_env, settings.eval.cu_caller_error_share)
        self.wandb: Any = None
        self.on_evaluation = on_evaluation
        self.last: dict[str, Any] = {}
        self.last_eval: EvalResult | None = None
        self.demos: list[Any] | None = None  # imitation's demonstrations (the RL stage's decaying BC term)

    # ------------------------------------------------------------------ plumbing
    def _build(self) -> None:
        self.algo = build_algo_config(self.s).build_algo()
        if self.state.checkpoint:
            self.say(f"resuming from {self.state.checkpoint}")
            self.algo.restore_from_path(self.state.checkpoint)
        # The policy sees the predicted root cause of the last failure from imitation on, so that stage 3 does
        # not switch on an input it was never trained with (measured: completion 0.55 -> 0.25 when it did).
        set_reflection_input(self.algo, True)

    def _checkpoint(self, name: str) -> str:
        """Save ``checkpoints/<name>``. The rolling ``latest`` checkpoint after each iteration does not wait for the
        reward pool's pending episodes (see ``RewardPoolAlgorithmMixin.save_to_path``); every other one settles them
        first."""
        path = (self.run_dir / "checkpoints" / name).resolve()
        if name == "latest" and isinstance(self.algo, RewardPoolAlgorithmMixin):
            self.algo.save_to_path(str(path), settle=False)
        else:
            self.algo.save_to_path(str(path))
        self.state.checkpoint = str(path)
        self.state.auto_pause = self.auto_pause.get_state()
        self.state.save(self.run_dir)
        self.storage.push()
        return str(path)

    def _log(self, row: dict[str, Any]) -> None:
        with (self.run_dir / METRICS_FILE).open("a") as f:
            f.write(json.dumps(row, default=float) + "\n")
        if self.wandb is not None:
            self.wandb.log({k: v for k, v in row.items() if isinstance(v, int | float) and v is not None})

    def evaluate(self, stage: str, iteration: int, extra: dict[str, Any] | None = None) -> EvalResult:
        ev = self.s.eval
        module = current_module(self.algo)
        policy = ModulePolicy(
            module, deterministic=True, debug=ev.traces_per_eval > 0 or ev.failed_traces_per_eval > 0
        )
        cu_ablation = ev.cu_ablation and stage == "reflection"
        episodes = len(validation_tasks(self.eval_env, ev.tasks_per_family)) * (2 if cu_ablation else 1)
        with self.progress.task(f"{stage} evaluation", episodes, "episodes") as bar:
            res = evaluate_policy(
                policy,
                self.eval_env,
                ev.tasks_per_family,
                cu_ablation=cu_ablation,
                cu_env=self.cu_env,
                cu_min_pairs=ev.cu_min_pairs,
                max_traces=ev.traces_per_eval,
                max_failed_traces=ev.failed_traces_per_eval,
                trace_meta={"stage": stage, "iteration": iteration, "env_steps": self.state.env_steps},
                reward_layers=self.trace_layers,
                on_episode=bar.advance,
            )
        append_traces(self.run_dir, res.traces)
        m = res.metrics.to_dict()
        updates = next(
            iter(self.algo.learner_group.foreach_learner(lambda lr: getattr(lr, "num_updates", None)))
        )
        row = {
            "stage": stage,
            "iteration": iteration,
            "learner_updates": updates.get(),
            "env_steps": self.state.env_steps,
            "time": time.time(),
            **m,
            "root_causes": res.attribution["root_causes"],
            "root_causes_injected": res.attribution["root_causes_injected"],
            "errors": res.attribution["errors"],
            **{k: v for k, v in res.correction.items() if k not in m},
            **(extra or {}),
        }
        self._log(row)
        self.last, self.last_eval = row, res
        write_report(self.run_dir, {"status": self.state.status, "gates": self.state.gates})
        cu = "n/a" if m["cu"] is None else f"{m['cu']:+.2f} over {m['cu_n']} pairs"
        spt = "n/a" if m["spt"] is None else f"{m['spt']:.2f}"
        self.say(
            f"[{stage} {iteration:>3}] tcsr {m['tcsr']:.3f} (policy {m['tcsr_policy']:.3f})  dvr {m['dvr']:.3f}  "
            f"completion {m['completion']:.3f} of {m['completion_n']}  spt {spt}  high-risk "
            f"{m['high_risk_share']:.3f}  cu {cu}"
        )
        if self.on_evaluation is not None:
            self.on_evaluation(row, res)
        return res

    # ------------------------------------------------------------------ stages
    def run_il(self) -> None:
        from agentic_ray.stages.demos import collect_demos
        from agentic_ray.stages.imitation import imitate_stage

        il = self.s.stages.il
        n = self.state.il_demos or il.demos
        for attempt in range(il.max_repeats + 1):
            t0 = time.time()
            with self.progress.task("il demonstrations", n, "demos") as bar:
                demos = collect_demos(
                    self.s.env,
                    n,
                    il.wrong_sample_share,
                    seed=self.s.seed + attempt,
                    on_demo=bar.advance,
                    caller_errors=il.caller_error_kinds,
                )
                self.demos = demos
            if demos.n_dropped:
                self.say(
                    f"[il] dropped {demos.n_dropped} demonstrations holding an action the masks forbid: "
                    + "; ".join(f"{n} x {why}" for why, n in demos.dropped.most_common())
                )
            module = current_module(self.algo)
            with self.progress.task("il imitation", il.epochs, "epochs") as bar:
                stats = imitate_stage(
                    module, demos, il, self.s.seed, on_epoch=lambda nll: bar.advance(nll=nll)
                )
            sync_env_runners(self.algo)
            self.say(
                f"[il] {n} demonstrations ({stats['samples']} imitated steps), NLL "
                f"{stats['nll'][0]:.3f} → {stats['nll'][-1]:.3f} in {time.time() - t0:.0f}s"
            )
            res = self.evaluate(
                "il",
                attempt,
                {
                    "bc_nll": stats["nll"][-1],
                    "bc_nll_epochs": stats["nll"],
                    "demos": n,
                    "demos_dropped": dict(demos.dropped),
                },
            )
            passed = res.metrics.tcsr >= il.gate_tcsr
            self.state.gates[f"il_tcsr_attempt{attempt}"] = {
                "value": res.metrics.tcsr,
                "threshold": il.gate_tcsr,
                "passed": passed,
                "demos": n,
            }
            self.state.il_demos = n
            self._log(
                {
                    "stage": "il",
                    "iteration": attempt,
                    "gates": {"il_tcsr": self.state.gates[f"il_tcsr_attempt{attempt}"]},
                }
            )
            if passed:
                return
            if attempt < il.max_repeats:
                n = int(n * il.demo_growth)
                self.say(
                    f"[il] gate failed: TCSR {res.metrics.tcsr:.3f} < {il.gate_tcsr}; repeating with {n} demos"
                )
        self.say(
            f"[il] gate still failed after {il.max_repeats} repeats; continuing to RL with the gate recorded"
        )

    def _train_iterations(
        self,
        stage: str,
        iterations: int,
        on_iter: Callable[[int, float], None],
        after_iter: Callable[[int], None] | None = None,
    ) -> None:
        start = self.state.iteration if self.state.stage == stage else 0
        self.state.stage = stage
        with self.progress.task(f"{stage} iterations", iterations, "iterations", done=start) as bar:
            for it in range(start, iterations):
                on_iter(it, (it + 1) / max(1, iterations))
                if self.s.ray.reseed_each_iteration:
                    reseed_iteration(self.algo, iteration_seed(self.s.seed, stage, it))
                res = self.algo.train()
                if after_iter is not None:
                    after_iter(it)
                er = res.get(ENV_RUNNER_RESULTS, {})
                self.state.env_steps = int(er.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0) or self.state.env_steps)
                self.state.iteration = it + 1
                learner = _learner_stats(res)
                bar.advance(
                    env_steps=self.state.env_steps,
                    train_return=er.get("episode_return_mean"),
                    policy_loss=learner.get(keys.AAAC_POLICY_LOSS),
                )
                if (it + 1) % self.s.eval.every == 0 or it + 1 == iterations:
                    ev = self.evaluate(
                        stage,
                        it + 1,
                        {
                            "train_return": er.get("episode_return_mean"),
                            "reward_layers": _reward_layers(res),
                            "reward_layers_norm": _reward_layers(res, keys.METRIC_REWARD_LAYER_NORM_PREFIX),
                            "reward_pool": _reward_pool_health(res),
                            "learner": learner,
                        },
                    )
                    if self.auto_pause.update(ev.metrics.dvr):
                        self._stop(
                            "paused",
                            ev,
                            "latest",
                            f"[{stage}] auto-pause: DVR declined {self.auto_pause.patience} evaluations in a row",
                        )
                self._checkpoint("latest")

    def _stop(self, status: str, ev: EvalResult, checkpoint: str, message: str, **extra: Any) -> None:
        """End the run with a diagnosis report (top causes, example traces) and a checkpoint to resume from."""
        diag = {**diagnosis_report(ev.records, self.auto_pause.history), **extra}
        (self.run_dir / "diagnosis.json").write_text(json.dumps(diag, indent=2, default=str))
        self.state.status = status
        self._checkpoint(checkpoint)
        self.say(f"{message}; diagnosis in {self.run_dir / 'diagnosis.json'}")
        raise StopPipeline(status)

    def run_rl(self) -> None:
        from agentic_ray.rollout.episode_callbacks import set_training_progress

        rl = self.s.stages.rl
        # The reflection head keeps learning while the encoder moves, or its predictions (a policy input) drift.
        _set_learner_attr(self.algo, "reflection_coeff", self.s.stages.il.reflection_coeff)
        # Seed 000: RL trains on layers L1-L4 with L5 (long-term value) off; stage 3 ramps it in.
        _set_l5_weight(self.algo, 0.0)

        if self.state.iteration == 0 and getattr(self.algo.config, "anchor_kl_coeff", 0.0) > 0:
            # The imitation policy becomes π_ref of AAAC's anchor KL (part of the learner state from here on,
            # so a run resumed mid-stage keeps it).
            self.algo.learner_group.foreach_learner(lambda learner: learner.set_reference_policy())

        def on_iter(it: int, p: float) -> None:
            if rl.curriculum:
                set_training_progress(self.algo, p)

        self._train_iterations("rl", rl.iterations, on_iter, self._bc_step if rl.bc_lr > 0 else None)
        if (
            self.last_eval is None
        ):  # resumed after the stage's last iteration: judge the gate on a fresh evaluation
            self.evaluate("rl", rl.iterations, {"gate_check_after_resume": True})
        dvr = self.last.get("dvr_progress", 0.0)  # plain DVR is 1.0 for a policy that does nothing
        passed = dvr >= rl.gate_dvr
        self.state.gates["rl_dvr"] = {"value": dvr, "threshold": rl.gate_dvr, "passed": passed}
        self._log(
            {"stage": "rl", "iteration": rl.iterations, "gates": {"rl_dvr": self.state.gates["rl_dvr"]}}
        )
        if not passed and self.last_eval is not None:
            self._stop(
                "gate_failed",
                self.last_eval,
                "rl",
                f"[rl] gate failed: DVR of non-empty plans {dvr:.3f} < {rl.gate_dvr}. Stopping: revisit the planning reward "
                "before training on",
                gate=self.state.gates["rl_dvr"],
            )

    def _imitation_demos(self) -> list[Any]:
        """Imitation's demonstrations; a run resumed past imitation collects the same ones again (seeded)."""
        from agentic_ray.stages.demos import collect_demos

        if self.demos is None:
            il = self.s.stages.il
            self.demos = collect_demos(
                self.s.env,
                self.state.il_demos or il.demos,
                il.wrong_sample_share,
                self.s.seed,
                caller_errors=il.caller_error_kinds,
            )
        return self.demos

    def _bc_step(self, it: int) -> None:
        """DAPG-style decaying BC term (``stages.rl.bc_lr``): a few BC minibatches on the demonstrations at
        ``bc_lr · bc_decay**it`` after RL iteration ``it``, then the new weights go to the EnvRunners. Alternated
        with the RL update rather than summed into the learner's loss, so any algorithm gets it unchanged."""
        from agentic_ray.stages.imitation import behaviour_cloning

        rl, il = self.s.stages.rl, self.s.stages.il
        behaviour_cloning(
            current_module(self.algo),
            self._imitation_demos(),
            reflection_coeff=il.reflection_coeff,
            reflection_dropout=il.reflection_dropout,
            correction_weight=il.correction_weight,
            epochs=1,
            minibatch_size=il.minibatch_size,
            lr=rl.bc_lr * rl.bc_decay**it,
            seed=self.s.seed + it,
            max_minibatches=rl.bc_minibatches,
        )
        sync_env_runners(self.algo)

    def _correction_imitation(self) -> None:
        """The reflection stage's imitation of corrected failures (:func:`~agentic_ray.stages.imitation.
        imitate_corrections`); a stage resumed past its first iteration does not repeat it."""
        from agentic_ray.stages.imitation import imitate_corrections

        rf = self.s.stages.reflection
        t0 = time.time()
        demos = self._imitation_demos()
        with (
            self.progress.task("reflection corrections", rf.correction_demos, "demos") as demo_bar,
            self.progress.task("reflection imitation", rf.correction_epochs, "epochs") as bar,
        ):
            stats = imitate_corrections(
                current_module(self.algo),
                self.s,
                demos,
                on_demo=demo_bar.advance,
                on_epoch=lambda nll: bar.advance(nll=nll),
            )
        sync_env_runners(self.algo)
        kinds = stats["correction_kinds"]
        self._log({"stage": "reflection", "iteration": 0, "correction_demos": kinds, "bc_nll": stats["nll"]})
        self.say(
            f"[reflection] imitated {rf.correction_demos} corrected failures {kinds} with {len(demos)} "
            f"demonstrations, NLL {stats['nll'][0]:.3f} → {stats['nll'][-1]:.3f} in {time.time() - t0:.0f}s"
        )

    def _seed_stored_fixes(self) -> None:
        """The error -> fix pairs that ``agentic-ray refine`` stored (``stages.reflection.fix_memory``), written
        into the policy's fix prior (:func:`~agentic_ray.refine.fix_memory.seed_fix_prior`)."""
        rel = self.s.stages.reflection.fix_memory
        path = None if rel is None else self.run_dir / rel  # an absolute `rel` replaces run_dir
        if path is None or not path.is_dir():
            return
        from agentic_ray.refine.fix_memory import seed_from_store

        read, n = seed_from_store(current_module(self.algo), path)
        sync_env_runners(self.algo)
        self._log({"stage": "reflection", "iteration": 0, "stored_fixes": read, "fixes_seeded": n})
        self.say(f"[reflection] {read} stored error -> fix pairs read from {path}; {n} seeded the fix prior")

    def run_reflection(self) -> None:
        from agentic_ray.rollout.episode_callbacks import set_caller_error_share, set_training_progress

        rf = self.s.stages.reflection
        _set_learner_attr(self.algo, "reflection_coeff", rf.reflection_coeff)
        set_reflection_input(self.algo, True)
        # Labelled failures for the root-cause head: the imitated policy rarely fails on its own.
        set_caller_error_share(self.algo, rf.caller_error_share)
        if self.state.iteration == 0:
            self._seed_stored_fixes()
        if rf.correction_demos and self.state.iteration == 0:
            self._correction_imitation()

        def on_iter(it: int, p: float) -> None:
            set_training_progress(self.algo, 1.0)
            w = rf.l5_weight_start + (rf.l5_weight_end - rf.l5_weight_start) * p
            _set_l5_weight(self.algo, w)

        self._train_iterations("reflection", rf.iterations, on_iter)

    # ------------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        import torch

        torch.set_num_threads(self.s.ray.torch_threads)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        where = f"{self.storage}" + (f" (working copy {self.run_dir})" if self.storage.remote else "")
        self.say(f"run directory: {where}")
        (self.run_dir / "settings.json").write_text(self.s.model_dump_json(indent=2))
        self._init_wandb()
        self._expert_baseline()
        self._build()
        runners = {"il": self.run_il, "rl": self.run_rl, "reflection": self.run_reflection}
        try:
            for stage in self.s.stages.run:
                if stage in self.state.completed:
                    continue
                self.say(f"=== stage {stage} ===")
                if self.state.stage != stage:
                    self.state.stage, self.state.iteration = stage, 0
                runners[stage]()
                self._keep_better(stage)
                self.state.completed.append(stage)
                self.state.stage, self.state.iteration = None, 0
                self._checkpoint(stage)
            self.state.status = "regressed" if self.state.regressions else "finished"
            self.state.save(self.run_dir)
        except StopPipeline:
            pass
        finally:
            write_report(self.run_dir, {"status": self.state.status, "gates": self.state.gates})
            if self.wandb is not None:
                self.wandb.finish()
            if self.algo is not None:
                self.algo.stop()
            self.storage.push()
        return {
            "run_dir": str(self.storage),
            "status": self.state.status,
            "final": self.last,
            "gates": self.state.gates,
        }

    def _keep_better(self, stage: str) -> None:
        """No stage ships a worse policy (see the module docstring): compare the stage's last validation with its
        baseline's; restore the baseline's checkpoint when the stage is worse beyond the noise, else make the
        stage the next baseline. Its checkpoint (``checkpoints/<stage>``) is saved by the caller right after."""
        from agentic_ray.stages.stage_guard import compare_completion

        if not self.s.stages.keep_better:
            return
        if self.last_eval is None:  # resumed after the stage's last evaluation: judge a fresh one
            self.evaluate(stage, self.state.iteration, {"keep_better_check_after_resume": True})
        assert self.last_eval is not None
        now = self._guard_completion(stage)
        base = self.state.baseline
        if base:
            cmp = compare_completion(
                {(f, int(t)): bool(c) for f, t, c in base["completed"]}, now, self.s.stages.regression_alpha
            )
            name = f"{stage}_completion"
            gate = {
                "value": cmp.after,
                "threshold": cmp.before,
                "passed": not cmp.worse,
                "baseline": base["stage"],
                **cmp.to_dict(),
            }
            self.state.gates[name] = gate
            self._log({"stage": stage, "iteration": self.state.iteration, "gates": {name: gate}})
            if cmp.worse:
                self._checkpoint(f"{stage}_rejected")
                # The baseline's weights only: counters (env steps, iterations) and the learner's own state go on.
                module = "learner_group/learner/rl_module"
                self.algo.restore_from_path(Path(base["checkpoint"]) / module, component=module)
                sync_env_runners(self.algo)
                self.state.regressions.append(stage)
                self.last = dict(base["row"])
                self.say(
                    f"[{stage}] rejected: validation completion {cmp.after:.3f} < {cmp.before:.3f} of the "
                    f"{base['stage']} policy ({cmp.only_before} tasks lost, {cmp.only_after} gained of {cmp.n}, "
                    f"one-sided exact p = {cmp.p_value:.4f} < {cmp.alpha}); the {base['stage']} checkpoint goes "
                    f"forward (this stage's policy is in checkpoints/{stage}_rejected)"
                )
                return
        self.state.baseline = {
            "stage": stage,
            "checkpoint": str((self.run_dir / "checkpoints" / stage).resolve()),
            "completed": [[f, t, c] for (f, t), c in sorted(now.items())],
            "row": {k: v for k, v in self.last.items() if k != "time"},
        }

    def _guard_completion(self, stage: str) -> dict[tuple[str, int], bool]:
        """Completion per validation task of the stage's policy, for :meth:`_keep_better`: the stage's last
        evaluation's, or with ``stages.guard_tasks_per_family`` set (and other than ``eval.tasks_per_family``) a
        greedy evaluation on that many tasks per family, logged as ``guard_completion`` over ``guard_tasks``."""
        from agentic_ray.stages.stage_guard import completion_by_task

        n = self.s.stages.guard_tasks_per_family
        assert self.last_eval is not None
        if n is None or n == self.s.eval.tasks_per_family:
            return completion_by_task(self.last_eval.records)
        policy = ModulePolicy(current_module(self.algo), deterministic=True)
        episodes = len(validation_tasks(self.eval_env, n))
        with self.progress.task(f"{stage} guard evaluation", episodes, "episodes") as bar:
            res = evaluate_policy(policy, self.eval_env, n, on_episode=bar.advance)
        now = completion_by_task(res.records)
        row = {"guard_completion": res.metrics.completion, "guard_tasks": len(now)}
        self._log({"stage": stage, "iteration": self.state.iteration, **row})
        return now

    def _expert_baseline(self) -> None:
        """The scripted expert on the run's validation tasks, once per run (``expert.json``): the level the
        dashboard and the report draw next to the policy's metrics."""
        path = self.run_dir / EXPERT_FILE
        if path.exists():
            return
        ev = self.s.eval
        with self.progress.task(
            "expert baseline", len(validation_tasks(self.eval_env, ev.tasks_per_family))
        ) as bar:
            res = evaluate_policy(ExpertPolicy(), self.eval_env, ev.tasks_per_family, on_episode=bar.advance)
        path.write_text(
            json.dumps({"metrics": res.metrics.to_dict(), "attribution": res.attribution}, indent=2)
        )

    def _init_wandb(self) -> None:
        if self.s.wandb.mode == "disabled":
            return
        try:
            import wandb

            os.environ.setdefault("WANDB_MODE", self.s.wandb.mode)
            self.wandb = wandb.init(
                project=self.s.wandb.project,
                dir=str(self.run_dir),
                mode=self.s.wandb.mode,
                name=self.run_dir.name,
                config=json.loads(self.s.model_dump_json()),
                resume="allow",
                id=self.run_dir.name.replace("/", "-"),
                # The run's own output says where the run lives; wandb's banner and history summary would
                # interleave with the progress bars, and its stdout capture is not needed.
                settings=wandb.Settings(silent=True, console="off"),
            )
        except Exception as e:  # logging must not kill training
            logger.warning("wandb disabled: %s", e)
            self.wandb = None


LEARNER_STATS = (
    keys.AAAC_POLICY_LOSS,
    keys.AAAC_VF_LOSS_REWARD,
    keys.AAAC_VF_LOSS_RISK,
    keys.AAAC_BETA,
    keys.AAAC_KL,
    keys.AAAC_ANCHOR_KL,
    keys.AAAC_ENTROPY,
    keys.AAAC_LAMBDA_MEAN,
    keys.AAAC_REFLECTION_LOSS,
    keys.AAAC_REFLECTION_ACCURACY,
    *(keys.GATE_PREFIX + k for k in keys.MODALITY_KINDS),  # the multimodal encoder's gates (issue 30)
)


def _learner_stats(res: dict[str, Any]) -> dict[str, float]:
    """The learner's statistics of one training iteration, none when the iteration made no learner update.

    With asynchronous rewards an iteration whose episodes all wait for their scores makes no update
    (``AAAC.training_step`` returns early); the first iteration of a stage after the previous stage's settling
    checkpoint (which trained on everything the EnvRunners held) is one. RLlib still reports every learner key
    it has seen, each reduced over an empty window to NaN, so the steps the iteration trained decide.
    """
    m = res.get(LEARNER_RESULTS, {}).get(DEFAULT_MODULE_ID, {})
    trained = m.get(NUM_MODULE_STEPS_TRAINED)
    if not (isinstance(trained, numbers.Real) and float(trained) > 0):  # NaN (RLlib: no update) is not > 0
        return {}
    return {k: float(m[k]) for k in LEARNER_STATS if isinstance(m.get(k), int | float)}


def _reward_layers(res: dict[str, Any], prefix: str = keys.METRIC_REWARD_LAYER_PREFIX) -> dict[str, float]:
    er = res.get(ENV_RUNNER_RESULTS, {})
    return {
        k[len(prefix) :]: float(v)
        for k, v in er.items()
        if k.startswith(prefix) and isinstance(v, int | float)
    }


REWARD_POOL_HEALTH = {
    "pending": keys.METRIC_REWARD_PENDING,
    "staleness": keys.METRIC_REWARD_STALENESS,
    "staleness_max": keys.METRIC_REWARD_STALENESS_MAX,
    "duplicates": keys.METRIC_REWARD_DUPLICATES,
    "cancelled": keys.METRIC_REWARD_CANCELLED,
    "missing": keys.METRIC_REWARD_MISSING,
    "dropped": keys.METRIC_REWARD_DROPPED,
    "held": keys.METRIC_REWARD_HELD,
    "settled": keys.METRIC_REWARD_SETTLED,
    "wait_s": keys.METRIC_REWARD_WAIT_S,
}
"""Row field → EnvRunner metric of the reward pool's health (empty without a reward pool)."""


def _reward_pool_health(res: dict[str, Any]) -> dict[str, float]:
    er = res.get(ENV_RUNNER_RESULTS, {})
    # The counters come back as numpy integers, which are not ``int``: accept any real number.
    return {
        name: float(er[k]) for name, k in REWARD_POOL_HEALTH.items() if isinstance(er.get(k), numbers.Real)
    }


def _set_learner_attr(algo: Any, name: str, value: Any) -> None:
    algo.learner_group.foreach_learner(lambda learner: setattr(learner, name, value))


def set_reflection_input(algo: Any, enabled: bool) -> None:
    """Turn the policy's reflection input on (stage 3) or off, on the learner's and every EnvRunner's module."""

    def _learner(learner: Any) -> None:
        m = learner.module[DEFAULT_MODULE_ID]
        if hasattr(m, "reflection_enabled"):
            m.reflection_enabled = enabled

    def _runner(er: Any) -> None:
        m = getattr(er, "module", None)
        if m is not None and hasattr(m, "reflection_enabled"):
            m.reflection_enabled = enabled

    algo.learner_group.foreach_learner(_learner)
    algo.env_runner_group.foreach_env_runner(_runner, local_env_runner=True)


def _set_l5_weight(algo: Any, weight: float) -> None:
    """Ramp the long-term-value layer's weight on every EnvRunner (no-op without a reward pool)."""

    def _set(er: Any) -> None:
        fn = getattr(er, "set_layer_weight", None)
        if fn is not None:
            fn("long_term_value", weight)

    algo.env_runner_group.foreach_env_runner(_set, local_env_runner=True)


def new_run_dir(settings: ExperimentSettings) -> str:
    """A new run location under the settings' storage path (see :mod:`agentic_ray.stages.run_storage`)."""
    return new_run_location(settings.storage_path, settings.name)


def run_pipeline(
    settings: ExperimentSettings,
    run_dir: str | Path | None = None,
    resume: str | Path | None = None,
    progress: RunProgress | Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run (or resume) the three-stage pipeline; returns the run dir, status, final metrics and gates.

    ``run_dir`` and ``resume`` are paths or URIs; a URI run is pulled into a local working copy first.
    ``progress`` receives stage messages and the progress bars (:func:`agentic_ray.progress.make_progress`); a
    plain ``say(message)`` callable gets the bars as plain lines.
    """
    if resume is not None:
        storage = RunStorage(resume)
        if not storage.pull():
            raise FileNotFoundError(f"no run at {storage}")
        state = PipelineState.load(storage.local_dir)
        if state.checkpoint:  # a damaged checkpoint is a CheckpointError naming the file, before Ray builds
            verify_checkpoint(state.checkpoint)
        state.status = "running"
        return Pipeline(settings, storage.local_dir, state, progress, storage=storage).run()
    storage = RunStorage(run_dir or new_run_dir(settings))
    return Pipeline(settings, storage.local_dir, None, progress, storage=storage).run()
