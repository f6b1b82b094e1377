from __future__ import annotations

import json
import re

from agentic_ray.eval.report import read_metrics, write_report


def _figures(html: str) -> dict:
    return json.loads(html.split("const FIGS = ", 1)[1].split(";\n", 1)[0].replace("<\\/", "</"))


def test_report_has_the_dashboards_figures_and_tables(tmp_path):
    rows = [
        {"stage": "il", "iteration": 0, "env_steps": 0, "tcsr": 0.5, "dvr": 0.6, "cu": None, "spt": 9,
         "completion": 0.3, "high_risk_share": 0.1, "root_causes": {"tool_timeout": 3},
         "errors": {"injected": {"UPSTREAM_ERROR": 3}, "policy": {}}, "root_causes_injected": {"tool_timeout": 3}},
        {"stage": "il", "iteration": 0, "gates": {"il_tcsr": {"value": 0.5, "threshold": 0.8, "passed": False}}},
        {"stage": "rl", "iteration": 1, "env_steps": 512, "tcsr": 0.9, "dvr": 0.95, "cu": None, "spt": 6,
         "completion": 0.8, "high_risk_share": 0.02, "reward_layers": {"l1": 0.5, "l2": 0.7},
         "root_causes": {"bad_parameters": 1}, "errors": {"injected": {}, "policy": {"INVALID_INPUT": 1}}},
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "expert.json").write_text(json.dumps({"metrics": {"tcsr": 0.92, "completion": 0.925}}))
    assert read_metrics(tmp_path / "metrics.jsonl") == rows
    html = write_report(tmp_path).read_text()
    figs = _figures(html)
    assert set(figs) == {"fig-metrics", "fig-training", "fig-rewards", "fig-failures"}
    tcsr = {
        t["name"]: (t["x"], t["y"])
        for t in figs["fig-metrics"]["data"]
        if t["xaxis"] == "x" and t["name"] != "gate"
    }
    assert tcsr == {"il": ([0], [0.5]), "rl": ([512], [0.9])}  # env steps on x, the gate row is no point
    notes = {a["text"] for a in figs["fig-metrics"]["layout"]["annotations"]}
    assert {"target >= 0.995", "expert 0.920", "gate il_tcsr 0.8"} <= notes
    assert "<td>il_tcsr</td>" in html and "<td>no</td>" in html  # the failed gate, as a table row
    assert "<td>INVALID_INPUT</td><td>0</td><td>1</td>" in html  # latest: one policy error, no injected fault
    assert "&quot;completion&quot;" not in html and '{"value"' not in html  # tables, not JSON
    assert not re.search(r"<(script|link)[^>]+(src|href)=", html)  # Plotly's JS is inline


def test_report_without_metrics(tmp_path):
    assert "No evaluations" in write_report(tmp_path).read_text()
