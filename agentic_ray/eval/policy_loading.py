"""Load a trained policy module from a run directory or checkpoint, without building an Algorithm.

A checkpoint records its model's settings (the module's constructor arguments, ``class_and_ctor_args.pkl``,
hold the ``model_config`` dict, so a restored module has ``aaac_config``). A policy trained with the env's
privileged root cause (``reflection_source: oracle_env``, an oracle ablation) is refused with an
:class:`OracleCheckpointError` unless the caller asks for it (``allow_oracle=True``; ``agentic-ray eval
--allow-oracle``): evaluated or served, it would read what no agent can know.

A damaged checkpoint (a truncated pickle after a full disk, a half-copied folder) fails here with a
:class:`CheckpointError` that names the checkpoint and the broken file, not with a pickle traceback from deep
inside RLlib; :func:`verify_checkpoint` runs the same check on a whole algorithm checkpoint before anything is
built (``agentic-ray train --resume`` calls it first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODULE_SUBDIR = Path("learner_group") / "learner" / "rl_module" / "default_policy"
STAGE_ORDER = ("reflection", "rl", "il", "latest")
_MODULE_FILES = (
    "class_and_ctor_args.pkl",
)  # with module_state.{pkl,msgpack}: what RLModule.from_checkpoint reads


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be loaded. The message names the checkpoint and the broken or missing file."""


class OracleCheckpointError(CheckpointError):
    """A checkpoint of a policy trained with the env's privileged root cause, loaded without ``allow_oracle``."""


def uses_oracle(module: Any) -> bool:
    """Whether an RLModule's policy reads the env's privileged root cause (``reflection_source: oracle_env``).

    Modules without an AAAC model config (another RLModule) read no such input.
    """
    cfg = getattr(module, "aaac_config", None)
    return bool(getattr(cfg, "uses_oracle", False))


def pick_checkpoint(run_dir: str | Path, name: str | None = None) -> Path:
    """The named stage checkpoint, or the most advanced one that exists."""
    base = Path(run_dir) / "checkpoints"
    names = [name] if name else list(STAGE_ORDER)
    for n in names:
        p = base / n
        if (p / MODULE_SUBDIR).exists():
            return p
    raise FileNotFoundError(f"no checkpoint {names} under {base}")


def _check_file(f: Path) -> None:
    """Parse one checkpoint file the way RLlib will: JSON, cloudpickle or msgpack."""
    if f.suffix == ".json":
        json.loads(f.read_text())
    elif f.suffix == ".pkl":
        import ray.cloudpickle as pickle

        with f.open("rb") as fh:
            pickle.load(fh)
    elif f.suffix in (".msgpack", ".msgpck"):
        import msgpack  # type: ignore[import-untyped]

        with f.open("rb") as fh:
            msgpack.load(fh, strict_map_key=False)


def verify_checkpoint(checkpoint: str | Path, *, module_only: bool = False) -> Path:
    """Check that every state file of an RLlib checkpoint tree can be read.

    Args:
        checkpoint: an algorithm checkpoint folder (or, with ``module_only``, a module checkpoint folder).
        module_only: require the files of a module checkpoint (class and ctor args, module state).

    Returns:
        The checkpoint path.

    Raises:
        CheckpointError: the folder is missing or empty, a required file is missing, or a file does not parse;
            the message names the checkpoint and the file.
    """
    p = Path(checkpoint)
    if not p.is_dir():
        raise CheckpointError(f"checkpoint {p} does not exist (or is not a folder)")
    files = sorted(
        f for f in p.rglob("*") if f.is_file() and f.suffix in (".json", ".pkl", ".msgpack", ".msgpck")
    )
    if not files:
        raise CheckpointError(f"checkpoint {p} holds no checkpoint files (an interrupted save or copy?)")
    if module_only:
        missing = [n for n in _MODULE_FILES if not (p / n).is_file()]
        if not any((p / f"module_state.{ext}").is_file() for ext in ("pkl", "msgpack", "msgpck")):
            missing.append("module_state.pkl")
        if missing:
            raise CheckpointError(f"checkpoint {p} is incomplete: missing {', '.join(missing)}")
    for f in files:
        try:
            _check_file(f)
        except (
            Exception
        ) as e:  # EOFError, UnpicklingError, JSONDecodeError, a class that no longer imports ...
            raise CheckpointError(
                f"checkpoint {p} is corrupted: {f.relative_to(p)} cannot be read ({type(e).__name__}: {e})"
            ) from e
    return p


def load_policy_module(checkpoint: str | Path, *, allow_oracle: bool = False) -> Any:
    """The ``default_policy`` RLModule of an algorithm checkpoint (or of a module checkpoint directly).

    Args:
        checkpoint: the checkpoint folder.
        allow_oracle: load a policy trained with the env's privileged root cause too (an oracle ablation).

    Raises:
        OracleCheckpointError: the policy reads the env's privileged root cause and ``allow_oracle`` is False.
        CheckpointError: the checkpoint is missing, incomplete or corrupted (the message names the file).
    """
    from ray.rllib.core.rl_module.rl_module import RLModule

    from agentic_ray.ray_notices import drop_known_ray_notices

    drop_known_ray_notices()
    # Absolute: RLlib opens checkpoints through pyarrow's filesystem, which rejects a relative path
    # ("ArrowInvalid: URI has empty scheme").
    p = Path(checkpoint).resolve()
    path = p / MODULE_SUBDIR if (p / MODULE_SUBDIR).exists() else p
    verify_checkpoint(path, module_only=True)
    try:
        module: Any = RLModule.from_checkpoint(str(path))
    except Exception as e:  # readable files whose contents do not fit (another model, another version)
        raise CheckpointError(f"checkpoint {path} cannot be restored: {type(e).__name__}: {e}") from e
    if uses_oracle(module) and not allow_oracle:
        raise OracleCheckpointError(
            f"checkpoint {path} holds a policy trained with the env's privileged root cause "
            "(model.reflection_source: oracle_env, an oracle ablation): it reads what no agent can know. "
            "Refused; pass --allow-oracle (allow_oracle=True) to load it as the oracle ablation."
        )
    module.eval()
    return module
