"""Episode traces: what ``agentic-ray trace RUN_DIR TRACE_ID`` prints and the dashboard's trace viewer shows.

The evaluator appends one JSON object per kept episode to ``RUN_DIR/traces.jsonl`` (a sample across families and
every failed episode up to a cap; see :func:`agentic_ray.eval.evaluator.select_traces`)::

    {"trace_id", "episode_id", "task_family", "task_seed", "stage", "iteration", "env_steps", "completed",
     "failed", "kept_as": ["sample" | "failed", ...],
     "reward_layers": {layer: episode total (raw)}, "reward_steps": {layer: [per-step value, ...]},
     "steps": [{"t", "skill", "args", "result_code", "latency_ms", "attempts", "fallback_used", "message",
                "warnings", "injected", "masked", "goals_satisfied", "step_trace_id",
                "top_skills": [[name, prob], ...], "pointer": {arg: [[node | "(left out)", prob], ...]},
                "members": {arg: [[node, prob in the set], ...]}, "enum": {arg: [[choice, prob], ...]},
                "numeric": {arg: {"mean", "sigma", "copy": [[node.field | "(free value)", prob], ...]}},
                "mask_reasons": {skill: [reason, ...]},
                "attention": {relation: [[src, dst, weight], ...]}, "gates": {name: value},
                "reflection": {"root_cause", "probs": {cause: p}, "rule_based_cause", "hypothesis",
                               "minimal_experiment"} (on failed steps the policy acted after),
                "memory": [...] (once long-term memory exists)}]}

A trace is found by its episode ``trace_id`` or by the gateway ``step_trace_id`` of any of its steps (the id a
user sees in an audit row or an HTTP response). ``injected`` marks a failure the injected fault caused, not the
policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from agentic_ray.rewards.episode_record import EpisodeRecord
    from agentic_ray.rewards.layers.base import RewardLayer
    from agentic_ray.rewards.reward_pool_config import RewardPoolConfig

TRACES_FILE = "traces.jsonl"


def trace_reward_layers(rewards: RewardPoolConfig | None, domain: str | None = None) -> list[RewardLayer]:
    """The plain reward layers (no Ray) that score traced episodes.

    The run's enabled layers with their parameters, or, when the run uses the env's synchronous reward only, the
    layers a default reward pool enables for ``domain`` (a layer off by default, such as the detection F1, stays
    off, and so does a layer whose case facts the domain does not give: help-desk has no customer complaint rate),
    with defaults. I/O layers (the LLM judge) are left out: they need a server.
    """
    from agentic_ray.rewards.layers import LAYER_CLASSES, CostClass, build_layer
    from agentic_ray.rewards.reward_pool_config import RewardPoolConfig, layers_for_context

    if rewards is None:
        rewards = RewardPoolConfig()
        if domain is not None:
            from agentic_ray.domains import get_domain

            rewards = layers_for_context(rewards, get_domain(domain).reward_context_keys, domain)
        chosen: dict[str, dict[str, Any]] = {name: {} for name, lc in rewards.layers.items() if lc.enabled}
    else:
        chosen = {name: lc.params for name, lc in rewards.layers.items() if lc.enabled}
    return [
        build_layer(name, params)
        for name, params in chosen.items()
        if LAYER_CLASSES[name].cost is not CostClass.ASYNC_IO
    ]


def score_trace_layers(record: EpisodeRecord, layers: Sequence[RewardLayer]) -> dict[str, Any]:
    """A traced episode's reward layers, raw (as the pool's scorers compute them).

    Returns:
        ``{"reward_layers": {layer: episode total}, "reward_steps": {layer: [value per step]}}``.
    """
    per_step = {layer.name: np.asarray(layer.score(record), dtype=np.float64) for layer in layers}
    return {
        "reward_layers": {n: float(v.sum()) for n, v in per_step.items()},
        "reward_steps": {n: [float(x) for x in v] for n, v in per_step.items()},
    }


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
        fault = "  (injected fault)" if s.get("injected") else ""
        lines.append(
            f"step {s.get('t')}: {s.get('skill')}({_args(s.get('args') or {})})  →  "
            f"{s.get('result_code')}{fault}  {float(s.get('latency_ms') or 0):.1f} ms  [{s.get('step_trace_id', '')}]"
        )
        top = s.get("top_skills") or []
        if top:
            lines.append("    policy: " + ", ".join(f"{n} {p:.2f}" for n, p in top[:top_k]))
        for slot, dist in (s.get("pointer") or {}).items():
            lines.append(f"    pointer {slot}: " + ", ".join(f"{n} {p:.2f}" for n, p in dist[:top_k]))
        for slot, dist in (s.get("members") or {}).items():
            lines.append(f"    members {slot}: " + ", ".join(f"{n} {p:.2f}" for n, p in dist[:top_k]))
        for slot, dist in (s.get("enum") or {}).items():
            lines.append(f"    enum {slot}: " + ", ".join(f"{n} {p:.2f}" for n, p in dist[:top_k]))
        for slot, n in (s.get("numeric") or {}).items():
            copy = ", ".join(f"{c} {p:.2f}" for c, p in (n.get("copy") or [])[:top_k])
            lines.append(
                f"    numeric {slot}: mean {n['mean']:+.3f} sigma {n['sigma']:.3f}"
                + (f"; copy {copy}" if copy else "")
            )
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
            rule = f" (rule-based: {refl['rule_based_cause']})" if refl.get("rule_based_cause") else ""
            lines.append(
                f"    reflection: root cause {refl.get('root_cause')}{rule}; hypothesis: {refl.get('hypothesis')}; "
                f"minimal experiment: {refl.get('minimal_experiment')}"
            )
    layers = t.get("reward_layers") or {}
    if layers:
        lines.append("reward layers: " + ", ".join(f"{k} {v:+.3f}" for k, v in layers.items()))
    return "\n".join(lines)


def _args(a: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in a.items())
