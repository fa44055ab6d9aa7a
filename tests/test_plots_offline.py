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


def test_dvc_plots_colour_each_metric_and_fit_wide_figures(tmp_path):
    """Issue 23: the metrics of a sentence are told apart by colour (the by_metric template), the norm plot draws the
    deviation from sqrt(d/2) in the unit its axis states, and images are scaled to the page width. Issue 36: each
    sentence's lines have colours of their own (one colour per sentence and metric), and the norm plot names the
    configured encoding (its legend, from the data: `dvc exp run -S encoding=learned` composes no dvc.yaml). Issue 44:
    axis titles and whole legend labels."""
    import json

    from conftest import REPO

    out = tmp_path / "plots"
    targets = ["reports/plots/ratio_sweep", "reports/plots/pe_norms.csv", "reports/figures/alibi_bias.png"]
    run(["dvc", "plots", "show", "-o", str(out), *targets], REPO)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "datum.sentence + ': ' + datum.field" in page and '"color": {"field": "line"' in page
    assert '"color": {"field": "encoding", "type": "nominal", "title": "encoding", "legend": {"labelLimit": 0}}' in page
    # issue 44: the metric plot's axes say what they hold (DVC titles several y fields "y"); legend labels whole
    assert '"title": "metric value (each a share or correlation, 0 to 1)"' in page and '"labelLimit": 0' in page
    assert "per position of the configured encoding (legend)" in page and "(sinusoidal: 0 up to" not in page
    assert '"y": {"field": "norm_dev_1e-9"' in page and "in 1e-9" in page
    assert re.search(r"img\s*{\s*max-width: 100%;", page)
    header = (REPO / "reports/plots/pe_norms.csv").read_text().splitlines()[0]
    assert header == "position,norm,sqrt_d_over_2,norm_dev_1e-9,encoding"
    assert json.loads((REPO / "reports/headline.json").read_text())["pe_norm_dev_1e-9"] > 1  # not 0.0 at 5 decimals


def test_the_norm_plot_data_names_the_configured_encoding(tmp_path, small_store):
    """encoding=learned: every row of pe_norms.csv says `learned` (the legend of `dvc plots show`), none sinusoidal."""
    import csv

    from conftest import params_for, run_stages

    layout = run_stages(params_for("encoding=learned", "figures=none"), tmp_path, small_store, upto="encode")
    with open(layout.pe_norms_csv, newline="") as handle:
        assert {row["encoding"] for row in csv.DictReader(handle)} == {"learned"}
