"""Registering a refined policy as the Serve app's canary candidate.

The Serve app reads its candidate from its settings (:class:`~agentic_ray.serving.settings.ServeSettings`,
``candidate``): the ``args`` of an application in a Serve config (``serve_apps/policy.yaml``, applied with
``serve deploy``) or a settings file of its own. :func:`register_candidate` writes the candidate there (validated
as the app validates it) and always records it in ``RUN_DIR/refine/candidate.json``, so ``agentic-ray serve RUN
--candidate <its checkpoint>`` serves it too. From then on the app's canary router promotes it or rolls it back by
itself, as for a candidate deployed by hand.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from agentic_ray.serving.settings import ArmSettings, ServeSettings

__all__ = ["CANDIDATE_FILE", "register_candidate", "served_checkpoint"]

CANDIDATE_FILE = "candidate.json"


def _set_candidate(args: dict[str, Any], arm: dict[str, Any]) -> None:
    """Put ``arm`` as the candidate of one application's ``args`` (keeping its other candidate settings) and
    check the result as the app would."""
    args["candidate"] = {**(args.get("candidate") or {}), **arm}
    ServeSettings.model_validate(args)


def _stable_args(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The settings (``args``) of every application of a Serve config that has a stable arm, or the document
    itself when it is a ServeSettings file."""
    if isinstance(doc.get("applications"), list):
        return [
            a["args"]
            for a in doc["applications"]
            if isinstance(a.get("args"), dict) and "stable" in a["args"]
        ]
    return [doc]


def served_checkpoint(serve_config: str | None) -> Path | None:
    """The policy module the Serve app serves as its stable policy (the policy an update must start from), read
    from ``serve_config`` (see :func:`register_candidate`); None when there is no config.

    Raises:
        ValueError: no application with a stable arm, or applications serving different stable checkpoints.
    """
    if serve_config is None:
        return None
    doc = yaml.safe_load(Path(serve_config).read_text()) or {}
    ckpts = {ServeSettings.model_validate(a).stable.checkpoint for a in _stable_args(doc)}
    if len(ckpts) != 1:
        raise ValueError(f"{serve_config}: expected one stable checkpoint, found {sorted(ckpts)}")
    from agentic_ray.serving.policy_runner import resolve_module_dir

    return resolve_module_dir(
        ckpts.pop()
    )  # a run directory, a stage checkpoint or a module, as the app reads it


def register_candidate(run: Path, checkpoint: Path, serve_config: str | None, version: str) -> dict[str, Any]:
    """Register ``checkpoint`` as the canary candidate (see the module docstring).

    Args:
        run: the run directory (``refine/candidate.json`` is written under it).
        checkpoint: the candidate's RLModule checkpoint.
        serve_config: a Serve config YAML (every application whose ``args`` name a ``stable`` arm gets the
            candidate) or a ServeSettings YAML/JSON file; None: only ``candidate.json``.
        version: the model version the app reports for it.

    Returns:
        ``{"checkpoint", "version", "serve_config", "applications"}``.
    """
    arm = ArmSettings(checkpoint=str(Path(checkpoint).resolve()), version=version)
    entry = {"checkpoint": arm.checkpoint, "version": version}
    out: dict[str, Any] = {**entry, "serve_config": serve_config, "applications": []}
    if serve_config is not None:
        p = Path(serve_config)
        doc = yaml.safe_load(p.read_text()) or {}
        if isinstance(doc.get("applications"), list):
            for a in doc["applications"]:
                if isinstance(a.get("args"), dict) and "stable" in a["args"]:
                    _set_candidate(a["args"], entry)
                    out["applications"].append(a.get("name", ""))
            if not out["applications"]:
                raise ValueError(f"{p}: no application with a stable arm to add a candidate to")
        else:
            _set_candidate(doc, entry)
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        tmp.replace(p)
    (run / "refine").mkdir(parents=True, exist_ok=True)
    (run / "refine" / CANDIDATE_FILE).write_text(json.dumps({**out, "registered_at": time.time()}, indent=1))
    return out
