"""The decision/feedback store: durable across reopening (a replica restart), readable by the training side."""

from __future__ import annotations

import time

import pytest

from agentic_ray.serving.decision_store import DecisionStore, mark_feedback_consumed, read_feedback


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


class WallClock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_retention_deletes_old_rows_but_keeps_feedback_a_refiner_has_not_consumed(tmp_path):
    path = tmp_path / "fb.sqlite"
    clock = WallClock()
    s = DecisionStore(path, retention_s=3600.0, compact_every_s=None, clock=clock)
    for i in range(1200):  # more than one deletion batch
        s.add_decision(f"old{i}", "act", "stable", "v1", {"i": i}, {"skill": "x"})
    s.add_feedback("old7", "failure", "wrong_steps", "kept until consumed")
    s.add_feedback("old8", "success", None, "consumed")
    (consumed,) = [f.feedback_id for f in read_feedback(path) if f.trace_id == "old8"]
    assert mark_feedback_consumed(path, [consumed], when=clock.t) == 1
    s.open_session("sess-old", "alice", "cancellation", 1, "stable")
    s.close_session("sess-old")
    clock.t += 7200.0  # two hours later: everything above is past the retention
    s.add_decision("new", "act", "stable", "v1", {}, {})
    s.open_session("sess-new", "bob", "cancellation", 2, "stable")
    s.flush()
    out = s.compact()
    assert out["decisions_expired"] == 1199 and out["feedback_expired"] == 1 and out["sessions_expired"] == 1
    left = s._con.execute("SELECT trace_id FROM decisions ORDER BY trace_id").fetchall()
    assert left == [("new",), ("old7",)]  # old7: unconsumed feedback is about it
    (fb,) = read_feedback(path)
    assert (fb.trace_id, fb.comment, fb.consumed) == ("old7", "kept until consumed", None)
    assert [x.session_id for x in s.open_sessions()] == ["sess-new"]
    # once the refiner has consumed it, it goes too (with its decision) at the next compaction past the age
    assert [f.feedback_id for f in read_feedback(path, unconsumed=True)] == [fb.feedback_id]
    mark_feedback_consumed(path, [fb.feedback_id], when=clock.t - 7200.0)
    assert read_feedback(path, unconsumed=True) == []
    out = s.compact()
    assert (out["decisions_expired"], out["feedback_left"], out["decisions_left"]) == (1, 0, 1)
    s.close()


def test_retention_keeps_a_session_that_unconsumed_feedback_is_about_with_its_steps(tmp_path):
    """`agentic-ray refine` replays a session's steps: feedback on the episode (its trace id is the session id)
    or on one of its steps (a step decision naming the session) keeps the session until the feedback is
    consumed."""
    path = tmp_path / "fb.sqlite"
    clock = WallClock()
    s = DecisionStore(path, retention_s=3600.0, compact_every_s=None, clock=clock)
    for sid in ("by-episode", "by-step", "no-feedback"):
        s.open_session(sid, "alice", "cancellation", 1, "stable")
        s.add_session_step(sid, 0, {"skill": 1}, "policy")
        s.close_session(sid)
    s.add_decision("by-episode", "episode", "stable", "v1", {"session_id": "by-episode"}, {})
    s.add_decision("step-1", "step", "stable", "v1", {"session_id": "by-step"}, {"skill": "x"})
    on_episode = s.add_feedback("by-episode", "failure", "not_solved", "")
    on_step = s.add_feedback("step-1", "failure", "wrong_steps", "")
    clock.t += 7200.0
    out = s.compact()
    kept = sorted(r[0] for r in s._con.execute("SELECT session_id FROM sessions"))
    assert out["sessions_expired"] == 1 and kept == ["by-episode", "by-step"]
    assert s.session_steps("by-step") == [({"skill": 1}, "policy")] and s.session_steps("no-feedback") == []
    mark_feedback_consumed(path, [on_episode, on_step], when=clock.t - 7200.0)
    out = s.compact()
    assert out["sessions_expired"] == 2 and s.session_steps("by-step") == []
    s.close()


def test_retention_by_size_deletes_the_oldest_first(tmp_path):
    path = tmp_path / "fb.sqlite"
    clock = WallClock()
    s = DecisionStore(path, max_bytes=50_000, compact_every_s=None, clock=clock)
    for i in range(100):  # 1 KB each: 100 KB
        clock.t += 1.0
        s.add_decision(f"t{i:03d}", "act", "stable", "v1", {"pad": "x" * 1000}, {})
    s.add_feedback("t000", "failure", "other", "")  # unconsumed: its decision stays whatever its age
    out = s.compact()
    left = [r[0] for r in s._con.execute("SELECT trace_id FROM decisions ORDER BY created")]
    size = s._con.execute("SELECT sum(length(request) + length(decision)) FROM decisions").fetchone()[0]
    assert size <= 50_000 and out["decisions_over_size"] == 100 - len(left)
    assert left[0] == "t000" and left[1:] == [f"t{i:03d}" for i in range(101 - len(left), 100)]
    s.close()


def test_compaction_runs_beside_requests_without_blocking_them(tmp_path):
    """The background thread compacts on its own connection in batches: while it deletes 20,000 rows, feedback
    (a synchronous write) and decisions keep being stored, each waiting at most for one batch."""
    path = tmp_path / "fb.sqlite"
    clock = WallClock()
    s = DecisionStore(path, retention_s=10.0, compact_every_s=None, clock=clock)
    s._con.executemany(
        "INSERT INTO decisions VALUES (?, ?, 'act', 'stable', 'v1', ?, '{}')",
        [(f"old{i}", clock.t, '{"pad": "' + "x" * 200 + '"}') for i in range(20_000)],
    )
    s._con.commit()
    clock.t += 100.0
    s.compact_every_s = 0.0  # the writer thread compacts at its next flush
    done = []
    t_end = time.monotonic() + 30
    while not s.compactions and time.monotonic() < t_end:
        s.add_decision(f"new{len(done)}", "act", "stable", "v1", {}, {})
        s.add_feedback(f"new{len(done)}", "success", None, "")
        done.append(time.perf_counter())
    s.compact_every_s = None
    (c,) = s.compactions
    assert c["decisions_expired"] == 20_000
    # requests were served while it ran (measured: 444 feedback writes during a 1.37 s compaction, on a loaded
    # box; compacting under the store's lock, or without it between batches on a second connection, lets none
    # through)
    during = [t for t in done if c["started"] < t < c["started"] + c["ms"] / 1e3]
    assert len(during) >= 20, (len(during), c)
    s.close()
    assert len(read_feedback(path)) == len(done)
