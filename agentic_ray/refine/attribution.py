"""Failure attribution of served episodes with evaluation's rules, and the trigger's share test."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from agentic_ray.eval.metrics import attribute_failures, root_cause
from agentic_ray.rewards.episode_record import EpisodeRecord

__all__ = ["attribute", "dominant_cause"]


def attribute(episodes: Mapping[str, EpisodeRecord]) -> dict[str, Any]:
    """Evaluation's failure attribution (:func:`~agentic_ray.eval.metrics.attribute_failures`) of ``{key:
    record}``, plus each root cause's share of the episodes (``cause_shares``) and every episode's cause
    (``by_episode``, None: completed)."""
    records = list(episodes.values())
    att = attribute_failures(records)
    n = len(records)
    causes = Counter(rc for r in records if (rc := root_cause(r)) is not None)
    att["cause_shares"] = {c: k / n for c, k in causes.most_common()} if n else {}
    att["by_episode"] = {k: root_cause(r) for k, r in episodes.items()}
    att["episodes"] = n
    return att


def dominant_cause(cause_shares: dict[str, float], threshold: float) -> str | None:
    """The root-cause class with the largest share if that share exceeds ``threshold`` (ties: by name), else
    None."""
    if not cause_shares:
        return None
    cause, share = min(cause_shares.items(), key=lambda kv: (-kv[1], kv[0]))
    return cause if share > threshold else None
