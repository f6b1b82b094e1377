"""Rank sweep trials on their validation metrics: non-dominated fronts first, then the objectives in order.

A trial row is a plain dict: ``trial_id``, ``status``, ``is_default``, ``params`` (experiment overrides),
``metrics`` (validation metric → last reported value) and ``evaluations``. Pure functions; no Ray.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentic_ray.sweeps.pareto import Mode, dominates, nondominated_ranks, pareto_front
from agentic_ray.sweeps.validation_metrics import VALIDATION_METRICS, tune_key

if TYPE_CHECKING:
    from agentic_ray.sweeps.search_space import SearchSpace


def trial_row(
    trial_id: str,
    status: str,
    config: dict[str, Any],
    result: dict[str, Any] | None,
    space: SearchSpace,
    metrics: list[str],
) -> dict[str, Any]:
    """A ranking row (see :mod:`agentic_ray.sweeps.ranking`) from a trial's config and last Tune result."""
    params = space.overrides(config)
    res = result or {}
    return {
        "trial_id": trial_id,
        "status": status,
        "is_default": space.is_default(params),
        "params": params,
        "metrics": {m: res[tune_key(m)] for m in metrics if isinstance(res.get(tune_key(m)), int | float)},
        "evaluations": res.get("training_iteration"),
        "stage": res.get("stage"),
    }


def _values(row: dict[str, Any], metrics: Sequence[str]) -> list[float] | None:
    vals = [row.get("metrics", {}).get(m) for m in metrics]
    return [float(v) for v in vals] if all(isinstance(v, int | float) for v in vals) else None


def modes(metrics: Sequence[str]) -> list[Mode]:
    """The direction of each validation metric."""
    return [VALIDATION_METRICS[m] for m in metrics]


def rank_trials(rows: Sequence[dict[str, Any]], objectives: Sequence[str]) -> list[dict[str, Any]]:
    """Rows sorted best first, each with ``pareto_rank`` (0: on the front of all objectives) and ``rank``
    (1-based). Rows missing an objective (a trial that failed before its first evaluation) come last, with
    ``rank`` and ``pareto_rank`` None."""
    ms = modes(objectives)
    scored = [(r, v) for r in rows if (v := _values(r, objectives)) is not None]
    fronts = nondominated_ranks([v for _, v in scored], ms)

    def key(item: tuple[dict[str, Any], list[float], int]) -> tuple[Any, ...]:
        row, vals, front = item
        oriented = [-x if m == "max" else x for x, m in zip(vals, ms, strict=True)]
        return (front, *oriented, not row.get("is_default", False), str(row.get("trial_id")))

    ranked = sorted(((r, v, f) for (r, v), f in zip(scored, fronts, strict=True)), key=key)
    out = [{**r, "pareto_rank": f, "rank": i + 1} for i, (r, _, f) in enumerate(ranked)]
    unscored = [r for r in rows if _values(r, objectives) is None]
    return out + [{**r, "pareto_rank": None, "rank": None} for r in unscored]


def pair_front(rows: Sequence[dict[str, Any]], pair: Sequence[str]) -> list[dict[str, Any]]:
    """The rows on the Pareto front of two metrics, sorted by the first."""
    scored = [(r, v) for r in rows if (v := _values(r, pair)) is not None]
    idx = pareto_front([v for _, v in scored], modes(pair))
    return sorted((scored[i][0] for i in idx), key=lambda r: (r["metrics"][pair[0]], r["metrics"][pair[1]]))


def compare_to_default(rows: Sequence[dict[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """Whether the default (baseline) trial is on the front of ``metrics``, and which trials dominate it."""
    default = next((r for r in rows if r.get("is_default") and _values(r, metrics) is not None), None)
    if default is None:
        return {"default_trial": None, "default_on_front": None, "dominating_default": []}
    dv, ms = _values(default, metrics), modes(metrics)
    assert dv is not None
    dominating = [
        r["trial_id"] for r in rows if (v := _values(r, metrics)) is not None and dominates(v, dv, ms)
    ]
    return {
        "default_trial": default["trial_id"],
        "default_on_front": not dominating,
        "dominating_default": dominating,
    }
