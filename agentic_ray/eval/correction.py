"""Correction Uplift (CU, seed 000; issues 13 and 25), split in two, over paired first failures with bootstrap
intervals:

* **CU**: the fix rate with the diagnosis minus the fix rate with the same failure evidence but the diagnosis
  withheld: what the reflection module's diagnosis adds over what the caller saw of the failure;
* **evidence uplift**: the fix rate with the failure evidence (no diagnosis) minus the fix rate with neither.

The three conditions are distinct policy inputs (the policy's readout takes ``[diagnosis ‖ evidence]``, see
``AAACModelConfig.evidence_to_policy``). A *pair* is one validation task rolled twice with the same seed under two
conditions. Before an episode's first failure both inputs are all zeros, so a deterministic policy reaches the same
first failure in every condition; only what follows can differ. Pairs whose first failures differ (same task,
another step, skill or cause) are dropped and counted.

A failure is *fixed* when the failed call's skill succeeds again, doing what the failed call was for (the
success is not redundant: it satisfies a goal or reveals something the task needs), within the cause's fix length
(:data:`FIX_STEPS`) with no failure in between: one step for causes whose fix is the corrected call itself (retry
a tool error; call with the value copied from the revealed limit after a bad parameter), two for causes whose fix
looks something up first (re-read the entity after stale information; re-resolve a wrong entity with the lookup
that lists it; run the missing prerequisite). The injected caller errors persist (:mod:`agentic_ray.domains.
caller_errors`), so each cause has exactly one fix: a plain retry fixes only a tool error; after stale
information only a re-read helps, after a wrong entity only the listing lookup (a re-read by the wrong id fails
again), and after a bad parameter only the value at the limit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from agentic_ray.eval.bootstrap import paired_difference_ci
from agentic_ray.rewards.episode_record import EpisodeRecord

__all__ = [
    "FIX_STEPS",
    "CorrectionSplit",
    "CorrectionUplift",
    "correction_pairs",
    "correction_uplift",
    "correction_uplift_paired",
    "first_failure",
]

FIX_STEPS: dict[str, int] = {
    "tool_error": 1,
    "wrong_entity": 2,
    "bad_parameters": 1,
    "stale_information": 2,
    "missing_prerequisite": 2,
    "dependency_violation": 2,
    "risk_violation": 1,
}
"""Root cause → steps within which its fix lands the failed call."""


def first_failure(rec: EpisodeRecord) -> int | None:
    """Index of the episode's first failed step that has a next step, or None."""
    for i, s in enumerate(rec.steps[:-1]):
        if not s.ok:
            return i
    return None


def fixed(rec: EpisodeRecord, i: int) -> bool:
    """Whether the failure at step ``i`` was fixed (see the module docstring)."""
    failed = rec.steps[i]
    window = FIX_STEPS.get(failed.root_cause or "tool_error", 1)
    for s in rec.steps[i + 1 : i + 1 + window]:
        if not s.ok:
            return False
        if s.skill == failed.skill:
            return not s.redundant
    return False


def correction_pairs(
    with_reflection: Sequence[EpisodeRecord], without_reflection: Sequence[EpisodeRecord]
) -> tuple[list[tuple[bool, bool, str]], int]:
    """``([(fixed with reflection, fixed without, cause)], pairs dropped)`` over tasks in the same order."""
    pairs, dropped = [], 0
    for on, off in zip(with_reflection, without_reflection, strict=True):
        i, j = first_failure(on), first_failure(off)
        if i is None and j is None:
            continue
        a, b = (on.steps[i] if i is not None else None), (off.steps[j] if j is not None else None)
        if i != j or a is None or b is None or (a.skill, a.root_cause) != (b.skill, b.root_cause):
            dropped += 1
            continue
        pairs.append((fixed(on, i), fixed(off, j), a.root_cause or "tool_error"))  # type: ignore[arg-type]
    return pairs, dropped


