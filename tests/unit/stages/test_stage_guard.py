"""The keep-better rule (issue 26, point 13) as a pure function: a paired exact test on per-task completion,
checked against the binomial sum written out."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from agentic_ray.stages.stage_guard import compare_completion, completion_by_task


def _tail(b: int, n: int) -> float:
    """Loop reference: P(X >= b) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, k) for k in range(b, n + 1)) / 2**n if n else 1.0


def _tasks(before: list[int], after: list[int]) -> tuple[dict, dict]:
    keys = [("f", i) for i in range(len(before))]
    return dict(zip(keys, map(bool, before), strict=True)), dict(zip(keys, map(bool, after), strict=True))


@pytest.mark.parametrize("seed", range(5))
def test_the_p_value_is_the_exact_binomial_tail_on_discordant_tasks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    before = rng.random(60) < 0.7
    after = np.where(rng.random(60) < 0.3, ~before, before)
    cmp = compare_completion(*_tasks(list(before), list(after)))
    b = int((before & ~after).sum())
    c = int((after & ~before).sum())
    assert (cmp.only_before, cmp.only_after, cmp.n) == (b, c, 60)
    assert cmp.p_value == pytest.approx(_tail(b, b + c), rel=1e-9)
    assert cmp.before == pytest.approx(before.mean()) and cmp.after == pytest.approx(after.mean())
    assert cmp.worse == (b > c and _tail(b, b + c) < 0.05)


def test_noise_is_kept_and_a_real_drop_is_rejected() -> None:
    base = [1] * 75 + [0] * 36  # 75 of 111, as issue 26's RL run started
    noisy = list(base)
    for i in range(6):  # 6 tasks lost, 1 gained: 75 -> 70
        noisy[i] = 0
    noisy[-1] = 1
    cmp = compare_completion(*_tasks(base, noisy))
    assert (cmp.only_before, cmp.only_after) == (6, 1) and cmp.p_value == pytest.approx(0.0625)
    assert not cmp.worse  # could be noise: the stage is kept
    worse = list(noisy)
    for i in range(6, 10):  # 10 lost, 1 gained: 75 -> 66
        worse[i] = 0
    cmp = compare_completion(*_tasks(base, worse))
    assert cmp.p_value == pytest.approx(0.005859375) and cmp.worse
    assert not compare_completion(*_tasks(worse, base)).worse  # the other way round: a gain
    assert (
        not compare_completion(*_tasks(base, base)).worse
        and compare_completion(*_tasks(base, base)).p_value == 1.0
    )
    assert compare_completion(*_tasks(base, worse), alpha=0.001).worse is False  # a stricter level keeps it


def test_only_tasks_both_evaluated_count() -> None:
    rec = lambda f, s, c: SimpleNamespace(task_family=f, task_seed=s, completed=c)  # noqa: E731
    before = completion_by_task([rec("a", 1, True), rec("a", 2, True), rec("b", 1, False)])
    after = completion_by_task([rec("a", 1, False), rec("b", 1, False), rec("c", 9, True)])
    cmp = compare_completion(before, after)
    assert cmp.n == 2 and (cmp.only_before, cmp.only_after) == (1, 0)
    with pytest.raises(ValueError, match="share no validation task"):
        compare_completion({("a", 1): True}, {("b", 1): True})
