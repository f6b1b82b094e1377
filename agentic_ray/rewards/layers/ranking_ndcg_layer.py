"""Ranking NDCG (seed 000's layer "NDCG for ranking"), dense: a value on each ranking call's step.

Reads the domain's per-call ranking outcomes (:mod:`agentic_ray.rewards.call_outcomes`): the order a call
returned is scored by NDCG@k (k = the number of items it returned; linear gains, the ideal order over every
candidate the call ranked). A call among candidates none of which is relevant scores nothing. Values are potential
differences per key.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentic_ray.keys import CONTEXT_RANKING_CALLS
from agentic_ray.rewards.call_outcomes import RankingOutcome, ranking_outcomes
from agentic_ray.rewards.detection_functional import ndcg
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.call_outcome_layer import CallOutcomeLayer


class RankingNDCGLayer(CallOutcomeLayer):
    """Ranking NDCG, reward stream, step-level."""

    name = "ranking_ndcg"
    version = "1"
    context_inputs = (CONTEXT_RANKING_CALLS,)

    def outcomes(self, record: EpisodeRecord) -> Sequence[RankingOutcome] | None:
        return ranking_outcomes(record)

    def metric(self, outcome: RankingOutcome) -> float:
        """NDCG@len(ranked) of one call (NaN when no candidate is relevant)."""
        return ndcg(outcome.ranked, outcome.relevance)
