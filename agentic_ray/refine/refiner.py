"""``refine``: from what the Serve app stored back to a training dataset (and, past the trigger, an update).

:func:`refine` reads the episodes users gave feedback on (:mod:`~agentic_ray.refine.served_episodes`),
re-scores them with the run's reward layers (:mod:`~agentic_ray.refine.rescoring`), attributes each failure to a
root cause with evaluation's rules (:mod:`~agentic_ray.refine.attribution`), and builds the incremental dataset
(:mod:`~agentic_ray.refine.incremental_dataset`). Everything it writes lives in ``RUN_DIR/refine/``:

    consumed.json      window ids and feedback ids already used (a second run never uses them again)
    ledger.sqlite      the reward ledger of the re-scoring
    report-<n>.json    one report per run

The feedback it read is marked consumed in the Serve store, so the app's retention may delete it from then on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.eval.evaluator import validation_env_config
from agentic_ray.parser.goal_parser import torch_threads
from agentic_ray.refine.attribution import attribute, dominant_cause
from agentic_ray.refine.incremental_dataset import WindowSample, build_dataset
from agentic_ray.refine.incremental_update import run_update
from agentic_ray.refine.preference import feedback_pairs
from agentic_ray.refine.refine_config import RefineConfig
from agentic_ray.refine.rescoring import EpisodeRescorer, pool_config_for
from agentic_ray.refine.served_episodes import read_served_episodes, store_path
from agentic_ray.serving.decision_store import mark_feedback_consumed
from agentic_ray.settings import ExperimentSettings

__all__ = ["RefineReport", "refine", "run_settings", "served_env"]

REFINE_DIR = "refine"
CONSUMED_FILE = "consumed.json"


@dataclass
class RefineReport:
    """What one ``refine`` run read, found and did (``to_dict`` is its report file)."""

    episodes: int = 0
    feedback: int = 0
    rescored: dict[str, float] = field(default_factory=dict)
    attribution: dict[str, Any] = field(default_factory=dict)
    dominant_cause: str | None = None
    dataset: dict[str, Any] = field(default_factory=dict)
    update: dict[str, Any] | None = None
    fix_pairs: int = 0
    preference_pairs: int = 0
    preference_model: str | None = None
    samples: list[WindowSample] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "feedback": self.feedback,
            "rescored": self.rescored,
            "attribution": self.attribution,
            "dominant_cause": self.dominant_cause,
            "dataset": self.dataset,
            "update": self.update,
            "fix_pairs": self.fix_pairs,
            "preference_pairs": self.preference_pairs,
            "preference_model": self.preference_model,
        }


def run_settings(run_dir: str | Path) -> ExperimentSettings:
    """The validated settings of a run directory (its ``settings.json``)."""
    p = Path(run_dir) / "settings.json"
    if not p.is_file():
        raise FileNotFoundError(f"no settings.json in {run_dir}: not a run directory")
    return ExperimentSettings.model_validate(json.loads(p.read_text()))


def served_env(settings: ExperimentSettings, cfg: RefineConfig) -> AgentTaskEnvConfig:
    """The env config the Serve app runs sessions on for this run (its validation env, the app's fault share)."""
    return validation_env_config(settings.env, cfg.fault_share)


def load_consumed(run_dir: Path) -> dict[str, list[Any]]:
    p = run_dir / REFINE_DIR / CONSUMED_FILE
    return json.loads(p.read_text()) if p.is_file() else {"windows": [], "feedback": []}


def save_consumed(run_dir: Path, consumed: dict[str, list[Any]]) -> None:
    p = run_dir / REFINE_DIR / CONSUMED_FILE
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(consumed, indent=1))
    tmp.replace(p)


