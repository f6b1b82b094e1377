"""Run locations: absolute by default, never the working directory; URIs sync through pyarrow (file:// here)."""

from __future__ import annotations

import os
from pathlib import Path

from agentic_ray.stages.run_storage import STORAGE_ENV, RunStorage, new_run_location, resolve_storage_path


def test_the_default_storage_is_absolute_and_outside_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    root = resolve_storage_path(None)
    assert os.path.isabs(root) and root == str(Path("~/agentic_ray_results").expanduser())
    assert not root.startswith(str(tmp_path))
    monkeypatch.setenv(STORAGE_ENV, str(tmp_path / "store"))
    assert resolve_storage_path(None) == str(tmp_path / "store")
    assert resolve_storage_path("s3://bucket/runs/") == "s3://bucket/runs"  # the setting wins, URIs stay URIs
    loc = new_run_location("relative/dir", "tiny")
    assert loc.startswith(str(tmp_path / "relative" / "dir") + "/tiny-")  # made absolute at launch


def test_a_local_run_is_written_in_place(tmp_path):
    s = RunStorage(tmp_path / "run")
    assert not s.remote and s.local_dir == tmp_path / "run" and str(s) == str(tmp_path / "run")
    assert s.push() == 0 and s.pull() is False  # nothing there yet


def test_a_uri_run_is_staged_locally_pushed_incrementally_and_pulled_back(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTIC_RAY_STAGING_DIR", str(tmp_path / "staging"))
    uri = f"file://{tmp_path}/bucket/runs/tiny-1"
    s = RunStorage(uri)
    assert s.remote and str(s) == uri and str(s.local_dir).startswith(str(tmp_path / "staging"))
    (s.local_dir / "checkpoints" / "rl").mkdir(parents=True)
    (s.local_dir / "state.json").write_text('{"status": "running"}')
    (s.local_dir / "checkpoints" / "rl" / "w.bin").write_bytes(b"\x00" * 100)
    assert s.push() == 2
    assert s.push() == 0  # nothing changed
    (s.local_dir / "state.json").write_text('{"status": "finished"}')
    assert s.push() == 1
    remote = tmp_path / "bucket" / "runs" / "tiny-1"
    assert (remote / "state.json").read_text() == '{"status": "finished"}'
    assert (remote / "checkpoints" / "rl" / "w.bin").stat().st_size == 100
    # Another machine (a fresh staging dir) resumes from the URI.
    monkeypatch.setenv("AGENTIC_RAY_STAGING_DIR", str(tmp_path / "elsewhere"))
    again = RunStorage(uri)
    assert again.pull() is True
    assert (again.local_dir / "state.json").read_text() == '{"status": "finished"}'
    assert again.push() == 0  # what was pulled is not uploaded back
    assert RunStorage(f"file://{tmp_path}/bucket/runs/missing").pull() is False
