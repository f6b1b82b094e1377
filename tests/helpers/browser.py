"""Headless Chromium from the Debian packages (``chromium``, ``chromium-driver``), driven with Selenium, and the
dashboard served from a real process. Used by the browser tests and ``benchmarks/dashboard.py``.

Selenium is pointed at ``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` explicitly, so Selenium Manager never
downloads a browser or a driver.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)
REPO = Path(__file__).resolve().parents[2]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            return f"{path} is not installed (apt-get install -y chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium WebDriver with a fresh profile; quits and removes the profile on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_AVOID_STATS", "true")
    profile = tempfile.mkdtemp(prefix="agray_chrome_")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def dashboard_server(run_dir: Path, log: Path | None = None, timeout_s: float = 60.0) -> Iterator[str]:
    """``agentic-ray dashboard RUN_DIR`` in a subprocess (its own process group); yields the base URL."""
    port = free_port()
    out = log.open("w") if log is not None else subprocess.DEVNULL
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentic_ray.cli", "dashboard", str(run_dir), "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(url + "/api/status", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the dashboard did not start (exit code {proc.poll()})") from None
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log is not None and hasattr(out, "close"):
            out.close()


RENDERED_PLOTS_JS = """
return Array.from(document.querySelectorAll('.js-plotly-plot')).filter(function (d) {
  return d.data && d.data.some(function (t) {
    var n = (t.x || t.z || t.y || []).length; return n > 0; }) && d.querySelector('.main-svg');
}).length;
"""
"""How many Plotly plots on the page have drawn at least one trace with data."""


def wait_rendered(driver: Any, timeout_s: float = 30.0) -> int:
    """Wait until the page has drawn its figures (``body[data-rendered]``); returns the plots with data."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout_s).until(
        lambda d: d.execute_script("return document.body.dataset.rendered")
    )
    return int(driver.execute_script(RENDERED_PLOTS_JS))


def severe_console_errors(driver: Any) -> list[str]:
    """JavaScript errors the page logged."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
