"""The metrics a sweep may optimise: validation metrics only, each with its direction.

A sweep ranks trials on what the evaluator measures on the fixed validation tasks, never on the training
reward, so a reward-weight setting that games its own reward cannot win. The training return is still reported
(under ``train/``) for plots, but it is not in :data:`VALIDATION_METRICS` and the sweep settings reject it as an
objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentic_ray import keys
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.sweeps.pareto import Mode

#: Validation metric → whether a sweep maximises or minimises it.
VALIDATION_METRICS: dict[str, Mode] = {
    "completion": "max",
    "high_risk_share": "min",
    "tcsr": "max",
    "tcsr_policy": "max",
    "dvr": "max",
    "spt": "min",
    "spt_over_optimal": "min",
    "cu": "max",
    "consequence_rate": "min",
}


def tune_key(metric: str) -> str:
    """The key a validation metric has in Tune results (``completion`` → ``val/completion``)."""
    return keys.SWEEP_VALIDATION_PREFIX + metric


def policy_tcsr(records: Sequence[EpisodeRecord]) -> float:
    """TCSR over the calls the policy controls: successful ÷ calls, leaving out calls an injected fault failed.

    Injected outages fail the scripted expert too, so plain TCSR cannot tell two policies apart on them.
    """
    calls = [s.ok for e in records for s in e.steps if not s.injected]
    return sum(calls) / len(calls) if calls else 0.0


def consequence_rate(records: Sequence[EpisodeRecord]) -> float:
    """Delayed consequences (complaints, chargebacks) per validation episode.

    Only ``risk_mode: soft`` lets a high-risk shortcut run, and only a shortcut causes one (with the contract's
    ``consequence_probability``); it is what seed 002 counted as complaints. The env's reward never sees it.
    """
    return sum(len(e.consequences) for e in records) / len(records) if records else 0.0


def report_row(row: dict[str, Any], records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """What a trial reports to Tune for one evaluation row of the pipeline (``Pipeline.evaluate``).

    Every numeric validation metric goes under ``val/``, the training return under ``train/``, and the stage,
    its iteration and the env steps so far under their own names.
    """
    out: dict[str, Any] = {
        tune_key(m): float(row[m])
        for m in VALIDATION_METRICS
        if isinstance(row.get(m), int | float) and not isinstance(row.get(m), bool)
    }
    out[tune_key("tcsr_policy")] = policy_tcsr(records)
    out[tune_key("consequence_rate")] = consequence_rate(records)
    out[tune_key("episodes")] = len(records)
    if isinstance(row.get("train_return"), int | float):
        out[keys.SWEEP_TRAIN_PREFIX + "return"] = float(row["train_return"])
    out["stage"] = row.get("stage")
    out["stage_iteration"] = row.get("iteration")
    out["env_steps"] = row.get("env_steps")
    return out
