"""Every command in README.md works as written.

The README's commands (each line of each ``bash`` block, and the ``python benchmarks/...`` commands of the
benchmark table) are parsed by ``tests/helpers/readme.py``. Each must match exactly one entry of ``RUNNERS``; a
command with no entry fails ``test_every_readme_command_has_a_runner``, so a new README command needs a runner
here. Runners execute the command itself with ``bash -c`` in the repository root, relative paths and all, with
only these substitutions:

* ``runs/quickstart-<time>`` and ``<trace id>`` become the run (and a trace of it) that the README's own quickstart
  command produced in this session (``quickstart_run`` fixture);
* fixed ports in the README (8265 for the Ray dashboard, 8321 for the skill server) become free ones, and
  ``ray start --head`` runs as a private head (own ports and temp dir, killed by PID: ``private_ray_head``);
* long commands get budget overrides appended (``BUDGET``): the same script and code path at a size that fits CI.
  The README's figures come from the full runs, never from these;
* the two setup commands: the test command must be exactly what ``.ci/run`` runs (so CI running at all checks
  it), and the main command's install step must be the test command's minus the test extras; its training
  command is the quickstart command run above.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agentic_ray.skills.server import free_port, stop_process_group
from tests.helpers.quickstart_run import QUICKSTART_COMMAND, CliRun, run_cli, run_dir_of
from tests.helpers.readme import README, REPO, readme_commands
from tests.integration.ray_head import private_ray_head

INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install -e "
SMALL_TRAINING = (
    " --set stages.il.demos=40 --set stages.il.epochs=2 --set stages.rl.iterations=1"
    " --set stages.reflection.iterations=1 --set eval.tasks_per_family=1"
)
BUDGET = {
    "python benchmarks/env_throughput.py": " --steps 400 --val-per-family 1",
    "python benchmarks/encoder.py": " --repeats 1",
    "python benchmarks/gpu_learner.py": " --device-only cpu --batch 64 --cpu-iters 1",
    "python benchmarks/reward_pool.py": " --steps 300 --latencies 50 --blocking-max-s 3",
    "python benchmarks/aaac_vs_ppo.py": (
        " --env-steps 300 --seeds 0 --tasks-per-family 1 --batch 64 --minibatch 32 --epochs 1 --eval-every 1"
        " --out /tmp/agray_readme_aaac_vs_ppo.md"
    ),
    "python benchmarks/rl_over_il.py --seeds 0 --methods rl_bc --iterations 6 --set rewards=null": (
        " --demos 20 --tasks 10 --iterations 1 --cu-pairs 5 --set algo.train_batch_size=128"
    ),
    "python benchmarks/quickstart.py": "".join(
        f" --set {x}" for x in SMALL_TRAINING.split(" --set ") if x.strip()
    ),
}

Runner = Callable[[str, CliRun], None]


def _ok(cmd: str, timeout_s: float = 600, env: dict[str, str] | None = None) -> str:
    r = run_cli(cmd, timeout_s, env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"`{cmd}` exited {r.returncode}:\n{out[-4000:]}"
    return out


def _json_lines(out: str) -> list[dict]:
    rows = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def _with_run(cmd: str, run: CliRun) -> str:
    cmd = cmd.replace("runs/quickstart-<time>", str(run.run_dir.relative_to(REPO)))
    if "<trace id>" in cmd:
        first = json.loads((run.run_dir / "traces.jsonl").read_text().splitlines()[0])
        cmd = cmd.replace("<trace id>", first["trace_id"])
    return cmd


def setup_main(cmd: str, run: CliRun) -> None:
    test_cmd = next(c for c in readme_commands() if c.endswith("&& pytest"))
    assert cmd == INSTALL + ". && " + QUICKSTART_COMMAND, cmd
    assert test_cmd.startswith(INSTALL), test_cmd
    assert run.returncode == 0


def setup_test(cmd: str, _run: CliRun) -> None:
    ci_cmd = subprocess.run(
        [
            "awk",
            "/<!-- ci:test-command -->/{f=1;next} f&&/^```/{if(b)exit;b=1;next} f&&b{print}",
            str(README),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert cmd == ci_cmd, (cmd, ci_cmd)
    assert "ci:test-command" in (REPO / ".ci" / "run").read_text()


def quickstart(cmd: str, run: CliRun) -> None:
    assert cmd == run.command
    assert "TCSR" in run.output or "tcsr" in run.output, run.output[-2000:]
    assert (run.run_dir / "checkpoints" / "reflection").is_dir()


def resume(cmd: str, run: CliRun) -> None:
    out = _ok(_with_run(cmd, run))
    assert run_dir_of(out) == run.run_dir


def eval_run(cmd: str, run: CliRun) -> None:
    out = _ok(_with_run(cmd, run))
    assert "checkpoint:" in out and "attribution" in out


def trace(cmd: str, run: CliRun) -> None:
    out = _ok(_with_run(cmd, run))
    assert out.startswith("trace ") and "step 1:" in out, out[:2000]


def small_training(cmd: str, _run: CliRun) -> None:
    out = _ok(cmd + SMALL_TRAINING, timeout_s=900)
    from tests.helpers.quickstart_run import remove_run

    remove_run(run_dir_of(out))


def plain(cmd: str, _run: CliRun) -> None:
    _ok(cmd)


def ray_start_and_submit(cmd: str, _run: CliRun) -> None:
    """`ray start --head ...` is the private head; the submit command then runs against it."""
    submit = next(c for c in readme_commands() if " ray job submit " in f" {c} ")
    with private_ray_head() as head:
        port = head["dashboard"].rsplit(":", 1)[1]
        job = submit.replace("http://127.0.0.1:8265", head["dashboard"]) + SMALL_TRAINING
        out = _ok(job, timeout_s=900, env={k: v for k, v in head["env"].items() if k != "RAY_ADDRESS"})
        assert "succeeded" in out.lower(), out[-3000:]
        assert cmd.replace("8265", port).startswith("ray start --head")


def submitted(cmd: str, _run: CliRun) -> None:
    """Run by ``ray_start_and_submit`` (it needs the head that `ray start` brought up)."""
    assert "ray start --head" in " ".join(readme_commands())


def skills_server_and_check(cmd: str, _run: CliRun) -> None:
    check = next(c for c in readme_commands() if "skills check" in c and "--url" in c)
    port = str(free_port())
    proc = subprocess.Popen(
        ["bash", "-c", "exec " + cmd.replace("8321", port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "skill server exited"
            assert time.monotonic() < deadline, "skill server did not come up"
            time.sleep(0.5)
        out = _ok(check.replace("8321", port), timeout_s=300)
        assert "OK" in out or "ok" in out, out[-2000:]
    finally:
        stop_process_group(proc, timeout_s=10)


def checked_over_http(cmd: str, _run: CliRun) -> None:
    """Run by ``skills_server_and_check`` against the server it started."""
    assert "--url http://127.0.0.1:8321" in cmd


def benchmark(cmd: str, _run: CliRun) -> None:
    out = _ok(cmd + BUDGET.get(cmd, ""), timeout_s=900)
    assert _json_lines(out), f"`{cmd}` printed no JSON line:\n{out[-3000:]}"


RUNNERS: list[tuple[str, Runner]] = [
    (r"python3 -m venv \.venv .* pip install -e \. && agentic-ray train .*", setup_main),
    (r"python3 -m venv \.venv .* pip install -e \"\.\[test\]\" && pytest", setup_test),
    (re.escape(QUICKSTART_COMMAND), quickstart),
    (r"agentic-ray train --resume runs/quickstart-<time>", resume),
    (r"agentic-ray eval runs/quickstart-<time>", eval_run),
    (r"agentic-ray trace runs/quickstart-<time> <trace id>", trace),
    (r"agentic-ray train --config configs/\S+\.yaml( --set \S+)+", small_training),
    (r"python -c .*", plain),
    (r"ray start --head --dashboard-port=8265", ray_start_and_submit),
    (r"RAY_AUTH_MODE=token ray job submit .*", submitted),
    (r"agentic-ray skills validate .*", plain),
    (r"agentic-ray skills check --domain \w+", plain),
    (r"agentic-ray skills serve .*", skills_server_and_check),
    (r"agentic-ray skills check --domain \w+ --url http://127\.0\.0\.1:8321", checked_over_http),
    (r"python benchmarks/\w+\.py( --[^`]*)?", benchmark),
]


def _runner(cmd: str) -> Runner | None:
    hits = [f for pat, f in RUNNERS if re.fullmatch(pat, cmd)]
    assert len(hits) <= 1, f"{cmd!r} matches several runners"
    return hits[0] if hits else None


COMMANDS = readme_commands()


def test_every_readme_command_has_a_runner() -> None:
    missing = [c for c in COMMANDS if _runner(c) is None]
    assert not missing, f"README commands no test runs (add a runner): {missing}"
    assert len(COMMANDS) >= 15


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("cmd", COMMANDS, ids=[re.sub(r"\W+", "_", c)[:60] for c in COMMANDS])
def test_readme_command_works(cmd: str, quickstart_run: CliRun) -> None:
    runner = _runner(cmd)
    assert runner is not None, f"no runner for {cmd!r}"
    runner(cmd, quickstart_run)


def test_parser_sees_continuations_and_tables(tmp_path: Path) -> None:
    text = (
        "```bash\nfoo --a \\\n    --b  # note\n```\n| `python benchmarks/x.py` | y |\n```toml\nz = 1\n```\n"
    )
    assert readme_commands(text) == ["foo --a --b", "python benchmarks/x.py"]
