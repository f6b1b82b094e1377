"""The dashboard's incremental reader of a run directory (no Ray, no server)."""

from __future__ import annotations

import json
import os

from agentic_ray.dashboard.run_data import JsonlTail, RunData


def test_jsonl_tail_reads_only_appended_complete_lines(tmp_path):
    p = tmp_path / "metrics.jsonl"
    tail = JsonlTail(p)
    assert tail.refresh() == []  # no file yet
    p.write_text('{"a": 1}\n{"a": 2')  # the second line is still being written
    assert tail.refresh() == [{"a": 1}]
    with p.open("a") as f:
        f.write(', "b": 3}\n{"a": 4}\n')
    assert tail.refresh() == [{"a": 2, "b": 3}, {"a": 4}]
    assert tail.refresh() == []
    assert tail.rows == [{"a": 1}, {"a": 2, "b": 3}, {"a": 4}]
    p.write_text('{"a": 9}\n')  # truncated and rewritten: start over
    tail.refresh()
    assert tail.rows == [{"a": 9}]


def test_run_data_finds_traces_by_episode_or_step_id_as_they_arrive(tmp_path):
    data = RunData(tmp_path)
    assert data.status()["status"] == "starting" and data.trace("t1") is None
    t1 = {"trace_id": "t1", "completed": False, "steps": [{"step_trace_id": "s1", "result_code": "UPSTREAM_ERROR",
                                                           "injected": True}]}  # fmt: skip
    (tmp_path / "traces.jsonl").write_text(json.dumps(t1) + "\n")
    assert data.trace("t1") == t1 and data.trace("s1") == t1
    t2 = {
        "trace_id": "t2",
        "completed": True,
        "failed": False,
        "steps": [{"step_trace_id": "s2", "result_code": "OK"}],
    }
    with (tmp_path / "traces.jsonl").open("a") as f:
        f.write(json.dumps(t2) + "\n")
    assert data.trace("s2") == t2
    summaries = data.trace_summaries()
    assert [(s["trace_id"], s["failed"], s["failed_steps"], s["injected_steps"]) for s in summaries] == [
        ("t1", True, 1, 1),
        ("t2", False, 0, 0),
    ]


def test_state_is_reread_when_the_pipeline_replaces_it(tmp_path):
    data = RunData(tmp_path)
    st = tmp_path / "state.json"
    st.write_text(json.dumps({"status": "running", "stage": "rl", "iteration": 1}))
    assert data.status()["stage"] == "rl"
    tmp = tmp_path / "state.json.tmp"
    tmp.write_text(json.dumps({"status": "finished", "stage": None, "iteration": 0}))
    os.replace(tmp, st)
    os.utime(st, ns=(st.stat().st_atime_ns, st.stat().st_mtime_ns + 1_000_000))
    assert data.status()["status"] == "finished"
