"""Every command in README.md, and in the docs site's ``<!-- ci:run -->`` blocks, works as written.

The commands (each line of each README ``bash`` block, the ``python benchmarks/...`` commands of a README table, and
each line of each marked ``bash`` block in ``docs/``; a command that appears twice runs once) are parsed by
``tests/helpers/readme.py``. Each must match exactly one entry of ``RUNNERS``; a command with no entry fails
``test_every_readme_command_has_a_runner``, so a new command needs a runner here. Runners execute the command itself with ``bash -c`` in the repository root, relative paths and all, with
only these substitutions:

* runs are written under a private ``$AGENTIC_RAY_STORAGE_PATH`` (the README's storage root setting), and
  ``~/agentic_ray_results/quickstart-<time>`` and ``<trace id>`` become the run (and a trace of it) that the README's own quickstart
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

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agentic_ray.skills.server import free_port, stop_process_group
from agentic_ray.stages.pipeline import PipelineState
from benchmarks.results_record import RESULTS_DIR_ENV
from tests.helpers.quickstart_run import (
    QUICKSTART_COMMAND,
    STORAGE,
    CliRun,
    remove_run,
    run_cli,
    run_dir_of,
)
from tests.helpers.readme import README, REPO, all_commands, readme_commands
from tests.integration.ray_head import kill_matching, private_ray_head

INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install -e "
# The RL gate is off at this budget, as in configs/tiny.yaml: one RL iteration after 40 demonstrations x 2 epochs,
# judged on 10 episodes, leaves the policy below gate_dvr 0.9 (measured in CI: dvr_progress 0.80, exit 3), and these
# commands check how a training is launched, not what it learns (the quickstart run and tests/learning do).
# No Correction Uplift ablation either: at the quickstart's cu_min_pairs (100) it rolls paired episodes until 100
# first failures, most of a small training's evaluation time; the CU figures come from the session's quickstart run
# (tests/learning/test_correction_uplift.py) and the correction_uplift benchmark.
TRAINING_SIZE = (
    " --set stages.il.demos=40 --set stages.il.epochs=2 --set stages.rl.iterations=1"
    " --set stages.reflection.iterations=1 --set eval.tasks_per_family=1 --set stages.rl.gate_dvr=0.0"
)
SMALL_TRAINING = TRAINING_SIZE + " --set eval.cu_ablation=false"
BUDGET = {
    "python benchmarks/env_throughput.py": " --steps 400 --val-per-family 1",
    "python benchmarks/env_throughput.py --domain helpdesk": " --steps 400 --val-per-family 1",
    "python benchmarks/encoder.py": " --repeats 1",
    "python benchmarks/gnn_layer.py": " --size small --batches 1 8 --repeats 5 --repeats-b1 5",
    "python benchmarks/gpu_learner.py": " --device-only cpu --batch 64 --cpu-iters 1",
    "python benchmarks/reward_pool.py": (
        " --steps 100 --latencies 50 --rounds 5 --blocking-max-s 2 --checkpoint-iterations 1"
    ),
    "python benchmarks/aaac_vs_ppo.py": (
        " --env-steps 300 --seeds 0 --tasks 10 --curve-tasks 10 --arms aaac ppo_lagrangian --batch 64 --minibatch 32"
        " --epochs 1 --eval-every 1"
        " --out /tmp/agray_readme_aaac_vs_ppo.md"
    ),
    "python benchmarks/rl_over_il.py --methods rl": (
        " --seeds 0 --demos 20 --tasks 10 --iterations 1 --cu-pairs 5 --set algo.train_batch_size=128"
        " --set rewards=null"
    ),
    "python benchmarks/quickstart.py": TRAINING_SIZE,
    "python benchmarks/correction_uplift.py --seeds 0": (
        TRAINING_SIZE
        + " --set stages.reflection.correction_demos=8 --set stages.reflection.correction_epochs=1 --cu-pairs 5"
    ),
}
# `agentic-ray sweep` exits 3 when a trial stops at a failed gate; the gate's exit code has its own tests in
# tests/unit/sweeps. SMALL_TRAINING turns the RL gate off here too.
SWEEP_BUDGET = " --set num_samples=1" + SMALL_TRAINING.replace("--set ", "--set overrides.")
SWEEP_BENCHMARK = next(
    (c for c in all_commands() if c.startswith("python benchmarks/sweep.py")), "python benchmarks/sweep.py"
)
BUDGET[SWEEP_BENCHMARK] = SWEEP_BUDGET
_ONCE: dict[str, str] = {}

Runner = Callable[[str, CliRun], None]


def _wait_http(
    url: str,
    proc: subprocess.Popen,
    timeout_s: float,
    what: str,
    ready: Callable[[int], bool],
    log: Path | None = None,
) -> httpx.Response:
    """Poll ``url`` until ``ready(status code)``; fail if ``proc`` exits (with its log's tail) or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            r = httpx.get(url, timeout=2)
            if ready(r.status_code):
                return r
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, f"{what} exited" + (f":\n{log.read_text()[-3000:]}" if log else "")
        assert time.monotonic() < deadline, f"{what} did not come up"
        time.sleep(0.5)


def _with_budget(cmd: str, budget: str) -> str:
    """``cmd`` with the budget's ``--set key=value`` options: a key the command already sets gets the budget's
    value in place (the CLI refuses one key given twice), the others are appended. The budget's other options
    are appended after them (argparse keeps the last value of an option given twice)."""
    for key, value in re.findall(r"--set (\S+?)=(\S+)", budget):
        pat = re.compile(rf"--set {re.escape(key)}=\S+")
        cmd = pat.sub(f"--set {key}={value}", cmd) if pat.search(cmd) else f"{cmd} --set {key}={value}"
    rest = " ".join(re.sub(r"--set \S+?=\S+", " ", budget).split())
    return f"{cmd} {rest}" if rest else cmd


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
    cmd = re.sub(r"\S*quickstart-<time>", str(run.run_dir), cmd)
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
    out = _ok(_with_budget(cmd, SMALL_TRAINING), timeout_s=900)
    remove_run(run_dir_of(out))


def plain(cmd: str, _run: CliRun) -> None:
    _ok(cmd)


def _job_storage(submit: str) -> str:
    """The submit command with the session's storage root as a ``file://`` URI added to its runtime env's
    ``env_vars`` (the job runs on the head, which does not inherit this process's environment)."""
    m = re.search(r"--runtime-env-json '(\{.*?\})'", submit)
    assert m, submit
    runtime_env = json.loads(m.group(1))
    runtime_env.setdefault("env_vars", {})["AGENTIC_RAY_STORAGE_PATH"] = f"file://{STORAGE}"
    return submit.replace(m.group(0), f"--runtime-env-json '{json.dumps(runtime_env)}'")


def ray_start_and_submit(cmd: str, _run: CliRun) -> None:
    """`ray start --head ...` is the private head; every README submit command then runs against it, its runs
    written to the session's storage root as a ``file://`` URI. A training job's run must outlive the job: after
    the job ended (Ray deletes its working_dir package, where a relative ``runs/`` used to land), the run is
    under the storage root, finished, with its checkpoints, metrics and report."""
    submits = [c for c in COMMANDS if " ray job submit " in f" {c} "]
    assert submits
    with private_ray_head() as head:
        port = head["dashboard"].rsplit(":", 1)[1]
        env = {k: v for k, v in head["env"].items() if k != "RAY_ADDRESS"}
        for submit in submits:
            budget = SWEEP_BUDGET if " agentic-ray sweep " in submit else SMALL_TRAINING
            job = _with_budget(
                _job_storage(submit.replace("http://127.0.0.1:8265", head["dashboard"])), budget
            )
            out = _ok(job, timeout_s=900, env=env)
            assert "succeeded" in out.lower(), out[-3000:]
            if " agentic-ray train " in submit:
                where = re.search(r"run directory: file://(\S+)", out)
                assert where is not None, out[-3000:]
                run_dir = Path(where.group(1))
                assert run_dir.parent == STORAGE and "_ray_pkg_" not in str(run_dir), run_dir
                state = PipelineState.load(run_dir)
                assert state.status == "finished" and state.completed == ["il", "rl", "reflection"], state
                assert (run_dir / "checkpoints" / "reflection" / "rllib_checkpoint.json").exists()
                assert (run_dir / "metrics.jsonl").exists() and (run_dir / "report.html").exists()
            for d in re.findall(r"(?:run|sweep) directory: (?:file://)?(\S+)", out):
                remove_run(Path(d))
        assert cmd.replace("8265", port).startswith("ray start --head")
    shutil.rmtree(REPO / "sweeps" / "mobo", ignore_errors=True)


def submitted(cmd: str, _run: CliRun) -> None:
    """Run by ``ray_start_and_submit`` (it needs the head that `ray start` brought up)."""
    assert "ray start --head" in " ".join(COMMANDS)


def dashboard(cmd: str, run: CliRun) -> None:
    """The dashboard on a free port (the README's 8266 replaced), serving the run; stopped by its group."""
    port = str(free_port())
    full = {**os.environ}
    full.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        ["bash", "-c", "exec " + _with_run(cmd, run).replace("8266", port)],
        cwd=REPO,
        env=full,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        r = _wait_http(f"http://127.0.0.1:{port}/", proc, 120, "agentic-ray dashboard", lambda c: c == 200)
        assert "<html" in r.text.lower()
    finally:
        stop_process_group(proc, timeout_s=15)


def sweep(cmd: str, _run: CliRun) -> None:
    if cmd not in _ONCE:
        out = _ok(_with_budget(cmd, SWEEP_BUDGET), timeout_s=1200)
        m = re.search(r"sweep directory: (\S+)", out)
        assert m, out[-3000:]
        _ONCE[cmd] = m.group(1)


def sweep_resume(cmd: str, _run: CliRun) -> None:
    first = next(c for c in COMMANDS if c.startswith("agentic-ray sweep --config"))
    sweep(first, _run)
    d = Path(_ONCE[first])
    out = _ok(cmd.replace(re.search(r"sweeps/\S+-<time>", cmd).group(0), str(d)), timeout_s=1200)
    assert "sweep directory:" in out, out[-3000:]
    remove_run(d if d.is_absolute() else REPO / d)


def serving_session(cmd: str, run: CliRun) -> None:
    """The Serving block as one shell session: the README's export makes the token, the run it serves is this
    session's quickstart run copied to ``runs/quickstart`` (the README trains it with the same command plus
    ``--run-dir runs/quickstart``), ``serve run`` starts on a free port (a copy of the YAML with only the port
    changed, beside the original so its relative paths hold) with a private ``RAY_TMPDIR``, and each curl gets
    that port. Ends only the processes it started (SIGTERM to the group, then what is left under the temp dir)."""
    cmds = readme_commands()
    if cmd != next(c for c in cmds if c.startswith("export AGENTIC_RAY_SERVE_TOKEN=")):
        return  # run with the session below, from its first command
    train = next(c for c in cmds if "--run-dir runs/quickstart" in c)
    assert train == QUICKSTART_COMMAND + " --run-dir runs/quickstart", train
    serve_cmd = next(c for c in cmds if c.startswith("serve run "))
    curls = [c for c in cmds if c.startswith("curl ") and "127.0.0.1:8000/" in c]
    assert len(curls) >= 2
    token = _ok(cmd + ' && echo "TOKEN=$AGENTIC_RAY_SERVE_TOKEN"').split("TOKEN=")[-1].strip()
    assert len(token) >= 16
    target = REPO / "runs" / "quickstart"
    copied = not target.exists()
    if copied:
        shutil.copytree(run.run_dir, target)
    port = free_port()
    yaml_path = REPO / serve_cmd.split()[-1]
    text = yaml_path.read_text()
    assert "port: 8000" in text
    tmp_yaml = yaml_path.with_name(f".readme_test_{port}.yaml")
    tmp_yaml.write_text(text.replace("port: 8000", f"port: {port}"))
    ray_tmp = tempfile.mkdtemp(prefix="agray_srv_", dir="/tmp")
    env = {**os.environ, "AGENTIC_RAY_SERVE_TOKEN": token, "RAY_TMPDIR": ray_tmp}
    env.pop("RAY_ADDRESS", None)
    log = open(Path(ray_tmp) / "serve.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [
            "bash",
            "-c",
            "exec " + serve_cmd.replace(str(yaml_path.relative_to(REPO)), str(tmp_yaml.relative_to(REPO))),
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        log_path = Path(ray_tmp) / "serve.log"
        _wait_http(f"http://127.0.0.1:{port}/readyz", proc, 420, "serve run", lambda c: c == 200, log_path)
        act = _ok(
            curls[0].replace("127.0.0.1:8000", f"127.0.0.1:{port}"), env={"AGENTIC_RAY_SERVE_TOKEN": token}
        )
        assert "skill" in json.loads(act), act[-2000:]
        sse = _ok(
            curls[1].replace("127.0.0.1:8000", f"127.0.0.1:{port}"), env={"AGENTIC_RAY_SERVE_TOKEN": token}
        )
        assert "done" in sse, sse[-2000:]
    finally:
        stop_process_group(proc, timeout_s=30)
        log.close()
        kill_matching(ray_tmp)
        tmp_yaml.unlink(missing_ok=True)
        if copied:
            shutil.rmtree(target, ignore_errors=True)


def in_serving_session(cmd: str, _run: CliRun) -> None:
    """Run by ``serving_session`` (they need its token and its server)."""
    assert any(c.startswith("export AGENTIC_RAY_SERVE_TOKEN=") for c in readme_commands())


def skills_server_and_check(cmd: str, _run: CliRun) -> None:
    check = next(c for c in COMMANDS if "skills check" in c and "--url" in c)
    port = str(free_port())
    proc = subprocess.Popen(
        ["bash", "-c", "exec " + cmd.replace("8321", port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/health", proc, 60, "skill server", lambda c: c < 500)
        out = _ok(check.replace("8321", port), timeout_s=300)
        assert "OK" in out or "ok" in out, out[-2000:]
    finally:
        stop_process_group(proc, timeout_s=10)


def checked_over_http(cmd: str, _run: CliRun) -> None:
    """Run by ``skills_server_and_check`` against the server it started."""
    assert "--url http://127.0.0.1:8321" in cmd


def benchmark(cmd: str, _run: CliRun) -> None:
    """A benchmark at its CI budget; its record goes to a temporary directory, never over the real records."""
    budget = BUDGET.get(cmd, "")
    records = Path(tempfile.mkdtemp(prefix="agray_records_", dir="/tmp"))
    try:
        out = _ok(
            _with_budget(cmd, budget) if "--set" in budget else cmd + budget,
            timeout_s=900,
            env={RESULTS_DIR_ENV: str(records)},
        )
        assert _json_lines(out), f"`{cmd}` printed no JSON line:\n{out[-3000:]}"
        assert list(records.glob("*.json")), f"`{cmd}` recorded nothing in {records}"
    finally:
        shutil.rmtree(records, ignore_errors=True)


def docs_build(cmd: str, _run: CliRun) -> None:
    """``mkdocs build --strict`` as written (the site goes to ``site/``, ignored by git); every results page of
    the built site shows its record's command."""
    from benchmarks.results_record import load_records

    _ok(cmd, timeout_s=600, env={"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"})
    site = REPO / "site"
    assert (site / "index.html").is_file()
    for name, rec in load_records().items():
        page = (site / "results" / name / "index.html").read_text()
        assert html.escape(rec["command"], quote=False) in page, name


RUNNERS: list[tuple[str, Runner]] = [
    (r"python3 -m venv \.venv .* pip install -e \. && agentic-ray train .*", setup_main),
    (r"python3 -m venv \.venv .* pip install -e \"\.\[test\]\" && pytest", setup_test),
    (re.escape(QUICKSTART_COMMAND), quickstart),
    (r"agentic-ray train --resume \S*quickstart-<time>", resume),
    (r"agentic-ray eval \S*quickstart-<time>", eval_run),
    (r"agentic-ray trace \S*quickstart-<time> <trace id>", trace),
    (r"agentic-ray dashboard \S*quickstart-<time> --port 8266", dashboard),
    (r"agentic-ray train --config configs/\S+\.yaml( --set \S+)+", small_training),
    (r"python -c .*", plain),
    (r"ray start --head --dashboard-port=8265", ray_start_and_submit),
    (r"RAY_AUTH_MODE=token ray job submit .*", submitted),
    (r"agentic-ray skills validate .*", plain),
    (r"agentic-ray skills check --domain \w+", plain),
    (r"agentic-ray parser parse --domain \w+ .*", plain),
    (r"agentic-ray skills serve .*", skills_server_and_check),
    (r"agentic-ray skills check --domain \w+ --url http://127\.0\.0\.1:8321", checked_over_http),
    (r"python benchmarks/\w+\.py( --\S+( \S+)?)*", benchmark),
    (r"export AGENTIC_RAY_SERVE_TOKEN=.*", serving_session),
    (r"agentic-ray train --config configs/quickstart\.yaml --run-dir runs/quickstart", in_serving_session),
    (r"serve run serve_apps/\S+\.yaml", in_serving_session),
    (r"curl -sN? http://127\.0\.0\.1:8000/.*", in_serving_session),
    (r"agentic-ray sweep --config tune_sweeps/\S+\.yaml", sweep),
    (r"agentic-ray sweep --resume sweeps/\S+-<time>", sweep_resume),
    (r"mkdocs build --strict", docs_build),
]


NEEDS_QUICKSTART_RUN = {setup_main, quickstart, resume, eval_run, trace, dashboard, serving_session}
NO_RUN = CliRun("", 0, "", REPO / "runs" / "none")


def _runner(cmd: str) -> Runner | None:
    hits = [f for pat, f in RUNNERS if re.fullmatch(pat, cmd, re.S)]
    assert len(hits) <= 1, f"{cmd!r} matches several runners"
    return hits[0] if hits else None


COMMANDS = all_commands()


def test_every_readme_command_has_a_runner() -> None:
    missing = [c for c in COMMANDS if _runner(c) is None]
    assert not missing, f"README commands no test runs (add a runner): {missing}"
    assert len(COMMANDS) >= 15


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("cmd", COMMANDS, ids=[re.sub(r"\W+", "_", c)[:60] for c in COMMANDS])
def test_readme_command_works(cmd: str, request: pytest.FixtureRequest) -> None:
    runner = _runner(cmd)
    assert runner is not None, f"no runner for {cmd!r}"
    # Only the runners that read the quickstart run start it (once per session).
    needs_run = runner in NEEDS_QUICKSTART_RUN
    runner(cmd, request.getfixturevalue("quickstart_run") if needs_run else NO_RUN)


def test_budget_replaces_a_set_the_command_already_has() -> None:
    assert (
        _with_budget("t --set a.b=20 --set c=x", " --set a.b=1 --set d=2")
        == "t --set a.b=1 --set c=x --set d=2"
    )
    # the budget's other options are kept, after the command's own (argparse keeps the last)
    assert _with_budget("t --n 6 --set a=1", " --n 1 --set a=2 --m 3") == "t --n 6 --set a=2 --n 1 --m 3"


def test_parser_sees_continuations_and_tables(tmp_path: Path) -> None:
    text = (
        "```bash\nfoo --a \\\n    --b  # note\n```\n| `python benchmarks/x.py` | y |\n```toml\nz = 1\n```\n"
    )
    assert readme_commands(text) == ["foo --a --b", "python benchmarks/x.py"]
