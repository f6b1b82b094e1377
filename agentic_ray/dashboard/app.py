"""The dashboard's web app (FastAPI): pages, their data as JSON, and Plotly's JS served from its own package.

Pages: ``/`` (metrics), ``/training``, ``/rewards``, ``/failures`` and ``/traces`` (the trace viewer,
``/traces?id=TRACE_ID`` opens one). Each page polls ``/api/status`` and redraws when the run has written more,
so it follows a run while it trains and works the same on a finished one. Nothing is loaded from a CDN.

Data endpoints (the tests compare them with the run's files):

* ``/api/metrics``: every row of ``metrics.jsonl``; ``/api/traces``: one summary per trace of ``traces.jsonl``;
  ``/api/trace/{id}``: one trace, by episode or step trace id; ``/api/state``, ``/api/expert``.
* ``/api/page/{page}``: the page's tables and figures; ``/api/trace/{id}/figures``: the trace's heatmaps.
"""

from __future__ import annotations

import html
import threading
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from agentic_ray.dashboard.figures import trace_figures
from agentic_ray.dashboard.panels import PAGES, page_panel
from agentic_ray.dashboard.run_data import RunData

STATIC = Path(str(files("agentic_ray.dashboard") / "static"))
NAV = {**PAGES, "traces": "Traces"}
FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    b'fill="#1f77b4"/><path d="M3 12 L7 6 L10 9 L13 4" stroke="#fff" stroke-width="2" fill="none"/></svg>'
)
ROUTES = {
    "overview": "/",
    "training": "/training",
    "rewards": "/rewards",
    "failures": "/failures",
    "traces": "/traces",
}


def plotly_js_path() -> Path:
    """``plotly.min.js`` as shipped inside the plotly Python package (no network)."""
    return Path(str(files("plotly") / "package_data" / "plotly.min.js"))


def page_html(page: str, run_name: str) -> str:
    """The HTML shell of one page; ``dashboard.js`` fills it from the API."""
    nav = "".join(
        f'<a href="{ROUTES[p]}" class="{"active" if p == page else ""}">{html.escape(t)}</a>'
        for p, t in NAV.items()
    )
    if page == "traces":
        main = (
            '<div class="traces-layout"><aside class="trace-list">'
            '<form id="trace-form"><input id="trace-search" placeholder="trace id or step trace id" '
            'autocomplete="off"><button type="submit">Find</button></form>'
            '<select id="all-traces"></select><div id="failed-traces"></div></aside>'
            '<div><div id="trace-error"></div><div id="trace-view"><p class="muted">Pick a failed episode on the '
            "left, or find one by its trace id.</p></div></div></div>"
        )
    else:
        main = '<div id="panel-head"></div><div id="figures"></div><div id="panel-html"></div>'
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>agentic-ray · {html.escape(run_name)} · {html.escape(NAV[page])}</title>"
        '<link rel="stylesheet" href="/static/dashboard.css"><script src="/static/plotly.min.js"></script>'
        f'</head><body data-page="{page}"><header><h1>agentic-ray <span class="run" id="run-name">'
        f'{html.escape(run_name)}</span></h1><nav>{nav}</nav><div id="status"></div></header>'
        f'<main>{main}</main><script src="/static/dashboard.js"></script></body></html>'
    )


class _PanelCache:
    """Page panels rebuilt only when the run has written more (figures cost ~0.1 s each to build)."""

    def __init__(self, data: RunData) -> None:
        self.data = data
        self.lock = threading.Lock()
        self.cache: dict[str, tuple[Any, dict[str, Any]]] = {}

    def get(self, page: str) -> dict[str, Any]:
        st = self.data.status()
        version = (st["metrics_rows"], st["traces"], st["expert"], st["status"], st["iteration"])
        with self.lock:
            hit = self.cache.get(page)
            if hit is not None and hit[0] == version:
                return hit[1]
            panel = page_panel(
                page, self.data.metrics(), self.data.state(), self.data.expert(), self.data.trace_summaries()
            )
            self.cache[page] = (version, panel)
            return panel


def create_app(run_dir: str | Path) -> FastAPI:
    """The dashboard of ``run_dir`` (a finished run, or one still training)."""
    data = RunData(run_dir)
    panels = _PanelCache(data)
    app = FastAPI(title="agentic-ray dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    name = Path(run_dir).name

    def page_route(page: str) -> None:
        @app.get(ROUTES[page], response_class=HTMLResponse, name=page)
        def _page() -> str:
            return page_html(page, name)

    for p in NAV:
        page_route(p)

    @app.get("/favicon.ico")
    def _favicon() -> Response:
        return Response(FAVICON, media_type="image/svg+xml")

    @app.get("/static/plotly.min.js")
    def _plotly() -> FileResponse:
        return FileResponse(plotly_js_path(), media_type="application/javascript")

    @app.get("/static/{asset}")
    def _static(asset: str) -> FileResponse:
        path = STATIC / asset
        if asset not in {"dashboard.js", "dashboard.css"} or not path.is_file():
            raise HTTPException(404, f"no asset {asset}")
        return FileResponse(path)

    @app.get("/api/status")
    def _status() -> dict[str, Any]:
        return data.status()

    @app.get("/api/metrics")
    def _metrics() -> list[dict[str, Any]]:
        return data.metrics()

    @app.get("/api/state")
    def _state() -> dict[str, Any]:
        return data.state()

    @app.get("/api/expert")
    def _expert() -> Any:
        return data.expert()

    @app.get("/api/traces")
    def _traces() -> list[dict[str, Any]]:
        return data.trace_summaries()

    @app.get("/api/trace/{trace_id}")
    def _trace(trace_id: str) -> dict[str, Any]:
        t = data.trace(trace_id)
        if t is None:
            raise HTTPException(404, f"no trace {trace_id} in {data.run_dir}")
        return t

    @app.get("/api/trace/{trace_id}/figures")
    def _trace_figs(trace_id: str) -> JSONResponse:
        t = data.trace(trace_id)
        if t is None:
            raise HTTPException(404, f"no trace {trace_id} in {data.run_dir}")
        return JSONResponse(trace_figures(t))

    @app.get("/api/page/{page}")
    def _page_data(page: str) -> JSONResponse:
        if page not in PAGES:
            raise HTTPException(404, f"no page {page}; pages: {list(PAGES)}")
        return JSONResponse(panels.get(page))

    return app
