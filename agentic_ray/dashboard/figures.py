"""Plotly figures of a run, shared by the live dashboard and ``report.html``.

Every function takes the rows of ``metrics.jsonl`` (and, where it needs them, ``expert.json``) and returns a
Plotly figure as plain JSON (``{"data": [...], "layout": {...}}``), which the browser draws with
``Plotly.react``. Conventions:

* the x-axis is env steps (``row["env_steps"]``); gate rows (no metrics) are not plotted as points, so there are
  no gaps; imitation evaluations sit at env step 0, before any RL sampling;
* stage boundaries are dashed vertical lines at the last env step of the stage before, labelled with the stage
  that starts there; stages, layers, root causes and error codes are read from the data, never listed here;
* the seed's pass bars (:data:`SEED_TARGETS`) are green dotted lines, the scripted expert's level a grey dashed
  line and a gate's threshold a red dash-dot line on the metric it gates, with a star (passed) or a cross
  (failed) at the gate's value.

Figures are built as dicts on a grid from :func:`plotly.subplots.make_subplots`, not through
``plotly.graph_objects``: validating every trace, line and note took 1.3-3.9 s for the four run figures
(measured), against a few milliseconds as dicts, and the pipeline redraws ``report.html`` at every evaluation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from agentic_ray.keys import GATE_PREFIX, GATE_WARN_BELOW, MODALITY_KINDS

Figure = dict[str, Any]
"""A Plotly figure as JSON: ``{"data": [trace, ...], "layout": {...}}``."""

SEED_TARGETS: dict[str, tuple[str, float]] = {
    "tcsr": (">=", 0.995),
    "dvr": (">=", 0.98),
    "entity_recall_at_5": (">=", 0.95),
    "cu": (">=", 0.40),
    "spt": ("<=", 6.2),
}
"""Seed 000's pass bars of the five-metric evaluation: metric → (direction, bar)."""

METRIC_TITLES: dict[str, str] = {
    "tcsr": "TCSR (tool-call success)",
    "dvr": "DVR (DAG validity)",
    "entity_recall_at_5": "Entity Recall@5",
    "cu": "Correction Uplift",
    "spt": "SPT (steps per task)",
    "completion": "Task completion",
}
"""The metric panels, in order."""

LEARNER_TITLES: dict[str, str] = {
    "policy_loss": "policy loss",
    "vf_loss_reward": "reward critic loss",
    "vf_loss_risk": "risk critic loss",
    "mean_kl": "KL to behaviour policy",
    "beta": "β (KL coefficient)",
    "entropy": "entropy",
    "lambda_mean": "λ (TD(λ), mean)",
    "reflection_loss": "reflection loss",
}
"""Learner statistics of the training-curves page (keys of ``row["learner"]``)."""

REWARD_POOL_TITLES: dict[str, str] = {
    "pending": "pending episodes",
    "staleness": "staleness (policy versions)",
    "duplicates": "duplicate results",
    "missing": "missing layer results",
}
"""Reward-pool health panels (keys of ``row["reward_pool"]``)."""

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
INJECTED_COLOUR, POLICY_COLOUR = "#f2a541", "#c0392b"
TARGET_COLOUR, EXPERT_COLOUR, GATE_COLOUR = "#2e8b57", "#666666", "#d62728"


def eval_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluation rows (the ones with metrics); gate rows are left out."""
    return [r for r in rows if "tcsr" in r]


def stage_colours(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """A colour per stage, in order of appearance."""
    out: dict[str, str] = {}
    for r in rows:
        st = str(r.get("stage"))
        if st not in out:
            out[st] = PALETTE[len(out) % len(PALETTE)]
    return out


def stage_boundaries(rows: Sequence[dict[str, Any]]) -> list[tuple[int, str]]:
    """``(env step, stage that starts)`` where the stage changes between consecutive evaluations."""
    return [
        (_x(a), str(b.get("stage")))
        for a, b in itertools.pairwise(eval_rows(rows))
        if a.get("stage") != b.get("stage")
    ]


def gate_points(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every gate decision: ``{"name", "metric", "value", "threshold", "passed", "stage", "env_steps"}``.

    A gate row carries no env steps; it belongs to the evaluation just before it. The gated metric is the
    metric whose name is one of the gate name's ``_``-separated parts (``il_tcsr`` gates ``tcsr``).
    """
    out, x = [], 0
    for r in rows:
        if "tcsr" in r:
            x = _x(r)
        for name, g in (r.get("gates") or {}).items():
            parts = set(str(name).split("_"))
            metric = next((m for m in METRIC_TITLES if m in parts), None)
            out.append({"name": name, "metric": metric, "stage": r.get("stage"), "env_steps": x, **g})
    return out


