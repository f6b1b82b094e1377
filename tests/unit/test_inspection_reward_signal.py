"""``benchmarks/inspection_reward_signal.py``: the layers are scored as the pool scores them, and the return's
correlation with completion is read across and within task families (the sampling is the imitation stage's and
the rollout's own, tested where they live)."""

from __future__ import annotations

import pytest

from agentic_ray.rewards.reward_pool_config import RewardPoolConfig
from benchmarks.inspection_reward_signal import plain, reward_signal
from tests.unit.rewards.records import record, step


def _episodes() -> list:
    """Short tasks (2 goals) completed, long ones (6 goals) failed after 5 goal calls, two of each per family."""
    short = [
        record([step(goals_satisfied=["a"]), step(goals_satisfied=["b"])], goals=["a", "b"], task_family="s")
        for _ in range(2)
    ]
    long_steps = [step(goals_satisfied=[g]) for g in "abcde"] + [step(redundant=True)] * 3
    long_failed = [
        record(long_steps, goals=list("abcdef"), completed=False, truncated=True, task_family="l")
        for _ in range(2)
    ]
    long_done = record([step(goals_satisfied=[g]) for g in "abcdef"], goals=list("abcdef"), task_family="l")
    return [*short, *long_failed, long_done]


def test_per_call_progress_out_earns_completion_across_families_and_the_share_does_not() -> None:
    share = RewardPoolConfig(
        layers={"execution": {"params": {"progress": "share"}}, "judge": {"enabled": False}}
    )
    by_share = reward_signal(_episodes(), share)
    by_call = reward_signal(_episodes(), plain(share))
    assert plain(share).layers["execution"].params == {} and share.layers["execution"].params
    assert by_call["return_corr"] < 0 < by_share["return_corr"]  # across families
    # within the long family, completing earns more under both
    assert by_call["family_corr"]["l"] > 0 and by_share["family_corr"]["l"] > 0
    assert by_share["family_corr"]["s"] is None  # every short task completed: no correlation to read
    assert by_share["episodes"] == 5 and by_share["completed_episodes"] == 3
    ex = by_share["layers"]["execution"]
    assert ex["raw_completed"] == pytest.approx(2.0) and ex["raw_failed"] == pytest.approx(5 / 6, abs=1e-3)
    assert by_call["layers"]["execution"]["raw_failed"] == pytest.approx(5.0)
