"""SIGKILL ``agentic-ray train`` mid-stage, resume it, and compare it with the same run never interrupted.

Shared by ``tests/integration/test_pipeline.py`` and ``benchmarks/chaos.py``. The killed and the resumed run are
CLI subprocesses with their own embedded Ray; the uninterrupted reference runs in the caller's process (it needs
a Ray cluster there).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentic_ray.eval.report import read_metrics
from agentic_ray.rewards.ledger_audit import (
    LedgerAudit,
    RestartDiff,
    audit_ledger,
    restart_diff,
    trained_pairs,
)
from agentic_ray.rewards.reward_actor_pool import LEDGER_FILE
from agentic_ray.rewards.reward_actors import NORMALIZER_KEY
from agentic_ray.rewards.reward_ledger import RewardLedger
from agentic_ray.rollout.reward_pool_wiring import REWARD_POOL_DIR
from agentic_ray.settings import load_settings
from agentic_ray.stages.pipeline import PipelineState, run_pipeline
from tests.integration.ray_head import kill_matching

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
# Rewards through the pool's ledger, scored synchronously (zero_latency), so that the resumed run can be compared
# with the uninterrupted one bit for bit.
RESUME_SETS = (
    "stages.rl.iterations=5",
    "stages.run=[il, rl]",
    "wandb.mode=disabled",
    "rewards={mode: zero_latency}",
    "eval.cu_ablation=false",
)


@dataclass
class ResumeResult:
    """What the killed, the resumed and the uninterrupted run left behind."""

    killed: PipelineState
    resumed: PipelineState
    resume_rc: int
    resume_output: str
    rl_rows_before: list[dict[str, Any]]
    rl_rows_after: list[dict[str, Any]]
    reference_rows: list[dict[str, Any]]
    trained_at_kill_missing_later: int
    audit: LedgerAudit
    diff: RestartDiff
    normalizers_equal: bool
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def metric_series_continues(self) -> bool:
        """The resumed run's first evaluation is the iteration after the last checkpoint, one learner update on."""
        if not self.rl_rows_after:
            return False
        last = [x for x in self.rl_rows_before if x["iteration"] == self.killed.iteration]
        return (
            self.rl_rows_after[0]["iteration"] == self.killed.iteration + 1
            and bool(last)
            and self.rl_rows_after[0]["learner_updates"]
            == max(last, key=lambda x: x["time"])["learner_updates"] + 1
        )

    @property
    def ok(self) -> bool:
        """Resumed to the end, metric series continuous, ledger intact and equal to the uninterrupted run's."""
        return (
            self.resume_rc == 0
            and self.resumed.status == "finished"
            and self.metric_series_continues
            and bool(self.reference_rows)
            and self.reference_rows[-1]["learner_updates"] == self.rl_rows_after[-1]["learner_updates"]
            and self.trained_at_kill_missing_later == 0
            and self.audit.ok
            and self.diff.equal
            and self.normalizers_equal
        )


def _rl_rows(run: Path) -> list[dict[str, Any]]:
    return [r for r in read_metrics(run / "metrics.jsonl") if r.get("stage") == "rl" and "tcsr" in r]


def _ledger(run: Path, checkpoint: str) -> RewardLedger:
    return RewardLedger(run / "checkpoints" / checkpoint / REWARD_POOL_DIR / LEDGER_FILE)


def sigkill_and_resume(
    work: Path, sets: tuple[str, ...] = RESUME_SETS, kill_at_iteration: int = 2, timeout_s: float = 900.0
) -> ResumeResult:
    """Train ``configs/tiny.yaml`` with ``sets``, SIGKILL it once the RL stage checkpointed ``kill_at_iteration``
    iterations, resume it with ``--resume``, then run the same settings uninterrupted and compare."""
    run, ref = work / "run", work / "ref"
    tmpdir = Path("/tmp") / f"agray_resume_{os.getpid()}"
    tmpdir.mkdir(exist_ok=True)
    env = {**os.environ, "AGENTIC_RAY_TMPDIR": str(tmpdir), "WANDB_MODE": "offline"}
    set_args = [x for kv in sets for x in ("--set", kv)]
    cmd = [
        sys.executable,
        "-m",
        "agentic_ray.cli",
        "train",
        "--config",
        str(TINY),
        "--run-dir",
        str(run),
        *set_args,
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = run / "state.json"
            if st.exists():
                state = json.loads(st.read_text())
                if state["stage"] == "rl" and state["iteration"] >= kill_at_iteration:
                    break
            if proc.poll() is not None:
                raise RuntimeError("training ended before it could be killed")
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        kill_matching(str(tmpdir))
    killed = PipelineState.load(run)
    before = _rl_rows(run)
    shutil.copy(run / "checkpoints" / "latest" / REWARD_POOL_DIR / LEDGER_FILE, work / "at_kill.sqlite")
    t1 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "agentic_ray.cli", "train", "--resume", str(run)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    kill_matching(str(tmpdir))
    t2 = time.perf_counter()
    overrides = {k: yaml.safe_load(v) for k, _, v in (x.partition("=") for x in sets)}
    run_pipeline(load_settings(TINY, overrides), run_dir=ref, progress=lambda _m: None)
    t3 = time.perf_counter()
    resumed_ledger, ref_ledger = _ledger(run, "rl"), _ledger(ref, "rl")
    at_kill = trained_pairs(RewardLedger(work / "at_kill.sqlite"))
    return ResumeResult(
        killed=killed,
        resumed=PipelineState.load(run),
        resume_rc=r.returncode,
        resume_output=r.stdout[-3000:] + r.stderr[-3000:],
        rl_rows_before=before,
        rl_rows_after=_rl_rows(run)[len(before) :],
        reference_rows=_rl_rows(ref),
        trained_at_kill_missing_later=sum((at_kill - trained_pairs(resumed_ledger)).values()) + (not at_kill),
        audit=audit_ledger(resumed_ledger),
        diff=restart_diff(ref_ledger, resumed_ledger),
        normalizers_equal=resumed_ledger.get_json(NORMALIZER_KEY) == ref_ledger.get_json(NORMALIZER_KEY),
        timings={"killed_s": t1 - t0, "resume_s": t2 - t1, "reference_s": t3 - t2},
    )
