"""``report.html``: the dashboard's pages in one self-contained file, rewritten at every evaluation.

It holds the same tables and Plotly figures as ``agentic-ray dashboard`` (see
:mod:`agentic_ray.dashboard.panels`): metrics over env steps with stage boundaries, gates, the seed's target bars
and the scripted expert's level; the training curves; the reward layers and the reward pool's health; failure
attribution with injected faults apart; and the failed episodes' trace ids. Plotly's JS is inlined from the
plotly package, so the file opens anywhere offline.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"
EXPERT_FILE = "expert.json"
REPORT_FILE = "report.html"


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def _script_json(x: Any) -> str:
    """JSON safe inside a ``<script>`` element."""
    return json.dumps(x, default=float).replace("</", "<\\/")


def write_report(run_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write ``run_dir/report.html`` from the run's files; returns its path.

    Args:
        run_dir: the run directory.
        extra: the run's summary (status, gates) when ``state.json`` is not written yet or lags behind.
    """
    from agentic_ray.dashboard.app import STATIC, plotly_js_path
    from agentic_ray.dashboard.panels import PAGES, page_panel, section, table
    from agentic_ray.dashboard.run_data import RunData

    run_dir = Path(run_dir)
    data = RunData(run_dir)
    rows, state, expert = data.metrics(), {**(extra or {}), **data.state()}, data.expert()
    body = [
        f"<header><h1>agentic-ray report <span class='run'>{html.escape(run_dir.name)}</span></h1></header>"
    ]
    figures: dict[str, Any] = {}
    if not any("tcsr" in r for r in rows):
        body.append("<main><section><p>No evaluations recorded yet.</p></section></main>")
    else:
        body.append("<main>")
        summaries = data.trace_summaries()
        for page, title in PAGES.items():
            panel = page_panel(page, rows, state, expert, summaries, link_traces=False)
            body.append(f"<h2>{html.escape(title)}</h2>{panel['head']}")
            for fid, fig in panel["figures"].items():
                body.append(f'<div class="figure" id="fig-{fid}"></div>')
                figures[f"fig-{fid}"] = fig
            body.append(panel["html"])
        settings = data.settings()
        if settings:
            flat = _flatten(
                {k: settings[k] for k in ("name", "seed", "stages", "eval", "algo") if k in settings}
            )
            body.append(
                section("Settings (excerpt; all in settings.json)", table(["setting", "value"], flat))
            )
        body.append("</main>")
    css = (STATIC / "dashboard.css").read_text()
    draw = (
        "<script>const FIGS = " + _script_json(figures) + ";\n"
        "for (const [id, f] of Object.entries(FIGS)) { const d = document.getElementById(id); "
        "d.style.height = f.layout.height + 'px'; "
        "Plotly.newPlot(d, f.data, f.layout, {displaylogo: false, responsive: true}); }</script>"
    )
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>agentic-ray report · {html.escape(run_dir.name)}</title><style>{css}</style>"
        f"<script>{plotly_js_path().read_text()}</script></head><body>"
        + "\n".join(body)
        + draw
        + "</body></html>"
    )
    out = run_dir / REPORT_FILE
    tmp = run_dir / (REPORT_FILE + ".tmp")
    tmp.write_text(doc)
    os.replace(tmp, out)  # a browser reloading the report mid-write sees the old or the new one
    return out


def _flatten(d: dict[str, Any], prefix: str = "") -> list[list[Any]]:
    out: list[list[Any]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += _flatten(v, key + ".")
        else:
            out.append([key, json.dumps(v) if isinstance(v, dict | list) else v])
    return out
