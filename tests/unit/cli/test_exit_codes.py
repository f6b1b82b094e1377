"""One exit-code convention: finished 0, failed gate 3, paused 4, anything else 1."""

from __future__ import annotations

from agentic_ray.cli.exit_codes import EXIT_GATE_FAILED, EXIT_OK, EXIT_PAUSED, exit_code_for, status_line


def test_statuses_map_to_distinct_nonzero_codes_except_finished():
    assert exit_code_for("finished") == EXIT_OK == 0
    assert exit_code_for("gate_failed") == EXIT_GATE_FAILED == 3
    assert exit_code_for("paused") == EXIT_PAUSED == 4
    assert exit_code_for("running") == 1  # a run that did not get to a final status


def test_the_status_line_is_one_line_that_names_the_failed_gate():
    gates = {
        "il_tcsr_attempt0": {"value": 0.9, "threshold": 0.8, "passed": True},
        "rl_dvr": {"value": 0.5, "threshold": 0.9, "passed": False},
    }
    line = status_line("gate_failed", gates)
    assert line == "run stopped at a failed gate (rl_dvr 0.500 < 0.9): exit 3" and "\n" not in line
    assert status_line("paused").endswith("exit 4") and status_line("finished") == "run finished: exit 0"
