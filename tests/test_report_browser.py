"""The report in a real browser: Debian's chromium, headless, renders report.html;
each plot draws more than one point and the page is not blank (issue 14).

Chromium is installed with apt-get when missing and the test runs as root (as
in CI); otherwise the test is skipped with the reason.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("PIL")

from PIL import Image

from raetlike.pipeline import PipelineOptions, run_pipeline
from tests.journalkit import write_known_traffic
from tests.sparkkit import spark  # noqa: F401 - the session fixture

INSTALL_DEADLINE = 900.0
BROWSER_DEADLINE = 120.0
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic")


def _install() -> str | None:
    """apt-get install chromium (once, under a lock); the reason it failed, or None."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    result = subprocess.run(command, capture_output=True, text=True, env=env,
                            timeout=INSTALL_DEADLINE, check=False)
    if result.returncode != 0:  # stale package lists: update once and try again
        subprocess.run(["apt-get", "update"], capture_output=True, env=env,
                       timeout=INSTALL_DEADLINE, check=False)
        result = subprocess.run(command, capture_output=True, text=True, env=env,
                                timeout=INSTALL_DEADLINE, check=False)
    if result.returncode != 0:
        return (result.stderr.strip().splitlines() or ["no output"])[-1]
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("chromium is not installed, and the test installs it only as root "
                    "with apt-get (Debian's package 'chromium')")
    with open("/tmp/raetlike-chromium-install.lock", "w") as lock:  # noqa: S108
        fcntl.flock(lock, fcntl.LOCK_EX)
        failed = None if shutil.which("chromium") else _install()
    found = shutil.which("chromium")
    if found is None:
        pytest.skip(f"apt-get could not install chromium: {failed}")
    return found


def _browse(chromium: str, tmp_path: Path, page: Path,
            *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args,
                           page.as_uri()], capture_output=True, text=True,
                          timeout=BROWSER_DEADLINE, check=False)


def test_each_plot_draws_more_than_one_point_in_a_real_browser(
        chromium: str, tmp_path: Path, spark: Any) -> None:  # noqa: F811
    write_known_traffic(tmp_path / "journals")
    result = run_pipeline(PipelineOptions((tmp_path / "journals" / "main",
                                           tmp_path / "journals" / "other"), tmp_path / "out"),
                          spark)
    dom = _browse(chromium, tmp_path, result.report, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert "<h1>raetlike delivery report</h1>" in html
    figures = re.findall(r'<figure class="plot" id="(\w+)" data-points="(\d+)">(.*?)</figure>',
                         html, re.DOTALL)
    assert {name for name, _, _ in figures} == {"kinds", "pairs", "latency", "rate"}
    for name, points, svg in figures:
        drawn = set(re.findall(r'id="((?:rate-point|latency-bar|quantile-point)-\d+)"', svg))
        assert len(drawn) == int(points) > 1, (name, points, len(drawn))
    rate = next(svg for name, _, svg in figures if name == "rate")
    assert len(re.findall(r'id="rate-point-\d+"', rate)) >= 24  # the window fits the run

    shot = tmp_path / "report.png"
    rendered = _browse(chromium, tmp_path, result.report, f"--screenshot={shot}",
                       "--window-size=1200,2000")
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.size == (1200, 2000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50  # text, tables and plots, not a blank page
