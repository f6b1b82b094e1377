"""Where a run lives, like Tune's ``storage_path``: an absolute local directory, or a URI that survives the job.

A run directory is ``<storage_path>/<name>-<time>``. ``storage_path`` comes from the experiment setting
``storage_path``, else the environment variable ``AGENTIC_RAY_STORAGE_PATH``, else ``~/agentic_ray_results``,
always made absolute, never relative to the working directory: under ``ray job submit`` the working directory is
the job's temporary ``working_dir`` package, which Ray deletes after the job.

* A local path is written in place. On a multi-node cluster it is a path on the node that runs the driver.
* A URI (``s3://bucket/runs``, ``gs://...``, ``file:///abs/dir``, or anything else ``pyarrow.fs.FileSystem.from_uri``
  opens) is for clusters: the pipeline writes a local working copy (under ``AGENTIC_RAY_STAGING_DIR``, default
  ``<tmp>/agentic_ray_staging``) and :meth:`RunStorage.push` uploads what changed after every checkpoint and at
  the end; ``--resume`` and ``eval`` :meth:`RunStorage.pull` it back first.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

STORAGE_ENV = "AGENTIC_RAY_STORAGE_PATH"
STAGING_ENV = "AGENTIC_RAY_STAGING_DIR"
DEFAULT_STORAGE_PATH = "~/agentic_ray_results"


def is_uri(location: str) -> bool:
    """True for ``scheme://...`` locations (handled through pyarrow), False for plain paths."""
    return "://" in str(location)


def resolve_storage_path(setting: str | None) -> str:
    """The absolute storage root: the setting, else ``$AGENTIC_RAY_STORAGE_PATH``, else ``~/agentic_ray_results``."""
    raw = setting or os.environ.get(STORAGE_ENV) or DEFAULT_STORAGE_PATH
    return raw.rstrip("/") if is_uri(raw) else str(Path(raw).expanduser().resolve())


def new_run_location(storage_path: str | None, name: str) -> str:
    """``<storage root>/<name>-<YYYYmmdd-HHMMSS>``."""
    return f"{resolve_storage_path(storage_path)}/{name}-{time.strftime('%Y%m%d-%H%M%S')}"


class RunStorage:
    """One run directory: a local directory the pipeline writes, and optionally the URI it is synced to.

    Args:
        location: the run directory, a path (made absolute) or a URI.
    """

    def __init__(self, location: str | Path) -> None:
        self.location = str(location)
        self._fs: Any = None
        self._remote_path = ""
        self._pushed: dict[str, tuple[int, int]] = {}
        if is_uri(self.location):
            import pyarrow.fs

            self._fs, self._remote_path = pyarrow.fs.FileSystem.from_uri(self.location.rstrip("/"))
            root = Path(os.environ.get(STAGING_ENV) or Path(tempfile.gettempdir()) / "agentic_ray_staging")
            key = hashlib.sha256(self.location.encode()).hexdigest()[:12]
            self.local_dir = (root / f"{key}-{Path(self._remote_path).name}").resolve()
        else:
            self.local_dir = Path(self.location).expanduser().resolve()
            self.location = str(self.local_dir)

    @property
    def remote(self) -> bool:
        """True when the run is synced to a URI."""
        return self._fs is not None

    def __str__(self) -> str:
        return self.location

    def push(self) -> int:
        """Upload the files that changed since the last push (no-op for a local run); returns how many."""
        if self._fs is None or not self.local_dir.exists():
            return 0
        import pyarrow.fs

        local = pyarrow.fs.LocalFileSystem()
        n = 0
        for path in sorted(p for p in self.local_dir.rglob("*") if p.is_file()):
            st = path.stat()
            rel = path.relative_to(self.local_dir).as_posix()
            if self._pushed.get(rel) == (st.st_size, st.st_mtime_ns):
                continue
            dest = f"{self._remote_path}/{rel}"
            self._fs.create_dir(dest.rsplit("/", 1)[0], recursive=True)
            pyarrow.fs.copy_files(str(path), dest, source_filesystem=local, destination_filesystem=self._fs)
            self._pushed[rel] = (st.st_size, st.st_mtime_ns)
            n += 1
        return n

    def pull(self) -> bool:
        """Download the run into the local working copy (no-op for a local run); False if the URI has nothing."""
        if self._fs is None:
            return self.local_dir.exists()
        import pyarrow.fs

        info = self._fs.get_file_info(self._remote_path)
        if info.type != pyarrow.fs.FileType.Directory:
            return False
        self.local_dir.mkdir(parents=True, exist_ok=True)
        pyarrow.fs.copy_files(
            self._remote_path,
            str(self.local_dir),
            source_filesystem=self._fs,
            destination_filesystem=pyarrow.fs.LocalFileSystem(),
        )
        for path in self.local_dir.rglob("*"):
            if path.is_file():
                st = path.stat()
                self._pushed[path.relative_to(self.local_dir).as_posix()] = (st.st_size, st.st_mtime_ns)
        return True
