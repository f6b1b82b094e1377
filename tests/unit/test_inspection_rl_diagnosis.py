"""``benchmarks/inspection_rl_diagnosis.py``: a failed episode that repeated one call to its end is a loop, one
that varied its calls is not, and the summary counts them per shape (the rollouts are the evaluator's own,
tested where they live)."""

from __future__ import annotations

from benchmarks.inspection_rl_diagnosis import LOOP_CALLS, failure_shape, summarize
from tests.unit.rewards.records import record, step


def _record_call(part: str) -> object:
    return step(skill="db_update", args={"part_ids": [part], "finding": "crack"})


def test_a_repeated_identical_call_is_a_loop_and_a_varied_one_is_not() -> None:
    detect = step(
        skill="detect", args={"part_id": "P1", "confidence_threshold": 0.3}, goals_satisfied=["detect.0"]
    )
    same = [detect] + [_record_call("P2")] * LOOP_CALLS
    varied = [detect] + [_record_call(p) for p in ("P2", "P3", "P2")]
    loop = record(same, completed=False, truncated=True, task_family="disputed_batch")
    retry = record(varied, completed=False, truncated=True, task_family="disputed_batch")
    wrong = record(varied[:2], completed=False, failed=True, task_family="mixed_batch")
    done = record([detect, _record_call("P1")], task_family="mixed_batch")
    assert failure_shape(loop) == "loop:db_update"
    assert failure_shape(retry) == "truncated:db_update"  # the same skill, other arguments: not a loop
    assert failure_shape(wrong) == "failed:db_update"
    assert failure_shape(done) is None
    out = summarize([loop, retry, wrong, done])
    assert out["completion"] == 0.25
    assert out["family_completion"] == {"disputed_batch": 0.0, "mixed_batch": 0.5}
    assert out["failures"] == {"loop:db_update": 1, "truncated:db_update": 1, "failed:db_update": 1}
    assert out["loop_share_of_failures"] == round(1 / 3, 3)
    assert out["detect_threshold"] == {"disputed_batch": 0.3, "mixed_batch": 0.3}
