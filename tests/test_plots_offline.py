"""`dvc plots show` writes a page that works offline: Vega is inlined (.dvc/plots/offline.html), not fetched."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import run


def test_dvc_plots_page_has_no_remote_script_and_draws_offline(checkout, tmp_path):
    out = tmp_path / "plots"
    run(
        ["dvc", "plots", "show", "-o", str(out), "reports/plots/ratio_sweep.csv", "reports/plots/pe_norms.csv"],
        checkout,
    )
    page = (out / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=", page), "the plots page loads a script from elsewhere"
    assert "vega-embed@6.18.2" in page and page.count("vegaEmbed(") >= 2  # the ratio sweeps + pe_norms

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs Debian's chromium to draw the page")
    # a dead proxy: any network fetch fails, so what is drawn comes from the page itself
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=5000",
            "--dump-dom",
            (out / "index.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert dom.count('class="marks"') >= 2, "Vega drew no chart offline"


def test_dvc_plots_output_folder_is_ignored_by_git(checkout):
    assert subprocess.run(["git", "check-ignore", "-q", "dvc_plots/index.html"], cwd=checkout).returncode == 0
