"""The HTML report: self-contained, and alive in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser import chromium, needs_chromium
from conftest import params_for, run_stages


@pytest.fixture(scope="module")
def report(seed_figures) -> Path:
    return seed_figures.report_html


def test_report_is_self_contained(report):
    page = report.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page must not load anything remotely"
    images = re.findall(r'<img alt="[^"]*" data-figure="[^"]*" src="([^"]{0,30})', page)
    assert len(images) >= 26 and all(src.startswith("data:image/png;base64,") for src in images)
    for section in (
        "The positional encoding matrix",
        "Two properties, measured",
        "When does position overtake",
        "Explore",
        "Metric tables",
        "What each metric means",
        "The tutorials' examples",
    ):
        assert section in page
    assert 'id="slider"' in page and "r*" in page


def words_of(page: str) -> str:
    """The page's text with images left out and whitespace collapsed (sentences wrap in the template)."""
    return " ".join(re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page).split())


def test_report_states_the_sinusoids_properties(report):
    text = words_of(report.read_text(encoding="utf-8"))
    assert "sinusoidal encoding over 100 positions, base 10000" in text
    assert "Every vector has the same norm sqrt(d/2) = 2.0000000" in text
    assert "depends only on their separation k" in text and "Both depend only on a - b" in text
    assert "learned position table" not in text


def test_tracked_outputs_hold_no_absolute_path_or_timestamp(report, seed_figures):
    """What git tracks (metrics, plot data, the report) and what dvc.lock hashes must be the same on every machine."""
    from conftest import REPO

    base = report.parents[1]
    tracked = [
        base / "reports" / "metrics.json",
        report,
        *sorted((base / "reports" / "plots").rglob("*.csv")),
        *sorted((base / "data").rglob("*.json")),
    ]
    assert len(tracked) >= 8
    for path in tracked:
        text = words_of(path.read_text(encoding="utf-8"))
        for absolute in (str(base), str(seed_figures.glove), str(REPO), "/tmp/", "/home/"):
            assert absolute not in text, f"{path.relative_to(base)} holds the absolute path {absolute}"
        assert not re.search(r"\b(19|20)\d\d-[01]\d-[0-3]\d[T ][0-2]\d:[0-5]\d", text), f"{path} holds a timestamp"


@pytest.mark.slow
def test_report_and_figures_describe_a_learned_table_truthfully(tmp_path, small_store, monkeypatch):
    """encoding=learned: a random table has neither constant norms nor offset-only distances; no text may claim
    them, and the text says what holds instead (the figures' titles and legends are read as they are drawn)."""
    import matplotlib.text

    from pipeline.figures import drawing as fig

    drawn: dict[str, str] = {}

    def record(figure, path):
        drawn[Path(path).stem] = " ".join(" ".join(t.get_text().split()) for t in figure.findobj(matplotlib.text.Text))

    monkeypatch.setattr(fig, "SAVED", [record])
    params = params_for("encoding=learned", "encoding.scale=1.2247", "figures.workers=1")  # drawn in this process
    layout = run_stages(params, tmp_path, small_store, upto="figures")
    page = words_of(layout.report_html.read_text(encoding="utf-8"))

    for wrong in (
        "sinusoidal encoding over",
        "Every vector has the same norm",
        "every norm is sqrt(d/2)",
        "depends only on their separation",
        "Both depend only on a - b",
    ):
        assert wrong not in page, wrong
    for right in (
        "a learned position table over 100 positions",
        "seed 0, uniform init, scale 1.2247",
        "Its norms are not constant",
        "root-mean-square norm of about scale · sqrt(d/3) = 2",
        "depends on the positions p, not only on their separation k",
        "they are not Toeplitz",
    ):
        assert right in page, right

    encoding_figures = {
        name: drawn[name] for name in ("pe_heatmap", "pe_dot_product", "pe_distance", "pe_norms", "pe_offset_distance")
    }
    everything = " ".join(encoding_figures.values())
    for wrong in ("Sinusoidal", "same norm", "depends only on k", "growing with |a - b|", "d/2 = 4"):
        assert wrong not in everything, wrong
    assert "Learned position table" in encoding_figures["pe_heatmap"] and "seed=0" in encoding_figures["pe_heatmap"]
    assert "vary with the position" in encoding_figures["pe_norms"]
    assert "sinusoid's sqrt(d/2), for reference" in encoding_figures["pe_norms"]
    assert "depends on p, not only on k" in encoding_figures["pe_offset_distance"]
    assert "the sinusoid's closed form, for reference" in encoding_figures["pe_offset_distance"]
    assert "unrelated to |a - b|" in encoding_figures["pe_distance"]


