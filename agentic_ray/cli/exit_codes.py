"""Exit codes of the ``agentic-ray`` commands, one convention for train, eval and sweep.

``ray job submit`` reports a job SUCCEEDED only when its entrypoint exits 0, so a run that stopped at a failed
gate or paused itself must not exit 0.

| code | meaning |
|---|---|
| 0 | finished |
| 1 | error (an exception, or a status this table does not know) |
| 2 | bad usage or settings (typer's own code for usage errors) |
| 3 | stopped at a failed gate (``gate_failed``) |
| 4 | paused by the auto-pause rule (``paused``) |
| 5 | finished, but a stage's policy was worse than the one it received and an earlier checkpoint went forward
(``regressed``, see :mod:`agentic_ray.stages.stage_guard`) |

A sweep exits like the worst of its trials: 1 if a trial failed with an error (or none reported metrics), else 3
if a trial (or the shared imitation run) stopped at a failed gate, else 4 if one paused, else 5 if one regressed,
else 0.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_GATE_FAILED = 3
EXIT_PAUSED = 4
EXIT_REGRESSED = 5

_BY_STATUS = {
    "finished": EXIT_OK,
    "gate_failed": EXIT_GATE_FAILED,
    "paused": EXIT_PAUSED,
    "regressed": EXIT_REGRESSED,
}


def exit_code_for(status: str) -> int:
    """The exit code of a run that ended with pipeline ``status`` (``finished`` | ``gate_failed`` | ``paused`` |
    ``regressed``)."""
    return _BY_STATUS.get(status, EXIT_ERROR)


def status_line(status: str, gates: dict[str, Any] | None = None) -> str:
    """One line saying how the run ended and with which exit code, naming the failed gate if there is one."""
    code = exit_code_for(status)
    failed = [
        f"{name} {g.get('value', float('nan')):.3f} < {g.get('threshold', float('nan'))}"
        for name, g in (gates or {}).items()
        if isinstance(g, dict) and g.get("passed") is False
    ]
    if status == "gate_failed":
        what = f"stopped at a failed gate ({failed[-1]})" if failed else "stopped at a failed gate"
    elif status == "paused":
        what = "paused by auto-pause (DVR kept declining; see diagnosis.json)"
    elif status == "regressed":
        rejected = [
            f"{name} {g['value']:.3f} < {g['baseline']} {g['threshold']:.3f}, p = {g.get('p_value', float('nan')):.3g}"
            for name, g in (gates or {}).items()
            if isinstance(g, dict) and g.get("passed") is False and "baseline" in g
        ]
        what = "finished with a stage rejected for a worse policy; the earlier checkpoint went forward" + (
            f" ({'; '.join(rejected)})" if rejected else ""
        )
    elif status == "finished":
        what = "finished"
    else:
        what = f"ended with status {status!r}"
    return f"run {what}: exit {code}"


def sweep_exit_code(ok: bool, pipeline_status: dict[str, int]) -> int:
    """The exit code of a sweep: ``ok`` is :attr:`SweepOutcome.ok`; ``pipeline_status`` counts the trials by how
    their pipeline ended (``summary.json``'s ``pipeline_status``)."""
    if not ok:
        return EXIT_ERROR
    for status in ("gate_failed", "paused", "regressed"):
        if pipeline_status.get(status):
            return exit_code_for(status)
    return EXIT_OK
