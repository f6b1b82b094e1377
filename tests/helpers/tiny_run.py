"""The session's shared tiny run: ``configs/tiny.yaml`` with the asynchronous reward pool and wandb offline.

Trained once per session in the session's Ray (the ``tiny_run`` fixture in tests/conftest.py) and read by the
dashboard tests; a later test that needs a finished tiny run with the reward pool reads it instead of training its
own (~33 s in CI, 2026-12-04). Not for timing-dependent claims: with the asynchronous pool, whether an iteration
updates depends on how fast the scorers ran. Its directory ends in ``runs/tiny``, the relative path the README's
examples use. Tests only read it.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
TINY_REWARDS = {
    "mode": "async",
    "layers": {"execution": {}, "efficiency": {}, "risk": {}, "plan": {}, "user_experience": {}},
}
"""L1-L4 from the asynchronous reward pool (the dashboard shows each layer)."""


def train_tiny_run(root: Path) -> Path:
    from agentic_ray.settings import load_settings
    from agentic_ray.stages.pipeline import run_pipeline

    s = load_settings(TINY, {"wandb.mode": "offline", "rewards": TINY_REWARDS})
    out = run_pipeline(s, run_dir=root / "runs" / "tiny", progress=lambda _m: None)
    assert out["status"] == "finished", out
    return Path(out["run_dir"])
