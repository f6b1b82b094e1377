"""One exit-code convention: finished 0, failed gate 3, paused 4, a stage rejected as worse 5, anything else 1."""

from __future__ import annotations

from agentic_ray.cli.exit_codes import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_REGRESSED,
    exit_code_for,
    status_line,
    sweep_exit_code,
)


def test_statuses_map_to_distinct_nonzero_codes_except_finished():
    assert exit_code_for("finished") == EXIT_OK == 0
    assert exit_code_for("gate_failed") == EXIT_GATE_FAILED == 3
    assert exit_code_for("paused") == EXIT_PAUSED == 4
    assert exit_code_for("regressed") == EXIT_REGRESSED == 5
    assert exit_code_for("running") == 1  # a run that did not get to a final status


def test_the_status_line_is_one_line_that_names_the_failed_gate():
    gates = {
        "il_tcsr_attempt0": {"value": 0.9, "threshold": 0.8, "passed": True},
        "rl_dvr": {"value": 0.5, "threshold": 0.9, "passed": False},
    }
    line = status_line("gate_failed", gates)
    assert line == "run stopped at a failed gate (rl_dvr 0.500 < 0.9): exit 3" and "\n" not in line
    assert status_line("paused").endswith("exit 4") and status_line("finished") == "run finished: exit 0"


def test_a_regressed_run_names_the_rejected_stage():
    gates = {
        "il_tcsr_attempt0": {"value": 0.7, "threshold": 0.8, "passed": False},
        "rl_completion": {
            "value": 0.125,
            "threshold": 0.719,
            "passed": False,
            "baseline": "il",
            "p_value": 2e-6,
        },
    }
    assert status_line("regressed", gates) == (
        "run finished with a stage rejected for a worse policy; the earlier checkpoint went forward "
        "(rl_completion 0.125 < il 0.719, p = 2e-06): exit 5"
    )
    assert sweep_exit_code(True, {"finished": 2, "regressed": 1}) == 5
    assert sweep_exit_code(True, {"paused": 1, "regressed": 1}) == 4
