from __future__ import annotations

import json

from agentic_ray.eval.report import read_metrics, write_report


def test_report_has_plots_gates_and_causes(tmp_path):
    rows = [
        {
            "stage": "il",
            "tcsr": 0.5,
            "dvr": 0.6,
            "cu": None,
            "spt": 9,
            "completion": 0.3,
            "high_risk_share": 0.1,
            "gates": {"il_tcsr>=0.8": {"value": 0.5, "passed": False}},
            "root_causes": {"tool_timeout": 3},
        },
        {
            "stage": "rl",
            "tcsr": 0.9,
            "dvr": 0.95,
            "cu": None,
            "spt": 6,
            "completion": 0.8,
            "high_risk_share": 0.02,
            "reward_layers": {"l1": 0.5, "l2": 0.7},
            "root_causes": {"bad_parameters": 1},
        },
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert read_metrics(tmp_path / "metrics.jsonl") == rows
    html = write_report(tmp_path).read_text()
    assert html.count("data:image/png;base64,") == 3  # metrics, reward layers, causes
    assert "il_tcsr&gt;=0.8" in html and "Final evaluation" in html and "&quot;completion&quot;: 0.8" in html


def test_report_without_metrics(tmp_path):
    assert "No evaluations" in write_report(tmp_path).read_text()