def _x(row: dict[str, Any]) -> int:
    return int(row.get("env_steps") or 0)


def _series(ev: Sequence[dict[str, Any]], field: str) -> dict[str, list[tuple[int, float]]]:
    """``{key: [(env steps, value)]}`` of the dict column ``field`` of each evaluation row."""
    out: dict[str, list[tuple[int, float]]] = {}
    for r in ev:
        for k, v in (r.get(field) or {}).items():
            if isinstance(v, int | float) and not math.isnan(float(v)):
                out.setdefault(k, []).append((_x(r), float(v)))
    return out


class _Grid:
    """A subplot grid as figure JSON: traces, lines and notes addressed by ``(row, col)``."""

    def __init__(self, rows: int, cols: int, titles: Sequence[str], **kwargs: Any) -> None:
        from plotly.subplots import make_subplots

        base = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles), **kwargs)
        self.layout: dict[str, Any] = base.to_plotly_json()["layout"]
        self.axes: dict[tuple[int, int], tuple[str, str]] = {}
        for r in range(1, rows + 1):
            for c in range(1, cols + 1):
                sp = base.get_subplot(r, c)
                if sp is not None:
                    self.axes[(r, c)] = (sp.xaxis.plotly_name, sp.yaxis.plotly_name)
        for a in self.layout.setdefault("annotations", []):  # the subplot titles
            a["font"] = {"size": 13}
        self.layout["shapes"] = []
        self.data: list[dict[str, Any]] = []

    def _refs(self, r: int, c: int) -> tuple[str, str]:
        xa, ya = self.axes[(r, c)]
        return "x" + xa[5:], "y" + ya[5:]

    def trace(self, r: int, c: int, **trace: Any) -> None:
        xr, yr = self._refs(r, c)
        self.data.append({**trace, "xaxis": xr, "yaxis": yr})

    def line(
        self, r: int, c: int, xs: Sequence[float], ys: Sequence[float | None], name: str, **kw: Any
    ) -> None:
        """A lines+markers trace."""
        self.trace(r, c, type="scatter", mode="lines+markers", x=list(xs), y=list(ys), name=name, **kw)

    def hline(self, r: int, c: int, y: float, colour: str, dash: str, label: str, left: bool = False) -> None:
        """A horizontal line across a panel, labelled at its right end below it (``left``: at its left end,
        above it, so two lines at the same level keep readable labels)."""
        xr, yr = self._refs(r, c)
        self.layout["shapes"].append(
            {"type": "line", "xref": f"{xr} domain", "x0": 0, "x1": 1, "yref": yr, "y0": y, "y1": y,
             "line": {"color": colour, "dash": dash, "width": 1.5}}
        )  # fmt: skip
        self.layout["annotations"].append(
            {"text": label, "showarrow": False, "xref": f"{xr} domain", "x": 0 if left else 1,
             "xanchor": "left" if left else "right", "yref": yr, "y": y, "yanchor": "bottom" if left else "top",
             "font": {"color": colour, "size": 10}}
        )  # fmt: skip

    def vline(self, r: int, c: int, x: float, label: str) -> None:
        xr, yr = self._refs(r, c)
        self.layout["shapes"].append(
            {"type": "line", "xref": xr, "x0": x, "x1": x, "yref": f"{yr} domain", "y0": 0, "y1": 1,
             "line": {"color": "#999", "dash": "dash", "width": 1}}
        )  # fmt: skip
        self.layout["annotations"].append(
            {"text": label, "showarrow": False, "xref": xr, "x": x, "xanchor": "left", "yref": f"{yr} domain",
             "y": 1, "yanchor": "top", "font": {"color": "#777", "size": 10}}
        )  # fmt: skip

    def note(self, r: int, c: int, text: str) -> None:
        """A grey note in the middle of an empty panel."""
        xr, yr = self._refs(r, c)
        self.layout["annotations"].append(
            {"text": text, "showarrow": False, "xref": f"{xr} domain", "yref": f"{yr} domain", "x": 0.5, "y": 0.5,
             "font": {"color": "#888"}}
        )  # fmt: skip

    def boundaries(self, bounds: Sequence[tuple[float, str]], cells: Sequence[tuple[int, int]]) -> None:
        for x, stage in bounds:
            for r, c in cells:
                self.vline(r, c, x, stage)

    def xaxis(self, r: int, c: int, **props: Any) -> None:
        self.layout.setdefault(self.axes[(r, c)][0], {}).update(props)

    def yaxis(self, r: int, c: int, **props: Any) -> None:
        self.layout.setdefault(self.axes[(r, c)][1], {}).update(props)

    def x_title(self, r: int, c: int, text: str) -> None:
        self.xaxis(r, c, title={"text": text, "standoff": 4})

    def figure(self, height: int, **layout: Any) -> Figure:
        return {"data": self.data, "layout": {**self.layout, **base_layout(height), **layout}}


