"""The dashboard's and report's figures and tables from metrics rows (no Ray, no browser)."""

from __future__ import annotations

from agentic_ray.dashboard import figures as F
from agentic_ray.dashboard.panels import PAGES, page_panel

ROWS = [
    {"stage": "il", "iteration": 0, "env_steps": 0, "tcsr": 0.9, "dvr": 0.8, "cu": None, "spt": 5.0,
     "completion": 0.5, "entity_recall_at_5": None, "bc_nll_epochs": [2.0, 1.5, 1.2],
     "root_causes": {"made_up_cause": 2}, "root_causes_injected": {"made_up_cause": 1},
     "errors": {"injected": {"UPSTREAM_ERROR": 3}, "policy": {"INVALID_INPUT": 1}}},
    {"stage": "il", "iteration": 0, "gates": {"il_tcsr": {"value": 0.9, "threshold": 0.8, "passed": True}}},
    {"stage": "rl", "iteration": 1, "env_steps": 512, "tcsr": 0.95, "dvr": 0.9, "cu": None, "spt": 4.8,
     "completion": 0.6, "learner": {"policy_loss": 0.1, "mean_kl": 0.01, "beta": 0.99},
     "reward_layers": {"layer_a": -1.0}, "reward_layers_norm": {"layer_a": 0.2},
     "reward_pool": {"pending": 3, "staleness": 0.5, "duplicates": 1, "cancelled": 0, "missing": 0},
     "errors": {"injected": {"UPSTREAM_ERROR": 2}, "policy": {}}, "root_causes": {"made_up_cause": 1},
     "root_causes_injected": {"made_up_cause": 1}},
    {"stage": "rl", "iteration": 2, "env_steps": 1024, "tcsr": 0.97, "dvr": 0.92, "cu": None, "spt": 4.6,
     "completion": 0.7, "learner": {"policy_loss": 0.05, "mean_kl": 0.02, "beta": 0.98},
     "errors": {"injected": {"TOOL_TIMEOUT": 4}, "policy": {}}, "root_causes": {"made_up_cause": 2}},
    {"stage": "rl", "iteration": 2, "gates": {"rl_dvr": {"value": 0.92, "threshold": 0.9, "passed": True}}},
    {"stage": "reflection", "iteration": 1, "env_steps": 1536, "tcsr": 0.98, "dvr": 0.95, "cu": 0.1, "spt": 4.5,
     "completion": 0.75, "errors": {"injected": {"UPSTREAM_ERROR": 1}, "policy": {"NOT_FOUND": 2}},
     "root_causes": {"made_up_cause": 1, "other_cause": 1}, "root_causes_injected": {"made_up_cause": 1}},
]  # fmt: skip
EXPERT = {"metrics": {"tcsr": 0.92, "dvr": 1.0, "completion": 0.925, "spt": 4.5, "cu": None}}


def _traces(fig, axis="x"):
    return [
        t for t in fig["data"] if t.get("xaxis") == axis and t["type"] == "scatter" and t["name"] != "gate"
    ]


def test_metric_panels_plot_env_steps_without_gate_row_gaps():
    fig = F.metrics_figure(ROWS, EXPERT)
    tcsr = {t["name"]: (t["x"], t["y"]) for t in _traces(fig)}  # the first panel is TCSR
    assert tcsr == {"il": ([0], [0.9]), "rl": ([512, 1024], [0.95, 0.97]), "reflection": ([1536], [0.98])}
    assert all(None not in t["y"] for t in fig["data"] if t["type"] == "scatter")
    # CU exists only where it was measured (the reflection stage)
    cu_axis = F._Grid(2, 3, list(F.METRIC_TITLES.values())).axes[(2, 1)][0]
    cu = [t for t in fig["data"] if t.get("xaxis") == "x" + cu_axis[5:] and t["name"] != "gate"]
    assert [(t["name"], t["x"]) for t in cu] == [("reflection", [1536])]


def test_metric_panels_have_targets_expert_gates_and_stage_boundaries():
    fig = F.metrics_figure(ROWS, EXPERT)
    notes = [a["text"] for a in fig["layout"]["annotations"]]
    for text in ("target >= 0.995", "target >= 0.98", "target >= 0.95", "target >= 0.4", "target <= 6.2"):
        assert text in notes
    assert "expert 0.920" in notes and "expert 4.500" in notes
    assert "gate il_tcsr 0.8" in notes and "gate rl_dvr 0.9" in notes
    gates = [t for t in fig["data"] if t["name"] == "gate"]
    assert [(g["x"], g["y"], g["marker"]["symbol"]) for g in gates] == [
        ([0], [0.9], "star"),
        ([1024], [0.92], "star"),
    ]
    # boundaries: rl starts after the il evaluation at 0, reflection after the rl evaluation at 1024
    assert F.stage_boundaries(ROWS) == [(0, "rl"), (1024, "reflection")]
    vlines = {s["x0"] for s in fig["layout"]["shapes"] if s["x0"] == s["x1"]}
    assert vlines == {0, 1024}
    # subplot titles sit above their panel: the second row's titles are below the first row's x-axis titles
    titles = {
        a["text"]: a["y"] for a in fig["layout"]["annotations"] if a["text"] in F.METRIC_TITLES.values()
    }
    assert titles["TCSR (tool-call success)"] > titles["Correction Uplift"] + 0.35


