"""The HTML report: self-contained, and alive in a real headless browser (Debian's chromium)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import params_for, run_stages

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--virtual-time-budget=10000"]


@pytest.fixture(scope="module")
def report(tmp_path_factory, small_store) -> Path:
    out = tmp_path_factory.mktemp("report")
    layout = run_stages(params_for(), out, small_store, upto="report")
    return layout.reports / "report.html"


def test_report_is_self_contained(report):
    page = report.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page must not load anything remotely"
    images = re.findall(r'<img alt="[^"]*" src="([^"]{0,30})', page)
    assert len(images) >= 26 and all(src.startswith("data:image/png;base64,") for src in images)
    for section in ("The positional encoding matrix", "Two properties, measured", "When does position overtake",
                    "Explore", "Metric tables", "What each metric means", "The tutorials' examples"):
        assert section in page
    assert 'id="slider"' in page and "r*" in page


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); .ci/run installs it")
def test_report_in_headless_chromium(report, tmp_path):
    """The page runs without errors, the slider moves the words, and screenshots are taken."""
    dom = chromium("--dump-dom", f"{report.as_uri()}#selftest", tmp=tmp_path).stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title.startswith("selftest:ok"), title          # set by the page after moving the slider to r = 100
    assert "r = 100" in title
    errors = re.search(r'<pre id="console-errors"([^>]*)>(.*?)</pre>', dom, re.S)
    assert "hidden" in errors.group(1) and errors.group(2).strip() == "", errors.group(2)
    assert len(re.findall(r'<circle[^>]*class="word"', dom)) == 11

    shots = {"page": (report.as_uri(), "1200,3000"), "explorer": (f"{report.as_uri()}#selftest", "1000,620")}
    for name, (url, size) in shots.items():
        png = tmp_path / f"report-{name}.png"
        chromium(f"--window-size={size}", f"--screenshot={png}", url, tmp=tmp_path)
        assert png.exists() and png.stat().st_size > 10_000, f"no screenshot of the {name}"
