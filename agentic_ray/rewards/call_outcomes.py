"""What a domain's reward context says about individual tool calls, for the detection and ranking reward layers.

A domain whose tools detect objects or rank items logs, per call its handler ran, what the call returned beside
the truth, and hands the log to the reward layers in :meth:`~agentic_ray.domains.protocol.Domain.context`
(``EpisodeRecord.context``) under :data:`~agentic_ray.keys.CONTEXT_DETECTION_CALLS`,
:data:`~agentic_ray.keys.CONTEXT_RANKING_CALLS` and :data:`~agentic_ray.keys.CONTEXT_RECORD_CALLS`, as lists of
:meth:`DetectionOutcome.to_context` / :meth:`RankingOutcome.to_context` / :meth:`RecordOutcome.to_context` dicts
(plain, picklable values). The truth is the environment's judgement:
reward layers read it, the policy never does.

A step is scored by the outcome of its call: :func:`align` pairs each successful step with the first unused
outcome of the same skill and the same (validated) arguments, in order. Tools are deterministic in their
arguments here, so a call the gateway retried or whose reply was lost pairs with an outcome of identical content.

Values are potential-based per ``key`` (the item a call is about, e.g. a part): a step earns the change in the
metric of its key since the key's previous scored call (Ng, Harada & Russell 1999), so a repeated call earns only
what it improves and an episode's sum per key is the metric of its last call. A metric that is undefined for a
call (NaN: nothing to localise, nothing relevant to rank) leaves the key's potential unchanged and scores 0.

A key's potential starts at 0, or at ``initial[key]`` (:func:`potential_steps`): the detection layers' ``baseline:
default`` starts it at the metric of what the skill's default arguments report on the same item
(:meth:`DetectionOutcome.at_defaults`), so a step earns what the call's arguments improved over the defaults and an
episode's sum per key is ``metric(last call) - metric(defaults)``: a difference reward (Wolpert & Tumer 2002)
whose counterfactual is the default call. Without it the first call on an item earns the item's whole score, so the
reward pays for calling at all, with the item's difficulty (an easy part scores 1 at any setting) as its variance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import torch

from agentic_ray.keys import CONTEXT_DETECTION_CALLS, CONTEXT_RANKING_CALLS, CONTEXT_RECORD_CALLS
from agentic_ray.rewards.detection_functional import f1_score, localisation_iou, match_detections, ndcg
from agentic_ray.rewards.episode_record import EpisodeRecord

__all__ = [
    "DetectionOutcome",
    "RankingOutcome",
    "RecordOutcome",
    "align",
    "detection_outcomes",
    "final_metrics",
    "potential_steps",
    "potential_values",
    "ranking_outcomes",
    "record_outcomes",
]


@dataclass(frozen=True)
class DetectionOutcome:
    """One detection call: what it reported and what was there.

    Attributes:
        skill: the skill that ran.
        args: its validated arguments (what the gateway passed to the handler).
        key: the item the call is about (potentials are per key).
        pred_boxes: ``(N, 4)`` reported boxes ``(x0, y0, x1, y1)``.
        pred_classes: ``(N,)`` their class indices.
        pred_scores: ``(N,)`` their confidences.
        true_boxes: ``(M, 4)`` the true boxes of the classes that count.
        true_classes: ``(M,)``.
        image: the image the call looked at, ``image_size x image_size`` uint8 row-major bytes (for model-based
            scorers), or empty.
        image_size: its side.
        quality_model: the model-based scorer that judges these detections, as ``package:path`` (a JSON record
            inside an installed package) or a file path; empty: none.
        default_boxes: ``(N', 4)`` the reports of the skill's default arguments on the same item, or None when the
            domain does not log them; with ``default_classes`` and ``default_scores`` (see :meth:`at_defaults`).
        default_classes: ``(N',)``.
        default_scores: ``(N',)``.
    """

    skill: str
    args: dict[str, Any]
    key: str
    pred_boxes: list[list[float]]
    pred_classes: list[int]
    pred_scores: list[float]
    true_boxes: list[list[float]]
    true_classes: list[int]
    image: bytes = b""
    image_size: int = 0
    quality_model: str = ""
    default_boxes: list[list[float]] | None = None
    default_classes: list[int] | None = None
    default_scores: list[float] | None = None

    def to_context(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_context(cls, d: dict[str, Any]) -> DetectionOutcome:
        return cls(**d)

    def at_defaults(self) -> DetectionOutcome:
        """The same call had it run at the skill's default arguments (its reports replaced by the default ones).

        Raises:
            ValueError: the domain logged no default reports (``default_boxes`` is None).
        """
        if self.default_boxes is None:
            raise ValueError(
                f"the outcome of {self.skill} on {self.key} carries no default-argument reports (the domain does "
                "not log them): a layer's baseline 'default' needs them"
            )
        return replace(
            self,
            pred_boxes=self.default_boxes,
            pred_classes=list(self.default_classes or []),
            pred_scores=list(self.default_scores or []),
            default_boxes=None,
            default_classes=None,
            default_scores=None,
        )

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """``(pred_boxes, pred_classes, pred_scores, true_boxes, true_classes)`` as tensors."""
        return (
            torch.tensor(self.pred_boxes, dtype=torch.float32).reshape(-1, 4),
            torch.tensor(self.pred_classes, dtype=torch.long).reshape(-1),
            torch.tensor(self.pred_scores, dtype=torch.float32).reshape(-1),
            torch.tensor(self.true_boxes, dtype=torch.float32).reshape(-1, 4),
            torch.tensor(self.true_classes, dtype=torch.long).reshape(-1),
        )

    def pixels(self) -> np.ndarray:
        """The image as ``(S, S)`` float32 in [0, 1]."""
        if not self.image:
            raise ValueError(f"outcome of {self.skill} on {self.key} carries no image")
        a = np.frombuffer(self.image, dtype=np.uint8).reshape(self.image_size, self.image_size)
        return a.astype(np.float32) / 255.0


@dataclass(frozen=True)
class RankingOutcome:
    """One ranking call: the order it returned and the true relevance of every candidate.

    Attributes:
        skill, args, key: as in :class:`DetectionOutcome`.
        ranked: item ids, best first.
        relevance: every candidate's true relevance (non-negative).
        line_relevance: the true relevance of every item the task is about (the call's candidates or more: a
            call that ranked a subset leaves some out), or None when the domain does not log it.
    """

    skill: str
    args: dict[str, Any]
    key: str
    ranked: list[str]
    relevance: dict[str, float] = field(default_factory=dict)
    line_relevance: dict[str, float] | None = None

    def to_context(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_context(cls, d: dict[str, Any]) -> RankingOutcome:
        return cls(**d)


@dataclass(frozen=True)
class RecordOutcome:
    """One call that records findings: the findings table after it, beside the findings the task is judged on.

    Attributes:
        skill, args, key: as in :class:`DetectionOutcome`.
        findings: item id -> its recorded finding, every item's, after the call.
        must: item id -> the finding it must have at the end.
        must_not: item id -> a finding it must not have at the end.
    """

    skill: str
    args: dict[str, Any]
    key: str
    findings: dict[str, str]
    must: dict[str, str]
    must_not: dict[str, str] = field(default_factory=dict)

    def to_context(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_context(cls, d: dict[str, Any]) -> RecordOutcome:
        return cls(**d)

    def credit(self) -> float:
        """The share of the required findings the table holds, less the share of wrong ones:
        ``(right - wrong) / len(must)``; ``wrong`` counts a required item holding another finding and a forbidden
        finding held. 1 exactly when the table passes the judgement (every required finding, no forbidden one);
        NaN when nothing is required."""
        if not self.must:
            return math.nan
        right = sum(self.findings.get(k) == f for k, f in self.must.items())
        wrong = sum(k in self.findings and self.findings[k] != f for k, f in self.must.items())
        wrong += sum(self.findings.get(k) == f for k, f in self.must_not.items())
        return (right - wrong) / len(self.must)


def detection_outcomes(record: EpisodeRecord) -> list[DetectionOutcome] | None:
    """The record's detection outcomes, or None when its domain reports none."""
    raw: Any = record.context.get(CONTEXT_DETECTION_CALLS)
    return None if raw is None else [DetectionOutcome.from_context(d) for d in raw]


def ranking_outcomes(record: EpisodeRecord) -> list[RankingOutcome] | None:
    """The record's ranking outcomes, or None when its domain reports none."""
    raw: Any = record.context.get(CONTEXT_RANKING_CALLS)
    return None if raw is None else [RankingOutcome.from_context(d) for d in raw]


def record_outcomes(record: EpisodeRecord) -> list[RecordOutcome] | None:
    """The record's findings-recording outcomes, or None when its domain reports none."""
    raw: Any = record.context.get(CONTEXT_RECORD_CALLS)
    return None if raw is None else [RecordOutcome.from_context(d) for d in raw]


Outcome = TypeVar("Outcome", DetectionOutcome, RankingOutcome, RecordOutcome)


def align(record: EpisodeRecord, outcomes: Sequence[Outcome]) -> list[tuple[int, Outcome]]:
    """``(step index, outcome)`` pairs: each successful step takes the first unused outcome of its skill and
    arguments, in step order. Steps without one (failed, degraded, other tools) are left out."""
    used = [False] * len(outcomes)
    pairs = []
    for t, s in enumerate(record.steps):
        if not s.ok:
            continue
        for i, o in enumerate(outcomes):
            if not used[i] and o.skill == s.skill and o.args == s.args:
                used[i] = True
                pairs.append((t, o))
                break
    return pairs


def potential_values(
    record: EpisodeRecord,
    outcomes: Sequence[Outcome],
    metric: Callable[[Outcome], float],
    reference: Callable[[Outcome], float] | None = None,
) -> np.ndarray:
    """Per-step values: the change of ``metric`` per key at the step of each outcome (see the module docstring).

    Args:
        reference: a key's starting potential, from its first scored outcome (None: every key starts at 0).

    Returns:
        ``(T,)`` float32.
    """
    pairs = align(record, outcomes)
    initial: dict[str, float] | None = None
    if reference is not None:
        initial = {}
        for _, o in pairs:
            if o.key not in initial:
                initial[o.key] = reference(o)
    return potential_steps(record.num_steps, [(t, o.key, metric(o)) for t, o in pairs], initial)


def potential_steps(
    num_steps: int, scored: Sequence[tuple[int, str, float]], initial: Mapping[str, float] | None = None
) -> np.ndarray:
    """``(T,)`` float32 potential differences from ``(step, key, metric)`` in step order (NaN metrics skipped).

    Args:
        initial: key -> its potential before its first call (absent or NaN: 0).
    """
    out = np.zeros(num_steps, dtype=np.float32)
    last: dict[str, float] = {k: v for k, v in (initial or {}).items() if not math.isnan(v)}
    for t, key, m in scored:
        if math.isnan(m):
            continue
        out[t] += m - last.get(key, 0.0)
        last[key] = m
    return out


def final_metrics(records: Sequence[EpisodeRecord], iou_min: float = 0.5) -> dict[str, float]:
    """Episode-end detection and ranking quality over many records: per item, its last detection call's F1 and
    localisation IoU, and per episode its last ranking's NDCG, averaged (NaN where there was none).

    Returns:
        ``{"f1", "iou", "ndcg", "n_items", "n_localised", "n_rankings"}`` (``n_localised``: the items with a
        localisation IoU, i.e. those with a true crack).
    """
    f1s, ious, ndcgs = [], [], []
    for r in records:
        last: dict[str, DetectionOutcome] = {}
        for _, o in align(r, detection_outcomes(r) or []):
            last[o.key] = o
        for o in last.values():
            pb, pc, ps, tb, tc = o.tensors()
            f1s.append(f1_score(*match_detections(pb, pc, ps, tb, tc, iou_min)))
            loc = localisation_iou(pb, pc, tb, tc)
            if not math.isnan(loc):
                ious.append(loc)
        ranked = align(r, ranking_outcomes(r) or [])
        if ranked:
            v = ndcg(ranked[-1][1].ranked, ranked[-1][1].relevance)
            if not math.isnan(v):
                ndcgs.append(v)

    def mean(xs: list[float]) -> float:
        return float(np.mean(xs)) if xs else math.nan

    return {
        "f1": mean(f1s),
        "iou": mean(ious),
        "ndcg": mean(ndcgs),
        "n_items": len(f1s),
        "n_localised": len(ious),
        "n_rankings": len(ndcgs),
    }
