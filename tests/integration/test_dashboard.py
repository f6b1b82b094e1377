"""The dashboard, report and traces on a real tiny run (configs/tiny.yaml with the asynchronous reward pool).

The session's shared tiny run (``tiny_run`` in tests/conftest.py) is read: the data endpoints must equal ``metrics.jsonl`` and
``traces.jsonl``; a failed episode's trace carries pointer probabilities and reward layers; ``agentic-ray eval``
takes the relative path the README gives; and, in headless Chromium (Debian's ``chromium`` and
``chromium-driver``), every page draws its plots with the run's data and a failed trace opens by its id. Without
a browser the browser tests skip with the reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agentic_ray.cli import app
from agentic_ray.dashboard.app import create_app
from agentic_ray.eval.report import read_metrics
from agentic_ray.settings import load_settings
from tests.helpers.browser import (
    browser_missing,
    chromium,
    dashboard_server,
    severe_console_errors,
    wait_rendered,
)
from tests.helpers.tiny_run import TINY_REWARDS

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
REWARDS = TINY_REWARDS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def run(tiny_run) -> Path:
    return tiny_run


def _traces(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]


def _failed_with_pointers(run: Path) -> dict:
    """The last failed trace that has a step with pointer probabilities (the tiny policy is not a quality target:
    some of its failed episodes only repeat a call without entity arguments, e.g. ``user.find`` by email)."""
    failed = [t for t in _traces(run) if t["failed"] and any(s.get("pointer") for s in t["steps"])]
    assert failed, "no step of any failed episode has pointer probabilities"
    return failed[-1]


def test_endpoints_equal_the_run_files(run):
    c = TestClient(create_app(run))
    assert c.get("/api/metrics").json() == read_metrics(run / "metrics.jsonl")
    traces = _traces(run)
    summaries = c.get("/api/traces").json()
    assert [s["trace_id"] for s in summaries] == [t["trace_id"] for t in traces]
    assert [s["failed_steps"] for s in summaries] == [
        sum(st["result_code"] != "OK" for st in t["steps"]) for t in traces
    ]
    last = traces[-1]  # a trace id repeats across evaluations (same task): the latest one is found
    assert c.get(f"/api/trace/{last['trace_id']}").json() == last
    assert c.get(f"/api/trace/{last['steps'][0]['step_trace_id']}").json() == last
    assert c.get("/api/trace/not-a-trace").status_code == 404
    assert c.get("/api/state").json() == json.loads((run / "state.json").read_text())
    assert c.get("/api/expert").json() == json.loads((run / "expert.json").read_text())
    for page in ("overview", "training", "rewards", "failures"):
        panel = c.get(f"/api/page/{page}").json()
        assert panel["figures"] and all(f["data"] for f in panel["figures"].values()), page
    js = c.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000  # served from the plotly package, no CDN
    assert not re.search(r"<(script|link)[^>]+(src|href)=[\"']?(https?:)?//", c.get("/").text)


def test_rows_carry_what_the_pages_plot(run):
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "tcsr" in r]
    assert [r["env_steps"] for r in rows] == sorted(r["env_steps"] for r in rows) and rows[-1][
        "env_steps"
    ] > 0
    assert rows[0]["bc_nll_epochs"] and len(rows[0]["bc_nll_epochs"]) == 2  # tiny: 2 imitation epochs
    rl = [r for r in rows if r["stage"] != "il"]
    assert all({"execution", "plan"} <= set(r["reward_layers"]) for r in rl)
    assert all(set(r["reward_layers_norm"]) == set(r["reward_layers"]) for r in rl)
    assert all({"pending", "staleness", "duplicates", "missing"} <= set(r["reward_pool"]) for r in rl)
    assert all({"injected", "policy"} == set(r["errors"]) for r in rows)
    expert = json.loads((run / "expert.json").read_text())
    assert expert["metrics"]["episodes"] == rows[0]["episodes"]  # the same validation tasks


def test_failed_episodes_are_all_traced_with_pointer_probabilities_and_reward_layers(run):
    traces = _traces(run)
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "tcsr" in r]
    failed = [t for t in traces if t["failed"]]
    # every failed episode of every evaluation is kept (tiny: cap 32 per evaluation is never reached)
    assert len(failed) == sum(round(r["episodes"] * (1 - r["completion"])) for r in rows)
    assert {t["task_family"] for t in traces} == set(load_settings(TINY).env.family_list())
    t = _failed_with_pointers(run)
    steps_with_pointer = [s for s in t["steps"] if s.get("pointer")]
    for s in steps_with_pointer:
        for name, dist in s["pointer"].items():
            assert all(0.0 < p <= 1.0 for _, p in dist) and sum(p for _, p in dist) <= 1.0 + 1e-6
            if s["result_code"] != "INVALID_INPUT":  # greedy evaluation: the most likely choice is the call's
                assert dist[0][0] == s["args"].get(name, "(left out)"), (name, dist, s["args"])
    assert set(t["reward_layers"]) == set(REWARDS["layers"])
    assert all(len(v) == len(t["steps"]) for v in t["reward_steps"].values())
    assert all(s["top_skills"] and "gates" in s and "attention" in s for s in t["steps"])
    # the CLI prints the same trace, with the new fields
    r = CliRunner().invoke(app, ["trace", str(run), t["trace_id"]])
    assert r.exit_code == 0 and "pointer " in r.output and "reward layers: " in r.output


def test_eval_accepts_the_relative_run_path_the_readme_gives(run, monkeypatch):
    monkeypatch.chdir(run.parent.parent)  # .../runs/tiny → `agentic-ray eval runs/tiny`
    r = CliRunner().invoke(app, ["eval", "runs/tiny", "--tasks-per-family", "1"])
    assert r.exit_code == 0, r.output
    assert "completion" in r.output and "checkpoint: " in r.output


def test_report_is_self_contained_with_figures_and_tables(run):
    html = (run / "report.html").read_text()
    assert "<script>" in html and "Plotly.newPlot" in html
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']?(https?:)?//", html)  # nothing external
    figs = json.loads(html.split("const FIGS = ", 1)[1].split(";\n", 1)[0].replace("<\\/", "</"))
    assert set(figs) == {"fig-metrics", "fig-training", "fig-rewards", "fig-failures"}
    assert all(any(t.get("x") or t.get("y") for t in f["data"]) for f in figs.values())
    assert "<td>il_tcsr</td>" in html and "<th>seed target</th>" in html
    assert "&quot;completion&quot;" not in html  # tables, not JSON dumps


# ------------------------------------------------------------------------------------------------ browser
needs_browser = pytest.mark.skipif(browser_missing() is not None, reason=f"no browser: {browser_missing()}")
PAGES = {"/": 1, "/training": 1, "/rewards": 1, "/failures": 1}


@pytest.fixture(scope="module")
def served(run):
    why = browser_missing()
    if why is not None:
        print(f"browser tests skipped: {why}")
        pytest.skip(why)
    with dashboard_server(run) as url, chromium() as driver:
        yield url, driver


@needs_browser
def test_every_page_draws_its_plots_from_the_run(served):
    url, d = served
    for path, plots in PAGES.items():
        d.get(url + path)
        assert wait_rendered(d) >= plots, path
        assert severe_console_errors(d) == [], path
        assert "finished" in d.find_element("id", "status").text
    d.get(url + "/")
    wait_rendered(d)
    names = d.execute_script(
        "return document.querySelector('.js-plotly-plot').data.map(t => t.name)"
    )  # the stages, as the run recorded them
    assert {"il", "rl", "reflection"} <= set(names)


@needs_browser
def test_a_failed_trace_opens_by_its_id(served, run):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, d = served
    t = _failed_with_pointers(run)
    d.get(url + "/traces")
    WebDriverWait(d, 30).until(lambda x: x.execute_script("return document.body.dataset.traces"))
    box = d.find_element(By.ID, "trace-search")
    box.send_keys(t["trace_id"])
    d.find_element(By.CSS_SELECTOR, "#trace-form button").click()
    WebDriverWait(d, 30).until(
        lambda x: x.find_element(By.ID, "trace-view").get_attribute("data-trace-id") == t["trace_id"]
    )
    assert wait_rendered(d) >= 3  # skill probabilities, attention, gates, rewards heatmaps
    cards = d.find_elements(By.CSS_SELECTOR, "#trace-steps .step")
    assert len(cards) == len(t["steps"])
    text = d.find_element(By.ID, "trace-view").text
    assert "POINTER" in text.upper() and "TOP-K SKILLS" in text.upper() and "reward layer" in text
    assert severe_console_errors(d) == []
    # the failed-episode list links to the same viewer
    d.get(url + f"/traces?id={t['steps'][0]['step_trace_id']}")
    WebDriverWait(d, 30).until(
        lambda x: x.find_element(By.ID, "trace-view").get_attribute("data-trace-id") == t["trace_id"]
    )
