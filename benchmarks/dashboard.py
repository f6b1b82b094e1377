"""A tiny training with the dashboard open in headless Chromium; prints one JSON line and writes screenshots.

Trains ``configs/tiny.yaml`` (with the asynchronous reward pool's layers, so the rewards page has data) through
``agentic-ray train``, starts ``agentic-ray dashboard`` on the run directory as soon as it exists, and keeps the
metrics page open while the run trains. When the run has finished it loads every page, opens failed traces by id
through the trace viewer's search box, and saves a screenshot of each page to ``benchmarks/results/``.

Keys:

* ``pages_ok``/``pages``: pages that drew at least one plot with the run's data and logged no JavaScript error;
* ``plots_rendered``: Plotly plots with data, summed over the pages and one failed trace's view;
* ``trace_lookup_ms``: median time from submitting a failed trace's id in the search box to its steps being
  shown, as the page measures it (5 lookups); ``trace_heatmaps_ms``: to its heatmaps being drawn too;
* ``failed_traces_kept``/``failed_episodes``: failed episodes traced vs failed episodes evaluated (all kept);
* ``live_updates``: distinct metric-row counts the open page showed while the run was still training;
* ``warnings_in_output``: lines of the training's and the dashboard's output that mention a warning or a
  deprecation (must be 0), with ``output_lines`` and the offending lines under ``warning_lines``;
* ``train_s``: the training's wall time. Needs Debian's ``chromium`` and ``chromium-driver``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from tests.helpers.browser import (  # noqa: E402
    browser_missing,
    chromium,
    dashboard_server,
    severe_console_errors,
    wait_rendered,
)

REWARDS = (
    "rewards={mode: async, layers: {execution: {}, efficiency: {}, risk: {}, plan: {}, user_experience: {}}}"
)
PAGES = {"overview": "/", "training": "/training", "rewards": "/rewards", "failures": "/failures"}
WARNING = re.compile(r"warn|deprecat", re.IGNORECASE)


def screenshot(driver, path: Path, max_height: int = 4000) -> None:
    """The whole page (up to ``max_height`` px) at 1400 px wide."""
    h = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1400, min(h + 40, max_height))
    time.sleep(1.0)  # let Plotly relayout to the new size
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)


def lookup(driver, url: str, trace_id: str) -> tuple[float, float]:
    """Find ``trace_id`` through the search box; returns the milliseconds from the lookup's start to the trace's
    steps being shown, and to its heatmaps being drawn, as the page measured them (``window.traceTiming``)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + "/traces")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.traces"))
    box = driver.find_element(By.ID, "trace-search")
    box.clear()
    box.send_keys(trace_id)
    driver.find_element(By.CSS_SELECTOR, "#trace-form button").click()
    WebDriverWait(driver, 60).until(
        lambda d: (
            d.find_element(By.ID, "trace-view").get_attribute("data-trace-id") == trace_id
            and d.execute_script("return window.traceTiming.rendered")
        )
    )
    t = driver.execute_script("return window.traceTiming")
    return t["shown"] - t["start"], t["rendered"] - t["start"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help="where the screenshots go")
    ap.add_argument("--run-root", default=None, help="default: a fresh temporary directory")
    args = ap.parse_args()
    why = browser_missing()
    if why is not None:
        print(json.dumps({"benchmark": "dashboard", "skipped": why}))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(args.run_root or tempfile.mkdtemp(prefix="agray_dash_"))
    root.mkdir(parents=True, exist_ok=True)
    run = root / "runs" / "tiny"
    train_log, dash_log = root / "train.log", root / "dashboard.log"
    cmd = [sys.executable, "-m", "agentic_ray.cli", "train", "--config", str(REPO / "configs" / "tiny.yaml"),
           "--run-dir", str(run), "--set", REWARDS, "--set", "wandb.mode=offline"]  # fmt: skip
    t0 = time.time()
    with train_log.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        while not (run / "settings.json").exists():
            if proc.poll() is not None:
                sys.exit(f"training failed before writing {run}:\n{train_log.read_text()[-3000:]}")
            time.sleep(0.5)
        seen: set[int] = set()
        with dashboard_server(run, dash_log) as url, chromium() as d:
            d.get(url + "/")
            while proc.poll() is None:  # the page follows the run while it trains
                st = d.execute_script("return document.getElementById('status').textContent") or ""
                m = re.search(r"(\d+) metric rows", st)
                if m and "live" in st:
                    seen.add(int(m.group(1)))
                time.sleep(1.0)
            train_s = time.time() - t0
            if proc.returncode != 0:
                sys.exit(f"training failed:\n{train_log.read_text()[-3000:]}")
            pages_ok, plots, shots = 0, 0, []
            for name, path in PAGES.items():
                d.get(url + path)
                n = wait_rendered(d, 60)
                errors = severe_console_errors(d)
                pages_ok += int(n > 0 and not errors)
                plots += n
                shot = out / f"dashboard_{name}.png"
                screenshot(d, shot)
                shots.append(str(shot.relative_to(REPO)) if shot.is_relative_to(REPO) else str(shot))
            traces = [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]
            failed = [t for t in traces if t.get("failed")]
            worst = max(
                failed, key=lambda t: (sum(s["result_code"] != "OK" for s in t["steps"]), len(t["steps"]))
            )
            times = [
                lookup(d, url, t["trace_id"]) for t in (failed[-5:] if len(failed) >= 5 else failed * 5)[:5]
            ]
            lookup(d, url, worst["trace_id"])
            n = int(
                d.execute_script("return document.querySelectorAll('#trace-figures .js-plotly-plot').length")
            )
            trace_ok = n > 0 and not severe_console_errors(d)
            pages_ok += int(trace_ok)
            plots += wait_rendered(d, 60)
            shot = out / "dashboard_trace.png"
            screenshot(d, shot, max_height=6000)
            shots.append(str(shot.relative_to(REPO)) if shot.is_relative_to(REPO) else str(shot))
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "tcsr" in r]
    output = train_log.read_text().splitlines() + dash_log.read_text().splitlines()
    warnings = [line for line in output if WARNING.search(line)]
    publish(
        "dashboard",
        [
            {
                "benchmark": "dashboard",
                "pages_ok": pages_ok,
                "pages": len(PAGES) + 1,
                "plots_rendered": plots,
                "trace_lookup_ms": round(statistics.median(t[0] for t in times), 1),
                "trace_heatmaps_ms": round(statistics.median(t[1] for t in times), 1),
                "failed_traces_kept": len(failed),
                "failed_episodes": sum(round(r["episodes"] * (1 - r["completion"])) for r in evals),
                "live_updates": len(seen),
                "warnings_in_output": len(warnings),
                "output_lines": len(output),
                "warning_lines": warnings[:10],
                "train_s": round(train_s, 1),
                "screenshots": shots,
                "run_dir": str(run),
            }
        ],
    )


if __name__ == "__main__":
    main()