@dataclass
class CorrectionUplift:
    """CU over first-failure pairs: ``cu`` = fix rate on − fix rate off, ``ci`` its 95% paired bootstrap interval."""

    cu: float | None  # None without pairs
    ci: tuple[float, float] | None  # None with fewer than 2 pairs
    pairs: int
    dropped: int = 0  # tasks whose first failures differed between the two runs
    fix_rate_on: float | None = None
    fix_rate_off: float | None = None
    by_cause: dict[str, dict[str, float]] = field(
        default_factory=dict
    )  # cause → {"pairs", "fix_on", "fix_off"}
    pair_list: list[tuple[bool, bool, str]] = field(default_factory=list)  # to pool runs (not in to_dict)

    def to_dict(self, name: str = "cu", rates: str = "cu") -> dict[str, object]:
        """The figures under ``name`` (``<name>``, ``<name>_ci``, ``<name>_n``, ``<name>_pairs_dropped``) and
        ``rates`` (``<rates>_fix_on``, ``<rates>_fix_off``, ``<rates>_by_cause``)."""
        return {
            name: self.cu,
            f"{name}_ci": list(self.ci) if self.ci else None,
            f"{name}_n": self.pairs,
            f"{name}_pairs_dropped": self.dropped,
            f"{rates}_fix_on": self.fix_rate_on,
            f"{rates}_fix_off": self.fix_rate_off,
            f"{rates}_by_cause": self.by_cause,
        }


@dataclass
class CorrectionSplit:
    """Correction Uplift split in two (see the module docstring), each with its pairs and interval.

    Attributes:
        cu: diagnosis (on) against the same evidence without it (off).
        evidence: the evidence without a diagnosis (on) against neither (off).
        evidence_channel: whether the policy reads the evidence itself; without it the evidence-only and the
            no-evidence conditions are the same input (the evidence uplift is then 0 by construction and CU is
            the diagnosis against nothing).
    """

    cu: CorrectionUplift
    evidence: CorrectionUplift
    evidence_channel: bool = True

    def to_dict(self) -> dict[str, object]:
        return {
            **self.cu.to_dict(),
            **self.evidence.to_dict("evidence_uplift", "evidence"),
            "evidence_channel": self.evidence_channel,
        }


def correction_uplift_paired(
    pairs: Sequence[tuple[bool, bool, str]], dropped: int = 0, seed: int = 0
) -> CorrectionUplift:
    """CU of ``pairs`` with its 95% paired percentile bootstrap interval (:func:`paired_difference_ci`)."""
    if not pairs:
        return CorrectionUplift(None, None, 0, dropped)
    on = [float(p[0]) for p in pairs]
    off = [float(p[1]) for p in pairs]
    rate_on, rate_off = float(np.mean(on)), float(np.mean(off))
    n = Counter(p[2] for p in pairs)
    by = {
        c: {
            "pairs": float(k),
            "fix_on": float(np.mean([p[0] for p in pairs if p[2] == c])),
            "fix_off": float(np.mean([p[1] for p in pairs if p[2] == c])),
        }
        for c, k in sorted(n.items())
    }
    return CorrectionUplift(
        rate_on - rate_off,
        paired_difference_ci(on, off, seed=seed),
        len(pairs),
        dropped,
        rate_on,
        rate_off,
        by,
        list(pairs),
    )


def correction_uplift(
    with_reflection: Sequence[EpisodeRecord], without_reflection: Sequence[EpisodeRecord], *, seed: int = 0
) -> CorrectionUplift:
    """CU over the first-failure pairs of two rollouts of the same tasks (:func:`correction_pairs`).

    Raises:
        ValueError: If the two runs do not cover the same number of tasks.
    """
    if len(with_reflection) != len(without_reflection):
        raise ValueError(
            f"CU needs the same tasks twice: {len(with_reflection)} vs {len(without_reflection)} episodes"
        )
    return correction_uplift_paired(*correction_pairs(with_reflection, without_reflection), seed=seed)
