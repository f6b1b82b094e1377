"""Client-side helpers: ``/v1/act`` bodies from the domain's own objects (a :class:`Task`, an env's step trace).

A client that holds a structured goal as a :class:`~agentic_ray.domains.protocol.Task` (from a goal parser, a
ticket system, or ``domain.make_task`` in tests and benchmarks) sends it with :func:`act_body`; each executed
call goes into the transcript as :func:`transcript_entry` writes it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from agentic_ray.domains.protocol import Task

__all__ = ["act_body", "task_body", "tool_stats_body", "transcript_entry"]


def task_body(task: Task, budget: int | None = None) -> dict[str, Any]:
    """The ``task`` field of a ``/v1/act`` body."""
    r = task.request
    return {
        "request": {
            "text": r.text,
            "facts": dict(r.facts),
            "mentioned": [{"type": m.type, "id": m.id} for m in r.mentioned],
        },
        "goals": [_goal_body(g) for g in task.goals],
        "optimal_steps": task.optimal_steps,
        "budget": budget,
        "relevant": list(task.relevant),
        "family": task.family,
        "extra": _jsonable(task.extra),
        **({"short_term_window": task.short_term_window} if task.short_term_window is not None else {}),
    }


def _goal_body(goal: Any) -> dict[str, Any]:
    """A goal as a client states it: the arguments the request does not state (``Goal.hidden_args``, the env's
    ground truth) are not the client's to send."""
    d = dataclasses.asdict(goal)
    hidden = set(d.pop("hidden_args", ()))
    d["args"] = {k: v for k, v in d["args"].items() if k not in hidden}
    return _jsonable(d)


def transcript_entry(
    skill: str,
    params: dict[str, Any],
    result_code: str = "OK",
    payload: dict[str, Any] | None = None,
    fallback_used: str | None = None,
    trace_id: str | None = None,
) -> dict[str, Any]:
    """One executed call for the ``transcript`` field (``trace_id``: the decision that proposed it)."""
    return {
        "skill": skill,
        "params": _jsonable(params),
        "result_code": result_code,
        "payload": _jsonable(payload or {}),
        "fallback_used": fallback_used,
        "trace_id": trace_id,
    }


def tool_stats_body(sla: dict[str, np.ndarray], skills: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The ``tool_stats`` field from SLA arrays (``envs.masks.sla_arrays``), skipping healthy tools with no
    history."""
    out = {}
    for i, s in enumerate(skills):
        if not (sla["calls"][i] or sla["open"][i] or sla["half_open"][i]):
            continue
        out[s] = {
            "p50_ms": float(sla["p50"][i]),
            "p95_ms": float(sla["p95"][i]),
            "error_rate": float(sla["error_rate"][i]),
            "attempt_error_rate": float(sla["attempt_error_rate"][i]),
            "calls": int(sla["calls"][i]),
            "breaker": "open" if sla["open"][i] else ("half_open" if sla["half_open"][i] else "closed"),
        }
    return out


def act_body(
    domain: str,
    task: Task,
    transcript: list[dict[str, Any]] | None = None,
    budget: int | None = None,
    tool_stats: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A whole ``/v1/act`` body."""
    return {
        "domain": domain,
        "task": task_body(task, budget),
        "transcript": list(transcript or []),
        "tool_stats": dict(tool_stats or {}),
    }


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x
