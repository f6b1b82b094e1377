"""No stage ships a worse policy: the rule that decides whose checkpoint goes forward after a stage.

A stage's policy is kept unless its validation completion is worse than its baseline's (the policy the stage
received, as last evaluated) beyond the noise. Both were evaluated on the same validation tasks, so the comparison
is paired, per task: ``b`` tasks only the baseline completed, ``c`` only the new policy. With no real difference each
of those ``b + c`` discordant tasks is equally likely to fall either way, so the new policy is *worse beyond the
noise* when ``b > c`` and the exact one-sided binomial tail ``P(X >= b | X ~ Binomial(b + c, 1/2))`` is below
``alpha`` (McNemar's exact test). Tasks both or neither completed say nothing about the difference and do not count,
which is what makes the paired test sharper than comparing two completion rates. On 111 tasks, 75 -> 70 completions
from 6 tasks lost and 1 gained gives ``p = 0.0625`` (kept at ``alpha = 0.05``: that could be noise); 75 -> 66 from
10 lost and 1 gained gives ``p = 0.0059`` (rejected).

The p-value is computed by :func:`scipy.stats.binomtest` (an exact test; no resampling, so the decision is the
same on every run) and checked against the binomial sum in the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import binomtest

__all__ = ["ALPHA", "StageComparison", "compare_completion", "completion_by_task"]

ALPHA = 0.05
"""Default one-sided significance level of a regression."""

TaskKey = tuple[str, int]


@dataclass(frozen=True)
class StageComparison:
    """The comparison of a stage's policy with its baseline on the tasks both were evaluated on.

    Attributes:
        n: paired tasks.
        before: the baseline's completion rate on them.
        after: the new policy's completion rate on them.
        only_before: tasks only the baseline completed (``b``).
        only_after: tasks only the new policy completed (``c``).
        p_value: ``P(X >= b | X ~ Binomial(b + c, 1/2))`` (1.0 when ``b + c == 0``).
        alpha: the significance level.
        worse: ``b > c and p_value < alpha``: the new policy is worse beyond the noise.
    """

    n: int
    before: float
    after: float
    only_before: int
    only_after: int
    p_value: float
    alpha: float
    worse: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def completion_by_task(records: Iterable[Any]) -> dict[TaskKey, bool]:
    """``(family, task seed) -> completed`` of evaluation episode records (anything with ``task_family``,
    ``task_seed`` and ``completed``)."""
    return {(str(r.task_family), int(r.task_seed)): bool(r.completed) for r in records}


def compare_completion(
    before: Mapping[TaskKey, bool], after: Mapping[TaskKey, bool], alpha: float = ALPHA
) -> StageComparison:
    """The paired comparison (see the module docstring) over the tasks both mappings hold.

    Args:
        before: the baseline's completion per task.
        after: the new policy's completion per task.
        alpha: one-sided significance level.

    Raises:
        ValueError: no task in common.
    """
    keys = sorted(set(before) & set(after))
    if not keys:
        raise ValueError("the two evaluations share no validation task")
    b = sum(before[k] and not after[k] for k in keys)
    c = sum(after[k] and not before[k] for k in keys)
    p = float(binomtest(b, b + c, 0.5, alternative="greater").pvalue) if b + c else 1.0
    n = len(keys)
    return StageComparison(
        n=n,
        before=sum(before[k] for k in keys) / n,
        after=sum(after[k] for k in keys) / n,
        only_before=b,
        only_after=c,
        p_value=p,
        alpha=alpha,
        worse=b > c and p < alpha,
    )