def refine(
    serve_data: str | Path,
    run_dir: str | Path,
    cfg: RefineConfig | None = None,
    *,
    judge_url: str | None = None,
    train: bool = True,
) -> RefineReport:
    """One pass of the loop (see the module docstring).

    Args:
        serve_data: the Serve app's store file, or its data directory.
        run_dir: the run whose policy is served (its settings, checkpoints; the refiner's files go under it).
        cfg: the refiner's settings.
        judge_url: the judge service for the judge layer (None: the in-process rubric).
        train: run the trigger (incremental update) when a cause dominates.

    Returns:
        The report (also written to ``RUN_DIR/refine/report-<n>.json``).
    """
    cfg = cfg or RefineConfig()
    run = Path(run_dir)
    (run / REFINE_DIR).mkdir(parents=True, exist_ok=True)
    settings = run_settings(run)
    env_cfg = served_env(settings, cfg)
    consumed = load_consumed(run)
    episodes = read_served_episodes(serve_data, env_cfg)
    used_fb = set(consumed["feedback"])
    episodes = [ep for ep in episodes if not set(ep.feedback_ids) <= used_fb]
    report = RefineReport(episodes=len(episodes), feedback=sum(len(ep.feedback) for ep in episodes))
    pool = pool_config_for(cfg.rewards or settings.rewards, env_cfg.domain, judge_url)
    rescorer = EpisodeRescorer(pool, run / REFINE_DIR / "ledger.sqlite", judge_url)
    env = AgentTaskEnv(env_cfg)
    try:
        with torch_threads(cfg.torch_threads):
            records = {ep.session_id: ep.record for ep in episodes if ep.record is not None}
            report.attribution = attribute(records)
            pairs = feedback_pairs(episodes)
            report.preference_pairs = len(pairs)
            if cfg.preference_model is not None and len(pairs) >= cfg.preference_min_pairs:
                report.preference_model = _write_preference_model(run / cfg.preference_model, pairs)
            report.dominant_cause = dominant_cause(report.attribution["cause_shares"], cfg.trigger_share)
            samples, stats = build_dataset(episodes, env, rescorer, cfg, consumed["windows"])
            report.rescored = _values(rescorer, episodes)
            report.samples = samples
            report.dataset = stats.to_dict()
            if cfg.fix_memory is not None:
                report.fix_pairs = _write_fixes(run / cfg.fix_memory, samples)
            if train and report.dominant_cause is not None:
                report.update = run_update(run, settings, samples, report.dominant_cause, cfg, episodes)
    finally:
        env.close()
        rescorer.close()
    fb_ids = sorted({i for ep in episodes for i in ep.feedback_ids})
    consumed["windows"] = sorted(
        set(consumed["windows"]) | {s.window_id for s in samples} | _seen(episodes, cfg)
    )
    consumed["feedback"] = sorted(used_fb | set(fb_ids))
    save_consumed(run, consumed)
    mark_feedback_consumed(store_path(serve_data), fb_ids)
    n = len(list((run / REFINE_DIR).glob("report-*.json")))
    (run / REFINE_DIR / f"report-{n}.json").write_text(json.dumps(report.to_dict(), indent=1, default=str))
    return report


def _write_preference_model(path: Path, pairs: list[Any]) -> str:
    """Refit L5's model on the feedback ``pairs`` (:func:`~agentic_ray.refine.preference.preference_model`) and
    write it to ``path``; returns the path."""
    from agentic_ray.refine.preference import preference_model

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(preference_model(pairs), indent=1) + "\n")
    return str(path)


def _write_fixes(path: Path, samples: list[WindowSample]) -> int:
    """Write the error -> fix pairs of ``samples`` into the memory store at ``path``; returns how many."""
    from agentic_ray.memory.memory_config import MemoryConfig
    from agentic_ray.memory.memory_store import MemoryStore
    from agentic_ray.refine.fix_memory import write_fixes

    store = MemoryStore(MemoryConfig(path=str(path)))
    try:
        return write_fixes(store, samples)
    finally:
        store.close()


def _values(rescorer: EpisodeRescorer, episodes: list[Any]) -> dict[str, float]:
    """The sealed reward sums of the served episodes, from the ledger the re-scoring wrote."""
    ids = [ep.session_id for ep in episodes]
    if not ids:
        return {}
    q = ",".join("?" * len(ids))
    rows = rescorer.ledger.query(
        f"SELECT episode_id, reward_sum + risk_sum FROM episodes WHERE episode_id IN ({q})", tuple(ids)
    )
    return {str(k): float(v) for k, v in rows if v is not None}


def _seen(episodes: list[Any], cfg: RefineConfig) -> set[str]:
    """Every window id of the episodes read (kept or dropped: a dropped window is used up too)."""
    from agentic_ray.refine.incremental_dataset import window_starts

    return {
        f"{ep.session_id}:{s}"
        for ep in episodes
        if ep.record is not None
        for s in window_starts(ep.record.num_steps, cfg.window, cfg.stride)
    }