def base_layout(height: int, title: str | None = None) -> dict[str, Any]:
    """Layout every figure shares: white template, legend above the plot, room for subplot titles."""
    out: dict[str, Any] = {
        "height": height,
        "template": _template(),
        "font": {"family": "Helvetica, Arial, sans-serif", "size": 12},
        "margin": {"l": 60, "r": 30, "t": 90 if title else 60, "b": 50},
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.05, "x": 0, "xanchor": "left"},
        "hovermode": "closest",
    }
    if title:
        out["title"] = {"text": title, "x": 0.01, "y": 0.98, "yanchor": "top"}
    return out


_TEMPLATE: dict[str, Any] = {}


def _template() -> dict[str, Any]:
    if not _TEMPLATE:
        import plotly.io as pio

        _TEMPLATE.update(pio.templates["plotly_white"].to_plotly_json())
    return _TEMPLATE


def _cells(n: int, cols: int) -> list[tuple[int, int]]:
    return [(i // cols + 1, i % cols + 1) for i in range(n)]


def metrics_figure(rows: Sequence[dict[str, Any]], expert: dict[str, Any] | None = None) -> Figure:
    """The five metrics and completion over env steps: per stage, with stage boundaries, the seed's target
    bars, the scripted expert's level and gate thresholds with their decisions."""
    ev = eval_rows(rows)
    colours = stage_colours(ev)
    cells = _cells(len(METRIC_TITLES), 3)
    g = _Grid(2, 3, list(METRIC_TITLES.values()), vertical_spacing=0.22, horizontal_spacing=0.08)
    expert_m = (expert or {}).get("metrics") or {}
    gates = gate_points(rows)
    in_legend: set[str] = set()
    for (r, c), m in zip(cells, METRIC_TITLES, strict=True):
        has = False
        for stage, colour in colours.items():
            pts = [(_x(row), row[m]) for row in ev if row.get("stage") == stage and row.get(m) is not None]
            if not pts:
                continue
            has = True
            g.line(
                r, c, [p[0] for p in pts], [p[1] for p in pts], stage, legendgroup=stage,
                showlegend=stage not in in_legend, marker={"size": 7, "color": colour}, line={"color": colour},
                hovertemplate=f"{stage} · %{{x}} env steps<br>{m} %{{y:.3f}}<extra></extra>",
            )  # fmt: skip
            in_legend.add(stage)
        if not has:
            g.note(r, c, "n/a (not measured in this run)")
        if m in SEED_TARGETS:
            op, bar = SEED_TARGETS[m]
            g.hline(r, c, bar, TARGET_COLOUR, "dot", f"target {op} {bar:g}")
        if expert_m.get(m) is not None:
            g.hline(
                r, c, float(expert_m[m]), EXPERT_COLOUR, "dash", f"expert {float(expert_m[m]):.3f}", left=True
            )
        for gp in (gp for gp in gates if gp["metric"] == m):
            if gp.get("threshold") is not None:
                g.hline(
                    r,
                    c,
                    float(gp["threshold"]),
                    GATE_COLOUR,
                    "dashdot",
                    f"gate {gp['name']} {gp['threshold']:g}",
                )
            ok = bool(gp.get("passed"))
            g.trace(
                r, c, type="scatter", mode="markers", x=[gp["env_steps"]], y=[gp.get("value")], name="gate",
                showlegend=False, marker={"symbol": "star" if ok else "x", "size": 13, "color": GATE_COLOUR},
                hovertemplate=f"gate {gp['name']}: {'passed' if ok else 'FAILED'}<br>value %{{y:.3f}} vs "
                f"{gp.get('threshold')}<extra></extra>",
            )  # fmt: skip
        g.x_title(r, c, "env steps")
        if m == "cu":
            g.yaxis(r, c, range=[-1.05, 1.05])
        elif m != "spt":
            g.yaxis(r, c, range=[-0.05, 1.08])
    g.boundaries(stage_boundaries(rows), cells)
    return g.figure(660)


GATE_KEYS: tuple[str, ...] = tuple(GATE_PREFIX + k for k in MODALITY_KINDS)
"""The multimodal encoder's mean gates (keys of ``row["learner"]``), one panel with the warning level."""


def training_figure(rows: Sequence[dict[str, Any]]) -> Figure:
    """Imitation loss per epoch, then the learner's curves over env steps (policy loss, both critics' losses,
    KL, β, entropy, λ and the reflection loss), and the multimodal encoder's per-modality gates with the level
    below which a modality's encoder counts as unused."""
    ev = eval_rows(rows)
    learner = _series(ev, "learner")
    gates_title = f"modality gates (mean; below {GATE_WARN_BELOW:g}: encoder unused)"
    titles = ["imitation loss (NLL per epoch)", *LEARNER_TITLES.values(), gates_title]
    cells = _cells(len(titles), 3)
    g = _Grid(cells[-1][0], 3, titles, vertical_spacing=0.1, horizontal_spacing=0.08)
    il = [r for r in ev if r.get("bc_nll_epochs")]
    for k, attempt in enumerate(il):
        nll = attempt["bc_nll_epochs"]
        g.line(
            1, 1, range(1, len(nll) + 1), nll, f"imitation attempt {attempt.get('iteration')}", showlegend=False,
            line={"color": PALETTE[k % len(PALETTE)]}, hovertemplate="epoch %{x}<br>NLL %{y:.4f}<extra></extra>",
        )  # fmt: skip
    if not il:
        g.note(1, 1, "no imitation stage in this run")
    g.x_title(1, 1, "epoch")
    colours = stage_colours(ev)
    stage_at = {_x(r): str(r.get("stage")) for r in ev}
    for (r, c), key in zip(cells[1:-1], LEARNER_TITLES, strict=True):
        pts = learner.get(key, [])
        if pts:
            g.line(
                r, c, [p[0] for p in pts], [p[1] for p in pts], key, showlegend=False, line={"color": "#555"},
                marker={"size": 7, "color": [colours.get(stage_at.get(p[0], ""), "#555") for p in pts]},
                hovertemplate=f"%{{x}} env steps<br>{key} %{{y:.4g}}<extra></extra>",
            )  # fmt: skip
        else:
            g.note(r, c, "not logged in this run")
        g.x_title(r, c, "env steps")
    r, c = cells[-1]
    gates = [(key, learner.get(key, [])) for key in GATE_KEYS]
    for k, (key, pts) in enumerate(gates):
        if pts:
            g.line(
                r, c, [p[0] for p in pts], [p[1] for p in pts], key, line={"color": PALETTE[k]},
                hovertemplate=f"%{{x}} env steps<br>{key} %{{y:.3f}}<extra></extra>",
            )  # fmt: skip
    if any(pts for _k, pts in gates):
        g.hline(r, c, GATE_WARN_BELOW, POLICY_COLOUR, "dash", "unused below")
        g.yaxis(r, c, range=[0, 1])
    else:
        g.note(r, c, "no multimodal encoder in this run")
    g.x_title(r, c, "env steps")
    g.boundaries(stage_boundaries(rows), cells[1:])
    return g.figure(1050)


def rewards_figure(rows: Sequence[dict[str, Any]]) -> Figure:
    """Reward layers per evaluation, raw and normalised, over env steps, and the reward pool's health."""
    ev = eval_rows(rows)
    raw, norm, pool = (
        _series(ev, "reward_layers"),
        _series(ev, "reward_layers_norm"),
        _series(ev, "reward_pool"),
    )
    titles = [
        "reward layers, raw (mean episode total over the last training episodes)",
        "reward layers, normalised (the same episodes)",
        *REWARD_POOL_TITLES.values(),
    ]
    specs = [[{"colspan": 2}, None], [{"colspan": 2}, None], [{}, {}], [{}, {}]]
    g = _Grid(
        4,
        2,
        titles,
        specs=specs,
        vertical_spacing=0.1,
        horizontal_spacing=0.1,
        row_heights=[0.3, 0.3, 0.2, 0.2],
    )
    layers = sorted(set(raw) | set(norm))
    colour = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(layers)}
    for row, data in ((1, raw), (2, norm)):
        for name in layers:
            pts = data.get(name, [])
            if pts:
                g.line(
                    row, 1, [p[0] for p in pts], [p[1] for p in pts], name, legendgroup=name,
                    showlegend=row == 1 or name not in raw, line={"color": colour[name]},
                    marker={"color": colour[name]},
                    hovertemplate=f"{name}<br>%{{x}} env steps: %{{y:.4g}}<extra></extra>",
                )  # fmt: skip
        if not any(data.values()):
            g.note(row, 1, "no layered rewards logged (the run trains on the env's L1 reward only)")
        g.x_title(row, 1, "env steps")
    pool_cells = [(3, 1), (3, 2), (4, 1), (4, 2)]
    for (r, c), key in zip(pool_cells, REWARD_POOL_TITLES, strict=True):
        pts = pool.get(key, [])
        if pts:
            g.line(
                r, c, [p[0] for p in pts], [p[1] for p in pts], key, showlegend=False, line={"color": "#555"},
                hovertemplate=f"{key}<br>%{{x}} env steps: %{{y:.4g}}<extra></extra>",
            )  # fmt: skip
        else:
            g.note(r, c, "no reward pool in this run")
        g.x_title(r, c, "env steps")
    g.boundaries(stage_boundaries(rows), [(1, 1), (2, 1), *pool_cells])
    return g.figure(760)


def failures_figure(rows: Sequence[dict[str, Any]]) -> Figure:
    """Failure attribution: failed calls by error code (injected faults apart from the policy's own errors) and
    failed episodes by root cause (those whose every failed call was an injected fault, apart), in the latest
    evaluation and over env steps."""
    ev = eval_rows(rows)
    last = ev[-1] if ev else {}
    g = _Grid(
        2, 2, [
            "failed calls by error code (latest evaluation)",
            "failed episodes by root cause (latest evaluation)",
            "failed calls over training: injected vs policy",
            "failed episodes over training, by root cause",
        ],
        vertical_spacing=0.22, horizontal_spacing=0.25,
    )  # fmt: skip
    errors = last.get("errors") or {}
    inj, own = errors.get("injected") or {}, errors.get("policy") or {}
    codes = sorted(set(inj) | set(own), key=lambda k: -(inj.get(k, 0) + own.get(k, 0)))
    for name, counts, colour in (
        ("injected fault", inj, INJECTED_COLOUR),
        ("policy error", own, POLICY_COLOUR),
    ):
        g.trace(
            1, 1, type="bar", orientation="h", y=codes, x=[counts.get(k, 0) for k in codes], name=name,
            legendgroup=name, marker={"color": colour}, hovertemplate=f"{name}<br>%{{y}}: %{{x}}<extra></extra>",
        )  # fmt: skip
    if not codes:
        g.note(1, 1, "no failed calls")
    causes = last.get("root_causes") or {}
    cause_inj = last.get("root_causes_injected") or {}
    names = sorted(causes, key=lambda k: -causes[k])
    for name, vals, colour in (
        ("injected fault", [cause_inj.get(k, 0) for k in names], INJECTED_COLOUR),
        ("policy error", [causes[k] - cause_inj.get(k, 0) for k in names], POLICY_COLOUR),
    ):
        g.trace(
            1, 2, type="bar", orientation="h", y=names, x=vals, name=name, legendgroup=name, showlegend=False,
            marker={"color": colour}, hovertemplate=f"{name}<br>%{{y}}: %{{x}} episodes<extra></extra>",
        )  # fmt: skip
    if not names:
        g.note(1, 2, "no failed episodes")
    xs = [_x(r) for r in ev]
    for name, key, colour in (
        ("injected fault", "injected", INJECTED_COLOUR),
        ("policy error", "policy", POLICY_COLOUR),
    ):
        ys = [sum(((r.get("errors") or {}).get(key) or {}).values()) for r in ev]
        g.line(
            2, 1, xs, ys, name, legendgroup=name, showlegend=False, line={"color": colour}, marker={"color": colour},
            hovertemplate=f"{name}<br>%{{x}} env steps: %{{y}} failed calls<extra></extra>",
        )  # fmt: skip
    for i, cause in enumerate(sorted({k for r in ev for k in (r.get("root_causes") or {})})):
        colour = PALETTE[(i + 3) % len(PALETTE)]
        g.line(
            2, 2, xs, [(r.get("root_causes") or {}).get(cause, 0) for r in ev], cause, line={"color": colour},
            marker={"color": colour}, hovertemplate=f"{cause}<br>%{{x}} env steps: %{{y}} episodes<extra></extra>",
        )  # fmt: skip
    g.x_title(1, 1, "failed calls")
    g.x_title(1, 2, "episodes")
    for r, c in ((1, 1), (1, 2)):
        g.yaxis(r, c, automargin=True, type="category")
    for r, c in ((2, 1), (2, 2)):
        g.x_title(r, c, "env steps")
    g.boundaries(stage_boundaries(rows), [(2, 1), (2, 2)])
    return g.figure(720, barmode="stack")


# ---------------------------------------------------------------------------------------------- trace views
def _heatmap(z: list[list[float | None]], x: list[str], y: list[str], title: str, **trace: Any) -> Figure:
    """One heatmap: rows ``y`` (names from the trace), columns = steps ``x``; empty cells are gaps."""
    trace = {"colorscale": "Blues", "reversescale": True, "zmin": 0.0, "zmax": 1.0, **trace}  # dark = high
    layout = base_layout(180 + 26 * len(y), title)
    layout["margin"] = {"l": 10, "r": 20, "t": 44, "b": 10}
    layout["title"] = {
        "text": title,
        "x": 0.01,
        "xanchor": "left",
        "y": 0.99,
        "yref": "container",
        "yanchor": "top",
    }
    return {
        "data": [
            {"type": "heatmap", "z": z, "x": x, "y": y, "hoverongaps": False, "xgap": 1, "ygap": 1,
             "colorbar": {"thickness": 12, "len": 1.0}, "hovertemplate": "%{y}<br>step %{x}: %{z:.3f}<extra></extra>",
             **trace}
        ],
        "layout": {
            **layout,
            "xaxis": {"type": "category", "title": {"text": "step: skill called", "standoff": 6}, "automargin": True,
                      "tickangle": -30},
            "yaxis": {"type": "category", "automargin": True, "autorange": "reversed"},
        },
    }  # fmt: skip


def trace_figures(trace: dict[str, Any]) -> dict[str, Figure]:
    """Heatmaps of one episode: skill probabilities per step, attention per relation, gate values, and the
    reward layers per step. Keys: ``skills``, ``attention:<relation>``, ``gates`` and ``rewards`` (those with
    data)."""
    steps = trace.get("steps", [])
    xs = [f"{s.get('t')}: {s.get('skill')}" for s in steps]
    out: dict[str, Figure] = {}
    skills = sorted({n for s in steps for n, _ in s.get("top_skills") or []})
    if skills:
        z = [[dict(s.get("top_skills") or []).get(k) for s in steps] for k in skills]
        out["skills"] = _heatmap(z, xs, skills, "policy: top-k skill probabilities per step")
    for rel in sorted({r for s in steps for r in s.get("attention") or {}}):
        weights = [{f"{a} → {b}": w for a, b, w in (s.get("attention") or {}).get(rel, [])} for s in steps]
        edges = sorted({e for w in weights for e in w})
        z = [[w.get(e) for w in weights] for e in edges]
        out[f"attention:{rel}"] = _heatmap(z, xs, edges, f"attention · {rel} (top edges, last layer)")
    gates = sorted({k for s in steps for k in s.get("gates") or {}})
    if gates:
        z = [[(s.get("gates") or {}).get(k) for s in steps] for k in gates]
        out["gates"] = _heatmap(z, xs, gates, "gate values per relation (mean over destination nodes)")
    layers = sorted(trace.get("reward_steps") or {})
    if layers:
        z = [list(trace["reward_steps"][k]) for k in layers]
        top = max([abs(v) for row in z for v in row if v is not None] or [1.0]) or 1.0
        out["rewards"] = _heatmap(
            z,
            xs,
            layers,
            "reward layers per step (raw)",
            colorscale="RdBu",
            reversescale=False,
            zmid=0.0,
            zmin=-top,
            zmax=top,
        )
    return out
