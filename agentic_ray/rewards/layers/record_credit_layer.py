"""Partial credit for recording findings, dense: a value on each call that writes the findings the task is judged on.

Reads the domain's per-call record outcomes (:mod:`agentic_ray.rewards.call_outcomes`): after each such call the
findings table earns :meth:`~agentic_ray.rewards.call_outcomes.RecordOutcome.credit`, the share of the required
findings it holds less the share of wrong ones (a required item holding another finding, a forbidden finding
held), so recording 2 of 3 cracked parts earns 2/3 and recording a clean part as cracked costs. Values are
potential differences of the table's credit, so a call earns what it changed and an episode's sum is the final
table's credit: 1 exactly when the task's judgement on the table passes. A task whose judgement needs no finding
scores 0 on every step.

Why it exists (issue 30, ``benchmarks/inspection_rl_diagnosis.py``): 91% of the imitation start's greedy failures
are one wrong ``db_update`` (or ``rank_topk``) repeated until the step budget runs out, and no other layer tells a
nearly right record from a wrong one: L1 (``progress: share``) pays a record call only when it satisfies its goal
exactly. Off by default (only domains that log record outcomes can feed it).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentic_ray.keys import CONTEXT_RECORD_CALLS
from agentic_ray.rewards.call_outcomes import RecordOutcome, record_outcomes
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.call_outcome_layer import CallOutcomeLayer


class RecordCreditLayer(CallOutcomeLayer):
    """Partial credit of the findings table, reward stream, step-level."""

    name = "record_credit"
    version = "1"
    context_inputs = (CONTEXT_RECORD_CALLS,)

    def __init__(self) -> None:
        super().__init__()

    def outcomes(self, record: EpisodeRecord) -> Sequence[RecordOutcome] | None:
        return record_outcomes(record)

    def metric(self, outcome: RecordOutcome) -> float:
        return outcome.credit()