@needs_chromium
def test_report_in_headless_chromium(report, tmp_path):
    """The page runs without errors, the slider moves the words, and screenshots are taken."""
    dom = chromium("--dump-dom", f"{report.as_uri()}#selftest", tmp=tmp_path).stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title.startswith("selftest:ok"), title  # set by the page after moving the slider to r = 100
    assert "r = 100" in title
    # every frame of both sentences (the page checks): labels inside the plot, none over another label or a dot
    shown, left_out, frames = map(
        int, re.search(r"labels: (\d+) shown, (\d+) left out in (\d+) frames", title).groups()
    )
    assert frames == 2 * 41 and shown + left_out == frames * 11 and left_out <= shown // 50, title  # 11 words each
    errors = re.search(r'<pre id="console-errors"([^>]*)>(.*?)</pre>', dom, re.S)
    assert "hidden" in errors.group(1) and errors.group(2).strip() == "", errors.group(2)
    assert len(re.findall(r'<circle[^>]*class="word"', dom)) == 11

    shots = {"page": (report.as_uri(), "1200,3000"), "explorer": (f"{report.as_uri()}#selftest", "1000,620")}
    for name, (url, size) in shots.items():
        png = tmp_path / f"report-{name}.png"
        chromium(f"--window-size={size}", f"--screenshot={png}", url, tmp=tmp_path)
        assert png.exists() and png.stat().st_size > 10_000, f"no screenshot of the {name}"


def test_a_small_budget_scales_figures_instead_of_leaving_them_out(report):
    """Issue 36: every figure stays in the page; past the budget the largest are made smaller (palette, then 3/4
    and 1/2 size), the same bytes every time; only when every one is at its smallest do the last go."""
    import base64

    from pipeline.base.paths import Layout
    from pipeline.outputs.report import embedded_figures, shrunk_png

    layout = Layout(report.parents[1])
    labels = [p.name.split("_", 2)[2][:-4] for p in layout.sweep_figures_dir.glob("projection_s0_*.png")]
    full = embedded_figures(layout, 2, labels)
    size = sum(len(uri) for uri in full.values())
    smaller = embedded_figures(layout, 2, labels, budget=size // 2)
    assert smaller.keys() == full.keys() and sum(len(uri) for uri in smaller.values()) <= size // 2
    assert smaller == embedded_figures(layout, 2, labels, budget=size // 2)  # deterministic
    shrunk = [name for name in full if smaller[name] != full[name]]
    assert shrunk and all(base64.b64decode(smaller[n].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n" for n in shrunk)
    png = layout.encode_figures_dir / "pe_heatmap.png"
    assert shrunk_png(png, 2) == shrunk_png(png, 2) and len(shrunk_png(png, 3)) < len(png.read_bytes())
    assert len(embedded_figures(layout, 2, labels, budget=1000)) < len(full)  # nothing fits: the last go


def test_a_shrunk_figure_is_kept_in_the_figure_cache(report, tmp_path, monkeypatch):
    """A figure no edit changed is shrunk once: the figure cache keeps the result by the file's bytes, the step and
    the code, and gives the same bytes back without Pillow; a damaged entry is found by its SHA-256 and shrunk again."""
    from PIL import Image

    from pipeline.base.paths import Layout
    from pipeline.outputs.report import shrunk_png

    png, cache = Layout(report.parents[1]).encode_figures_dir / "pe_heatmap.png", tmp_path / "figures"
    fresh = shrunk_png(png, 2)
    assert shrunk_png(png, 2, cache) == fresh
    (entry,) = cache.iterdir()
    with monkeypatch.context() as patch:
        patch.setattr(Image, "open", lambda *args, **kwargs: pytest.fail("shrunk again"))
        assert shrunk_png(png, 2, cache) == fresh
    (entry / "shrunk.png").write_bytes(b"damaged")
    assert shrunk_png(png, 2, cache) == fresh
    assert shrunk_png(png, 3, cache) == shrunk_png(png, 3) != fresh and len(list(cache.iterdir())) == 2
