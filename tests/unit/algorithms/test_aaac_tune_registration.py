"""Importing the AAAC package registers it with Tune under "AAAC", as RLlib registers its own algorithms."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_import_registers_aaac_under_its_name() -> None:
    # A fresh interpreter: in this one, a Tuner run on the AAAC class registers the name as a side effect.
    code = (
        "from ray.tune.registry import get_trainable_cls\n"
        "from agentic_ray.algorithms.aaac import AAAC\n"
        "assert get_trainable_cls('AAAC') is AAAC\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
