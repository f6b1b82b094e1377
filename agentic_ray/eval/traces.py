"""Episode traces: what ``agentic-ray trace RUN_DIR TRACE_ID`` prints, step by step.

The evaluator appends one JSON object per evaluated episode to ``RUN_DIR/traces.jsonl``::

    {"trace_id", "episode_id", "task_family", "stage", "iteration", "completed", "reward_layers": {layer: value},
     "steps": [{"t", "skill", "args", "top_skills": [[name, prob], ...], "pointer": {slot: [[node, prob], ...]},
                "mask_reasons": {skill: [reason, ...]}, "result_code", "latency_ms", "step_trace_id",
                "attention": {relation: [[src, dst, weight], ...]}, "gates": {name: value},
                "reflection": {"root_cause", "hypothesis", "minimal_experiment"} | null}]}

A trace is found by its episode ``trace_id`` or by the gateway ``step_trace_id`` of any of its steps (the id a
user sees in an audit row or an HTTP response).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TRACES_FILE = "traces.jsonl"


def append_traces(run_dir: str | Path, traces: list[dict[str, Any]]) -> None:
    p = Path(run_dir) / TRACES_FILE
    with p.open("a") as f:
        for t in traces:
            f.write(json.dumps(t, default=_jsonable) + "\n")


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "item"):
        return x.item()
    return str(x)


def iter_traces(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    p = Path(run_dir) / TRACES_FILE
    if not p.exists():
        return
    with p.open() as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def find_trace(run_dir: str | Path, trace_id: str) -> dict[str, Any] | None:
    """The last trace whose id (or one of whose step ids) is ``trace_id``."""
    found = None
    for t in iter_traces(run_dir):
        if t.get("trace_id") == trace_id or any(
            s.get("step_trace_id") == trace_id for s in t.get("steps", [])
        ):
            found = t
    return found


def format_trace(t: dict[str, Any], top_k: int = 3) -> str:
    """Human-readable, step by step."""
    head = (
        f"trace {t.get('trace_id')}  episode {t.get('episode_id')}  family {t.get('task_family')}  "
        f"stage {t.get('stage')}  iteration {t.get('iteration')}  "
        f"{'COMPLETED' if t.get('completed') else 'NOT COMPLETED'}"
    )
    lines = [head, "=" * len(head)]
    for s in t.get("steps", []):
        lines.append(
            f"step {s.get('t')}: {s.get('skill')}({_args(s.get('args') or {})})  →  "
            f"{s.get('result_code')}  {float(s.get('latency_ms') or 0):.1f} ms  [{s.get('step_trace_id', '')}]"
        )
        top = s.get("top_skills") or []
        if top:
            lines.append("    policy: " + ", ".join(f"{n} {p:.2f}" for n, p in top[:top_k]))
        for slot, dist in (s.get("pointer") or {}).items():
            lines.append(f"    pointer {slot}: " + ", ".join(f"{n} {p:.2f}" for n, p in dist[:top_k]))
        masked = s.get("mask_reasons") or {}
        if masked:
            lines.append(
                "    masked: " + "; ".join(f"{k} ({', '.join(v)})" for k, v in sorted(masked.items()))
            )
        for rel, edges in (s.get("attention") or {}).items():
            if edges:
                best = sorted(edges, key=lambda e: -e[2])[:top_k]
                lines.append(f"    attention {rel}: " + ", ".join(f"{a}->{b} {w:.2f}" for a, b, w in best))
        gates = s.get("gates") or {}
        if gates:
            lines.append("    gates: " + ", ".join(f"{k} {v:.2f}" for k, v in gates.items()))
        refl = s.get("reflection")
        if refl:
            lines.append(
                f"    reflection: root cause {refl.get('root_cause')}; hypothesis: {refl.get('hypothesis')}; "
                f"minimal experiment: {refl.get('minimal_experiment')}"
            )
    layers = t.get("reward_layers") or {}
    if layers:
        lines.append("reward layers: " + ", ".join(f"{k} {v:+.3f}" for k, v in layers.items()))
    return "\n".join(lines)


def _args(a: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in a.items())
