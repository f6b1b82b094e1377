"""The decision/feedback store: durable across reopening (a replica restart), readable by the training side."""

from __future__ import annotations

import time

import pytest

from agentic_ray.serving.decision_store import DecisionStore, read_feedback


def test_decisions_and_feedback_survive_a_new_store_on_the_same_file(tmp_path):
    path = tmp_path / "fb.sqlite"
    a = DecisionStore(path, flush_s=10.0)
    a.add_decision("t1", "act", "stable", "v1", {"task": {"goals": ["g"]}}, {"skill": "user.find"})
    assert a.decision("t1") == ("act", "stable")  # pending, not yet written
    fid = a.add_feedback("t1", "failure", "wrong_steps", "it skipped the check")
    a.add_decision("t2", "step", "candidate", "v2", {"session_id": "s"}, {"skill": "sms.send"})
    a.close()  # flushes t2
    b = DecisionStore(path)
    assert b.decision("t2") == ("step", "candidate") and b.decision("t3") is None
    (fb,) = read_feedback(path)
    assert fb.feedback_id == fid and (fb.trace_id, fb.outcome, fb.reason) == ("t1", "failure", "wrong_steps")
    assert fb.request == {"task": {"goals": ["g"]}} and fb.decision == {"skill": "user.find"}
    assert (fb.kind, fb.arm, fb.model_version, fb.comment) == ("act", "stable", "v1", "it skipped the check")
    b.add_feedback("t2", "success", None, "")
    assert [f.trace_id for f in read_feedback(path)] == ["t1", "t2"]
    assert [f.trace_id for f in read_feedback(path, since=fb.created)] == ["t2"]
    b.close()


def test_pending_decisions_are_written_in_the_background(tmp_path):
    path = tmp_path / "fb.sqlite"
    s = DecisionStore(path, flush_s=0.05)
    s.add_decision("t1", "act", "stable", "v1", {}, {})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        other = DecisionStore(path, flush_s=60)
        found = other._con.execute("SELECT count(*) FROM decisions").fetchone()[0]
        other.close()
        if found:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the decision was never flushed")
    s.close()
