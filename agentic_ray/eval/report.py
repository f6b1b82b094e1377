"""``report.html`` for a run: each metric per stage over time, reward layers, gate values and failure causes.

Reads the run's ``metrics.jsonl`` (one JSON object per evaluation, written by the pipeline) and writes one
self-contained HTML file with inline PNG plots (matplotlib, Agg backend), so it opens anywhere offline.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

METRICS = ("tcsr", "dvr", "cu", "spt", "completion", "high_risk_share")
STAGE_COLOURS = {"il": "tab:blue", "rl": "tab:orange", "reflection": "tab:green"}


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _metric_plots(rows: list[dict[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5))
    for ax, m in zip(axes.flat, METRICS, strict=True):
        for stage, colour in STAGE_COLOURS.items():
            pts = [(i, r[m]) for i, r in enumerate(rows) if r.get("stage") == stage and r.get(m) is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), "o-", color=colour, label=stage, markersize=3)
        ax.set_title(m)
        ax.set_xlabel("evaluation #")
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    return _png(fig)


def _layer_plot(rows: list[dict[str, Any]]) -> str | None:
    layers = sorted({k for r in rows for k in (r.get("reward_layers") or {})})
    if not layers:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for layer in layers:
        pts = [
            (i, r["reward_layers"][layer])
            for i, r in enumerate(rows)
            if layer in (r.get("reward_layers") or {})
        ]
        ax.plot(*zip(*pts, strict=True), label=layer)
    ax.set_title("reward layers (mean per episode, raw)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def _cause_plot(rows: list[dict[str, Any]]) -> str | None:
    causes: Counter[str] = Counter()
    for r in rows:
        causes.update(r.get("root_causes") or {})
    if not causes:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    names, counts = zip(*causes.most_common(), strict=True)
    ax.barh(names, counts, color="tab:red")
    ax.set_title("failure root causes (all evaluations)")
    return _png(fig)


def write_report(run_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write ``run_dir/report.html`` from ``run_dir/metrics.jsonl``; returns its path."""
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    parts = [f"<h1>agentic-ray run: {html.escape(run_dir.name)}</h1>"]
    if not rows:
        parts.append("<p>No evaluations recorded yet.</p>")
    else:
        parts.append(f'<h2>Metrics per stage</h2><img src="data:image/png;base64,{_metric_plots(rows)}"/>')
        lp = _layer_plot(rows)
        if lp:
            parts.append(f'<h2>Reward layers</h2><img src="data:image/png;base64,{lp}"/>')
        cp = _cause_plot(rows)
        if cp:
            parts.append(f'<h2>Failure causes</h2><img src="data:image/png;base64,{cp}"/>')
        gates = [(r.get("stage"), g, v) for r in rows for g, v in (r.get("gates") or {}).items()]
        if gates:
            parts.append(
                "<h2>Gates</h2><table border=1 cellpadding=4><tr><th>stage</th><th>gate</th><th>value</th></tr>"
            )
            parts += [
                f"<tr><td>{s}</td><td>{html.escape(str(g))}</td><td>{html.escape(json.dumps(v))}</td></tr>"
                for s, g, v in gates
            ]
            parts.append("</table>")
        last = rows[-1]
        parts.append("<h2>Final evaluation</h2><pre>" + html.escape(json.dumps(last, indent=2)) + "</pre>")
    if extra:
        parts.append(
            "<h2>Run summary</h2><pre>" + html.escape(json.dumps(extra, indent=2, default=str)) + "</pre>"
        )
    out = run_dir / "report.html"
    out.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>agentic-ray report</title></head><body>"
        + "\n".join(parts)
        + "</body></html>"
    )
    return out
