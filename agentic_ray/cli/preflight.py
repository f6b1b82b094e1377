"""Checks that run before ``agentic-ray train`` starts Ray or writes a run directory ("nothing started half-way").

Each check raises :class:`PreflightError` with a message that names the file and the problem: a run directory
whose ``settings.json`` or ``state.json`` is damaged, a resume checkpoint that cannot be read, a skill contract
that does not load, or a skill whose ``requires:`` resource is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from agentic_ray.settings import ExperimentSettings


class PreflightError(RuntimeError):
    """The run cannot start; the message says why."""


def check_env(settings: ExperimentSettings) -> None:
    """Build (and close) the env once: contracts load, the action layout builds, ``requires:`` are met."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv
    from agentic_ray.skills.contracts import ContractError
    from agentic_ray.skills.requirements import MissingRequirementError

    try:
        AgentTaskEnv(settings.env).close()
    except (ContractError, MissingRequirementError) as e:
        raise PreflightError(str(e)) from e


def load_resume(run_dir: Path) -> ExperimentSettings:
    """The settings of a run to resume, after checking its state file and its latest checkpoint."""
    from agentic_ray.eval.policy_loading import CheckpointError, verify_checkpoint

    if not run_dir.is_dir():
        raise PreflightError(f"--resume {run_dir}: no such run directory")
    settings = load_run_settings(run_dir)
    state_file = run_dir / "state.json"
    try:
        state = json.loads(state_file.read_text()) if state_file.exists() else {}
    except (OSError, ValueError) as e:
        raise PreflightError(f"{state_file}: cannot read the pipeline state: {e}") from e
    if not isinstance(state, dict):
        raise PreflightError(f"{state_file}: the pipeline state must be a JSON object")
    ckpt = state.get("checkpoint")
    if ckpt:
        try:
            verify_checkpoint(ckpt)
        except CheckpointError as e:
            raise PreflightError(f"{state_file}: cannot resume: {e}") from e
    return settings


def load_run_settings(run_dir: Path) -> ExperimentSettings:
    """``RUN_DIR/settings.json``, validated; a damaged file is a :class:`PreflightError` naming it."""
    f = run_dir / "settings.json"
    try:
        return ExperimentSettings.model_validate_json(f.read_text())
    except OSError as e:
        raise PreflightError(f"{f}: cannot read the run's settings: {e}") from e
    except ValidationError as e:
        msgs = [
            f"{f}: field {'.'.join(map(str, err['loc'])) or '<top level>'}: {err['msg']}"
            for err in e.errors()
        ]
        raise PreflightError("\n".join(msgs)) from e
