"""Ranking NDCG (seed 000's layer "NDCG for ranking"), dense: a value on each ranking call's step.

Reads the domain's per-call ranking outcomes (:mod:`agentic_ray.rewards.call_outcomes`): the order a call
returned is scored by NDCG@k (k = the number of items it returned; linear gains). A call among candidates none of
which is relevant scores nothing. Values are potential differences per key.

``over``: the items the ideal order is taken over. ``"call"`` (the default): every candidate the call ranked, so a
call that ranked a subset of the task's items can score 1. ``"line"``: every item the task is about
(``RankingOutcome.line_relevance``; the domain must log it), an item the call left out counting as unranked, so
only a ranking whose top k is the task's true top k scores 1. Why it exists (issue 30,
``benchmarks/inspection_rl_diagnosis.py``): on 60 sampled top_cracks episodes of the 40-demonstration imitation
policy, 177 of 278 ``rank_topk`` calls ranked a subset of the line and scored 0.967 on average over their own
candidates (0.913 over the whole line, against 0.951 for the full rankings), so the layer paid a subset ranking,
the call the greedy policy loops on, about what it paid the right one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from agentic_ray.keys import CONTEXT_RANKING_CALLS
from agentic_ray.rewards.call_outcomes import RankingOutcome, ranking_outcomes
from agentic_ray.rewards.detection_functional import ndcg
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.call_outcome_layer import Baseline, CallOutcomeLayer

Over = Literal["call", "line"]


class RankingNDCGLayer(CallOutcomeLayer):
    """Ranking NDCG, reward stream, step-level.

    Args:
        over: ``"call"`` or ``"line"``: the items the ideal order is taken over (see the module docstring).
        baseline: ``"none"`` only (a ranking has no default-argument counterfactual).
    """

    name = "ranking_ndcg"
    version = "1"
    context_inputs = (CONTEXT_RANKING_CALLS,)

    def __init__(self, over: Over = "call", baseline: Baseline = "none") -> None:
        super().__init__(baseline)
        if over not in ("call", "line"):
            raise ValueError(f"ranking_ndcg: over must be 'call' or 'line', got {over!r}")
        self.over = over

    @property
    def scorer_version(self) -> str:
        return self.version if self.over == "call" else f"{self.version}/over={self.over}"

    def outcomes(self, record: EpisodeRecord) -> Sequence[RankingOutcome] | None:
        return ranking_outcomes(record)

    def metric(self, outcome: RankingOutcome) -> float:
        """NDCG@len(ranked) of one call over its candidates or the task's items (NaN when none is relevant).

        Raises:
            ValueError: ``over: line`` and the domain logged no ``line_relevance``.
        """
        if self.over == "call":
            return ndcg(outcome.ranked, outcome.relevance)
        if outcome.line_relevance is None:
            raise ValueError(
                f"the outcome of {outcome.skill} carries no line_relevance (the domain does not log it): "
                "ranking_ndcg's over 'line' needs it"
            )
        return ndcg(outcome.ranked, {**outcome.relevance, **outcome.line_relevance})