def test_failures_figure_separates_injected_faults_and_reads_names_from_data():
    fig = F.failures_figure(ROWS)
    code_bars = [t for t in fig["data"] if t["type"] == "bar" and t["xaxis"] == "x"]
    cause_bars = [t for t in fig["data"] if t["type"] == "bar" and t["xaxis"] == "x2"]
    assert {t["name"]: dict(zip(t["y"], t["x"], strict=True)) for t in code_bars} == {
        "injected fault": {"NOT_FOUND": 0, "UPSTREAM_ERROR": 1},
        "policy error": {"NOT_FOUND": 2, "UPSTREAM_ERROR": 0},
    }
    assert {t["name"]: dict(zip(t["y"], t["x"], strict=True)) for t in cause_bars} == {
        "injected fault": {"made_up_cause": 1, "other_cause": 0},
        "policy error": {"made_up_cause": 0, "other_cause": 1},
    }
    over_time = {t["name"]: t["y"] for t in fig["data"] if t.get("xaxis") == "x3"}
    assert over_time == {"injected fault": [3, 2, 4, 1], "policy error": [1, 0, 0, 2]}


def test_training_and_reward_figures_carry_every_curve():
    fig = F.training_figure(ROWS)
    named = {t["name"]: t["y"] for t in fig["data"]}
    assert named["imitation attempt 0"] == [2.0, 1.5, 1.2]
    assert named["policy_loss"] == [0.1, 0.05] and named["beta"] == [0.99, 0.98]
    notes = [a["text"] for a in fig["layout"]["annotations"]]
    assert "not logged in this run" in notes  # e.g. the risk critic's loss is absent from these rows
    fig = F.rewards_figure(ROWS)
    ys = [(t["name"], t["x"], t["y"]) for t in fig["data"]]
    assert ("layer_a", [512], [-1.0]) in ys and ("layer_a", [512], [0.2]) in ys
    assert ("pending", [512], [3.0]) in ys and ("duplicates", [512], [1.0]) in ys


def test_every_page_panel_has_tables_not_json():
    for page in PAGES:
        panel = page_panel(page, ROWS, {"status": "running", "stage": "rl"}, EXPERT, [])
        assert panel["figures"] and "<table" in panel["head"] + panel["html"]
        assert '{"' not in panel["head"] + panel["html"]
    overview = page_panel("overview", ROWS, {}, EXPERT, [])
    assert "<td>il_tcsr</td>" in overview["html"] and "<td>&gt;= 0.995</td>" in overview["head"]


def test_trace_heatmaps_use_the_trace_names():
    trace = {
        "steps": [
            {"t": 0, "skill": "tool.a", "top_skills": [["tool.a", 0.7], ["tool.b", 0.2]],
             "attention": {"x__rel__y": [["n1", "n2", 0.6]]}, "gates": {"layer0/x__rel__y": 0.4}},
            {"t": 1, "skill": "tool.b", "top_skills": [["tool.b", 0.9]], "attention": {}, "gates": {}},
        ],
        "reward_steps": {"layer_a": [0.0, -2.0]},
    }  # fmt: skip
    figs = F.trace_figures(trace)
    assert set(figs) == {"skills", "attention:x__rel__y", "gates", "rewards"}
    sk = figs["skills"]["data"][0]
    assert sk["y"] == ["tool.a", "tool.b"] and sk["z"] == [[0.7, None], [0.2, 0.9]]
    assert figs["attention:x__rel__y"]["data"][0]["z"] == [[0.6, None]]
    assert figs["rewards"]["data"][0]["zmin"] == -2.0


def test_modality_gates_are_plotted_and_a_gate_below_the_level_is_reported():
    """Issue 30: the multimodal encoder's gates are a training panel; a gate under 0.1 is a report warning."""
    rows = [dict(r) for r in ROWS]
    rows[2] = {
        **rows[2],
        "learner": {**rows[2]["learner"], "gate_image": 0.4, "gate_text": 0.3, "gate_struct": 0.6},
    }
    rows[3] = {
        **rows[3],
        "learner": {**rows[3]["learner"], "gate_image": 0.5, "gate_text": 0.05, "gate_struct": 0.6},
    }
    fig = F.training_figure(rows)
    named = {t["name"]: t["y"] for t in fig["data"]}
    assert named["gate_image"] == [0.4, 0.5] and named["gate_text"] == [0.3, 0.05]
    assert any(a["text"] == "unused below" for a in fig["layout"]["annotations"])
    assert "no multimodal encoder in this run" in [
        a["text"] for a in F.training_figure(ROWS)["layout"]["annotations"]
    ]
    panel = page_panel("training", rows, {}, EXPERT, {}, link_traces=False)["html"]
    assert "gate_text = 0.050 &lt; 0.1: the encoder for the text modality is not used" in panel
    assert "image modality is not used" not in panel
    assert "is not used" not in page_panel("training", ROWS, {}, EXPERT, {}, link_traces=False)["html"]
