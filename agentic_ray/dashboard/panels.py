"""The content of each dashboard page, shared with ``report.html``: HTML tables and Plotly figures.

:func:`page_panel` turns the run's data (metrics rows, state, expert, trace summaries) into
``{"head": html, "html": html, "figures": {id: figure}}`` for one page (summary tables, then the figures, then
the detail tables). The dashboard serves it as JSON and the browser
draws it; the report concatenates every page into one file.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from agentic_ray.dashboard.figures import (
    METRIC_TITLES,
    SEED_TARGETS,
    Figure,
    eval_rows,
    failures_figure,
    gate_points,
    metrics_figure,
    rewards_figure,
    training_figure,
)
from agentic_ray.keys import GATE_PREFIX, GATE_WARN_BELOW

PAGES: dict[str, str] = {
    "overview": "Metrics",
    "training": "Training curves",
    "rewards": "Rewards",
    "failures": "Failures",
}
"""Page id → title, in navigation order (the trace viewer is a page of its own)."""


def fmt(v: Any) -> str:
    """A table cell: floats to 3 decimals, None as n/a, booleans as yes/no, lists joined."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, list | tuple):
        return ", ".join(map(fmt, v)) or "-"
    return str(v)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    """An HTML table; cells are escaped unless they are :class:`Raw`."""

    def cell(v: Any) -> str:
        return v.html if isinstance(v, Raw) else html.escape(fmt(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class Raw:
    """Trusted HTML for a table cell (a link we built)."""

    def __init__(self, html_text: str) -> None:
        self.html = html_text


def section(title: str, body: str) -> str:
    return f"<section><h3>{html.escape(title)}</h3>{body}</section>"


def _latest_per_stage(rows: Sequence[dict[str, Any]], having: str | None = None) -> dict[str, dict[str, Any]]:
    """The last evaluation row of each stage (with a non-empty ``having`` field, if given)."""
    out: dict[str, dict[str, Any]] = {}
    for r in eval_rows(rows):
        if having is None or r.get(having):
            out[str(r.get("stage"))] = r
    return out


def _meets(metric: str, value: Any) -> Any:
    if metric not in SEED_TARGETS or value is None:
        return None
    op, bar = SEED_TARGETS[metric]
    return value >= bar if op == ">=" else value <= bar


def overview_html(
    rows: Sequence[dict[str, Any]], state: dict[str, Any], expert: dict[str, Any] | None
) -> tuple[str, str]:
    """Run status and the latest metrics of each stage against the expert and the seed's bars (shown above the
    figure), and the gates (below it)."""
    run = table(
        ["status", "stage", "iteration", "env steps", "completed stages", "evaluations"],
        [
            [
                state.get("status", "starting"),
                state.get("stage") or "-",
                state.get("iteration"),
                state.get("env_steps"),
                state.get("completed") or [],
                len(eval_rows(rows)),
            ]
        ],
    )
    latest = _latest_per_stage(rows)
    em = (expert or {}).get("metrics") or {}
    metric_keys = [*METRIC_TITLES, "spt_over_optimal", "high_risk_share", "entities_past_cap"]
    final = list(latest.values())[-1] if latest else {}
    body = []
    for m in metric_keys:
        target = SEED_TARGETS.get(m)
        body.append(
            [
                METRIC_TITLES.get(m, m),
                *[latest[s].get(m) for s in latest],
                em.get(m) if expert else None,
                f"{target[0]} {target[1]:g}" if target else "-",
                _meets(m, final.get(m)),
            ]
        )
    metrics = table(
        [
            "metric",
            *[f"{s} (latest)" for s in latest],
            "scripted expert",
            "seed target",
            "latest meets target",
        ],
        body,
        "metrics",
    )
    gates = gate_points(rows)
    gate_table = (
        table(
            ["gate", "stage", "metric", "value", "threshold", "passed", "at env steps"],
            [
                [
                    g["name"],
                    g["stage"],
                    g["metric"],
                    g.get("value"),
                    g.get("threshold"),
                    g.get("passed"),
                    g["env_steps"],
                ]
                for g in gates
            ],
        )
        if gates
        else "<p>No gate decided yet.</p>"
    )
    return section("Run", run) + section("Latest metrics", metrics), section("Gates", gate_table)


def gate_warnings(learner: dict[str, Any], below: float = GATE_WARN_BELOW) -> list[str]:
    """One warning per modality whose logged mean gate (``gate_<kind>`` of a ``row["learner"]``) is below
    ``below``: the encoder of that modality is not used."""
    return [
        f"{k} = {v:.3f} < {below:g}: the encoder for the {k.removeprefix(GATE_PREFIX)} modality is not used"
        for k, v in sorted(learner.items())
        if k.startswith(GATE_PREFIX) and isinstance(v, int | float) and v < below
    ]


def training_html(rows: Sequence[dict[str, Any]]) -> str:
    latest = _latest_per_stage(rows, "learner")
    keys = sorted({k for r in latest.values() for k in (r.get("learner") or {})})
    if not keys:
        return section(
            "Learner (latest per stage)", "<p>No learner statistics yet (imitation only so far).</p>"
        )
    body = [[k, *[(latest[s].get("learner") or {}).get(k) for s in latest]] for k in keys]
    out = section("Learner (latest evaluation per stage)", table(["statistic", *latest], body))
    last = next(reversed(latest.values())).get("learner") or {}
    warned = gate_warnings(last)
    if warned:
        items = "".join(f"<li>{html.escape(w)}</li>" for w in warned)
        out = section("Warning: a modality's encoder is not used", f"<ul class='warning'>{items}</ul>") + out
    return out


def rewards_html(rows: Sequence[dict[str, Any]]) -> str:
    latest = _latest_per_stage(rows, "reward_layers")
    layers = sorted({k for r in latest.values() for k in (r.get("reward_layers") or {})})
    parts = []
    if layers:
        body = [
            [
                name,
                *[(latest[s].get("reward_layers") or {}).get(name) for s in latest],
                *[(latest[s].get("reward_layers_norm") or {}).get(name) for s in latest],
            ]
            for name in layers
        ]
        heads = ["layer", *[f"{s} raw" for s in latest], *[f"{s} normalised" for s in latest]]
        parts.append(section("Reward layers (latest evaluation per stage)", table(heads, body)))
    else:
        parts.append(section("Reward layers", "<p>No layered rewards logged (env L1 reward only).</p>"))
    latest = _latest_per_stage(rows, "reward_pool")
    health = sorted({k for r in latest.values() for k in (r.get("reward_pool") or {})})
    if health:
        body = [[k, *[(latest[s].get("reward_pool") or {}).get(k) for s in latest]] for k in health]
        parts.append(section("Reward pool health (latest per stage)", table(["counter", *latest], body)))
    return "".join(parts)


def failures_html(
    rows: Sequence[dict[str, Any]], traces: Sequence[dict[str, Any]], link_traces: bool, max_traces: int = 50
) -> str:
    """Error codes (injected vs policy) and root causes of the latest evaluation, and the failed episodes'
    traces (links to the trace viewer in the dashboard, ids for ``agentic-ray trace`` in the report)."""
    ev = eval_rows(rows)
    last = ev[-1] if ev else {}
    errors = last.get("errors") or {}
    inj, own = errors.get("injected") or {}, errors.get("policy") or {}
    codes = sorted(set(inj) | set(own), key=lambda k: -(inj.get(k, 0) + own.get(k, 0)))
    code_table = (
        table(
            ["error code", "injected fault", "policy error"],
            [[c, inj.get(c, 0), own.get(c, 0)] for c in codes],
        )
        if codes
        else "<p>No failed calls in the latest evaluation.</p>"
    )
    causes, cinj = last.get("root_causes") or {}, last.get("root_causes_injected") or {}
    cause_table = (
        table(
            ["root cause", "failed episodes", "caused by injected faults only"],
            [[c, n, cinj.get(c, 0)] for c, n in sorted(causes.items(), key=lambda kv: -kv[1])],
        )
        if causes
        else "<p>No failed episodes in the latest evaluation.</p>"
    )
    failed = [t for t in traces if t.get("failed")]
    shown = failed[-max_traces:][::-1]

    def ident(t: dict[str, Any]) -> Any:
        tid = str(t.get("trace_id"))
        if link_traces:
            return Raw(f'<a class="trace-link" href="/traces?id={html.escape(tid)}">{html.escape(tid)}</a>')
        return tid

    trace_table = (
        table(
            [
                "trace id",
                "family",
                "stage",
                "iteration",
                "env steps",
                "steps",
                "failed steps",
                "injected steps",
            ],
            [
                [
                    ident(t),
                    t.get("task_family"),
                    t.get("stage"),
                    t.get("iteration"),
                    t.get("env_steps"),
                    t.get("steps"),
                    t.get("failed_steps"),
                    t.get("injected_steps"),
                ]
                for t in shown
            ],
            "traces",
        )
        if shown
        else "<p>No failed episode traced yet.</p>"
    )
    note = "" if link_traces else "<p>Print one with <code>agentic-ray trace RUN_DIR TRACE_ID</code>.</p>"
    return (
        section("Failed calls by error code (latest evaluation)", code_table)
        + section("Root causes (latest evaluation)", cause_table)
        + section(f"Failed episodes' traces (latest {len(shown)} of {len(failed)})", note + trace_table)
    )


def page_panel(
    page: str,
    rows: Sequence[dict[str, Any]],
    state: dict[str, Any],
    expert: dict[str, Any] | None,
    traces: Sequence[dict[str, Any]],
    link_traces: bool = True,
) -> dict[str, Any]:
    """``{"head": summary above the figures, "html": tables below them, "figures": {id: figure}}`` of one page
    (a key of :data:`PAGES`).

    Args:
        page: which page.
        rows: every row of ``metrics.jsonl``.
        state: ``state.json``.
        expert: ``expert.json`` (or None before it is written).
        traces: trace summaries (:meth:`agentic_ray.dashboard.run_data.RunData.trace_summaries`).
        link_traces: link trace ids to the dashboard's trace viewer (False in the offline report).
    """
    figures: dict[str, Figure]
    head = ""
    if page == "overview":
        head, body = overview_html(rows, state, expert)
        figures = {"metrics": metrics_figure(rows, expert)}
    elif page == "training":
        body, figures = training_html(rows), {"training": training_figure(rows)}
    elif page == "rewards":
        body, figures = rewards_html(rows), {"rewards": rewards_figure(rows)}
    elif page == "failures":
        body, figures = failures_html(rows, traces, link_traces), {"failures": failures_figure(rows)}
    else:
        raise KeyError(f"unknown page {page!r}; pages: {list(PAGES)}")
    return {"head": head, "html": body, "figures": figures}
