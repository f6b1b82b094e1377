"""Load a trained policy module from a run directory or checkpoint, without building an Algorithm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODULE_SUBDIR = Path("learner_group") / "learner" / "rl_module" / "default_policy"
STAGE_ORDER = ("reflection", "rl", "il", "latest")


def pick_checkpoint(run_dir: str | Path, name: str | None = None) -> Path:
    """The named stage checkpoint, or the most advanced one that exists."""
    base = Path(run_dir) / "checkpoints"
    names = [name] if name else list(STAGE_ORDER)
    for n in names:
        p = base / n
        if (p / MODULE_SUBDIR).exists():
            return p
    raise FileNotFoundError(f"no checkpoint {names} under {base}")


def load_policy_module(checkpoint: str | Path) -> Any:
    """The ``default_policy`` RLModule of an algorithm checkpoint (or of a module checkpoint directly)."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    from agentic_ray.ray_notices import drop_known_ray_notices

    drop_known_ray_notices()
    # Absolute: RLlib opens checkpoints through pyarrow's filesystem, which rejects a relative path
    # ("ArrowInvalid: URI has empty scheme").
    p = Path(checkpoint).resolve()
    path = p / MODULE_SUBDIR if (p / MODULE_SUBDIR).exists() else p
    module: Any = RLModule.from_checkpoint(str(path))
    module.eval()
    return module
