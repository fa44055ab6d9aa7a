"""Limits before exhaustion: configs whose memory or figure count would exceed the machine are refused when the
config is checked (compose, each stage of a plain `dvc repro`, a Hydra job), before anything is allocated, naming the estimate and the
knob (pipeline.config.limits)."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import REPO, params_for, run, typed
from pipeline import config
from pipeline.base.errors import PipelineError
from pipeline.config.limits import (
    MAX_FIGURES,
    MAX_JOBS,
    check_limits,
    check_multirun,
    encode_estimate,
    figure_count,
    machine_memory,
    multirun_jobs,
    sweep_estimate,
)

SMALL_MACHINE = 16 * 10**9


def test_default_config_is_within_limits():
    params = config.compose([], REPO)
    config.check(params, REPO)
    check_limits(typed(params), params["texts"]["sentences"], memory=SMALL_MACHINE)


def test_huge_max_len_is_refused_naming_the_estimate_and_knob():
    """encoding.max_len=100000000 (a 20 GB torch allocation in the issue): 91 GB estimated, refused."""
    params = config.compose(["encoding.max_len=100000000"], REPO)
    with pytest.raises(
        PipelineError,
        match=r"about 90\.7 GB .*positional encoding \(345 MB \+ max_len x \(4 d \+ 64\) \+ 32 max_offset max_len "
        r"with max_len = 100,000,000, d = 50, max_offset = 20\).*16\.0 GB.*"
        r"Fix: lower encoding\.max_len",
    ):
        check_limits(typed(params), params["texts"]["sentences"], memory=SMALL_MACHINE)


def test_max_len_beyond_this_machine_is_refused_by_config_check():
    """Through config.check (what compose and the stages of a plain `dvc repro` run), on this machine's real memory."""
    memory = machine_memory()
    max_len = int(memory / (50 * 12)) + 1  # just over the whole memory at d = 50
    params = config.compose([f"encoding.max_len={max_len}"], REPO)
    with pytest.raises(PipelineError, match=r"encoding\.max_len"):
        config.check(params, REPO)


def test_ten_million_weight_pairs_are_refused():
    """A sweep of 10^7 pairs: the batched PCA would hold 10^7 Gram matrices (and figures would follow)."""
    params = config.compose([], REPO)
    cfg = typed(params)
    cfg.sweep.w1, cfg.sweep.w2 = [1.0] * 10**7, 1.0  # set on the dataclasses: validating 10^7 items takes minutes
    with pytest.raises(
        PipelineError,
        match=r"sweep's batched PCA \(80 MB \+ 150 MB \(the compiled eigensolver\) \+ min\(pairs \+ 1 \+ ratios, 2,000,000,000 / n\^3\) x n\^2 x 16 \+ "
        r"pairs x sentences x 6 kB = 1,502,629 x 11\^2 x 16 \+ 10,000,000 x 2 x 6 kB.*Fix: use fewer weight pairs \(sweep\.w1",
    ):
        check_limits(cfg, params["texts"]["sentences"], memory=SMALL_MACHINE)


def test_a_100k_word_sentence_without_maxlen_is_refused(tmp_path):
    """One 100,000-word sentence with tokenizer.maxlen=null: n^2 Gram matrices of 10^10 entries; the message points at
    tokenizer.maxlen."""
    shutil.copytree(REPO / "data" / "texts", tmp_path / "data" / "texts")  # study.texts_file: checked with the config
    (tmp_path / "long.txt").write_text(" ".join(["king", "queen"] * 50_000) + "\n", encoding="utf-8")
    params = config.compose(["texts=file", "texts.file=long.txt", "tokenizer.maxlen=null"], REPO)
    with pytest.raises(PipelineError, match=r"100,000\^2 .*tokenizer\.maxlen cuts them"):
        config.check(params, tmp_path)
    params = config.compose(["texts=file", "texts.file=long.txt", "tokenizer.maxlen=100"], REPO)
    config.check(params, tmp_path)  # cut at 100 words: fine


def test_ten_thousand_sentences_with_many_figures_are_refused(tmp_path):
    """10,000 sentences, figures for 100 of them and 30 weight pairs: 3,300 figures, refused before drawing any."""
    shutil.copytree(REPO / "data" / "texts", tmp_path / "data" / "texts")  # study.texts_file: checked with the config
    (tmp_path / "many.txt").write_text("".join(f"king queen man woman {i}\n" for i in range(10_000)), encoding="utf-8")
    w1 = "[" + ",".join(str(i) for i in range(1, 31)) + "]"
    params = config.compose(
        ["texts=file", "texts.file=many.txt", "figures.max_sentences=100", f"sweep.w1={w1}", "sweep.w2=1"], REPO
    )
    with pytest.raises(PipelineError) as info:
        config.check(params, tmp_path)
    message = str(info.value)
    assert re.search(r"about 3,300 figures \(100 sentences x \(31 projection \+ 1 panels \+ 1 ratio_sweep\)\)", message)
    assert f"more than {MAX_FIGURES:,}" in message and "figures.max_sentences" in message
    params = config.compose(["texts=file", "texts.file=many.txt", f"sweep.w1={w1}", "sweep.w2=1"], REPO)
    config.check(params, tmp_path)  # the default figures.max_sentences (8): 264 figures


# ---------------------------------------------------------------- estimates against the measured peak RSS

PEAK_CHILD = r"""
import json, resource, sys
from pathlib import Path
from pipeline import config
from pipeline.base.paths import Layout
from pipeline.stages.registry import job_stages

params, out, store, stages = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4].split(",")
layout = Layout(out, glove=store)
for stage in job_stages():
    if stage.name in stages:
        stage.run(config.validate(params), layout, out)
# VmHWM: the peak RSS of this program's own memory. ru_maxrss would not do: Linux folds the RSS the process had
# before exec (a fork of the test process, up to a GB late in a full test run) into it.
hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(int(hwm[0]) * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def peak_rss(params: dict, out, store, stages: str) -> int:
    """The peak RSS in bytes of a fresh process that runs `stages` (comma-separated, in order) into `out`."""
    import json
    import sys

    result = run([sys.executable, "-c", PEAK_CHILD, json.dumps(params), str(out), str(store), stages], REPO)
    return int(result.stdout.split()[-1])


@pytest.mark.slow
def test_encode_estimate_is_within_20_percent_of_the_peak_rss(small_store, tmp_path):
    """encoding.max_len = 2,000,000 at d = 8 (about 1.8 GB, a few seconds): the formula against the peak RSS (VmHWM)."""
    params = params_for("encoding.max_len=2000000", "encoding.device=cpu")
    peak_rss(params, tmp_path, small_store, "tokenize")  # tokens.json for the encode stage
    peak = peak_rss(params, tmp_path, small_store, "encode")
    estimate, formula = encode_estimate(typed(params))
    assert abs(estimate - peak) <= 0.2 * peak, (estimate, peak, formula)


@pytest.mark.slow
def test_sweep_estimate_is_within_20_percent_of_the_peak_rss(small_store, tmp_path):
    """300 weight pairs on one 200-word sentence (each weighting's 200 x 200 Gram matrix and eigenvectors): 15 s
    alone, a minute on a loaded machine; smaller sentences would leave the process's baseline all there is to check."""
    words = "king queen man woman dog wolf football basketball red green yellow".split()
    sentences = [" ".join(words[i % len(words)] for i in range(200))]
    (tmp_path / "long.txt").write_text(sentences[0] + "\n", encoding="utf-8")
    params = params_for("texts=file", "texts.file=long.txt", "tokenizer.maxlen=null", "encoding.max_len=200")
    params["sweep"]["w1"], params["sweep"]["w2"] = 1.0, [float(i + 1) for i in range(300)]
    inputs = {**params, "figures": {**params["figures"], "name": "none"}}  # the sweep's inputs; no figure is looked at
    peak_rss(inputs, tmp_path, small_store, "tokenize,encode")
    peak = peak_rss(params, tmp_path, small_store, "sweep")
    estimate, formula = sweep_estimate(typed(params), sentences)
    assert abs(estimate - peak) <= 0.2 * peak, (estimate, peak, formula)


# ---------------------------------------------------------------- figures drawn, per figure set


def test_figures_none_counts_no_figures_and_summary_only_what_it_draws():
    """100,000 pairs: figures=none draws no per-sentence figure (not refused for 200,006), summary two a sentence."""
    params = config.compose(["figures=none"], REPO)
    cfg = typed(params)
    cfg.sweep.w1 = [1.0] * 100_000
    sentences = params["texts"]["sentences"]
    assert figure_count(cfg, sentences) == (0, "2 sentences x (0)")
    check_limits(cfg, sentences, memory=10**13)
    cfg.figures.name = "summary"
    assert figure_count(cfg, sentences) == (4, "2 sentences x (1 panels + 1 ratio_sweep)")
    cfg.figures.name = "all"
    assert figure_count(cfg, sentences)[0] == 2 * (100_001 + 2)


# ---------------------------------------------------------------- before composing: a Hydra multirun, a long list


def test_multirun_jobs_are_counted_from_the_overrides_without_expanding_them():
    assert multirun_jobs(["sweep.w2=range(0,10000000)", "figures=none"]) == (10_000_000, ["none"])
    assert multirun_jobs(["sweep.w2=1,2,3", "texts=seed,file", "figures=summary,none"]) == (12, ["summary", "none"])
    assert multirun_jobs(["sweep.w2=range(1,10,4)", "sweep.w1=range(0.5,2.0,0.5)", "sweep.n_components=2"]) == (9, [])
    assert multirun_jobs(["sweep.w2=shuffle(range(0,10))", "hydra/launcher=parallel"]) == (10, [])
    check_multirun(["sweep.w2=range(0,1000)"], memory=16 * 10**9)  # 1,000 jobs: 0.6 GB kept, fine


def test_a_multirun_beyond_the_job_limit_is_refused_naming_count_estimates_and_fix():
    with pytest.raises(PipelineError) as info:
        check_multirun([f"sweep.w2=range(0,{MAX_JOBS + 1})", "figures=summary"], memory=10**13)
    message = str(info.value)
    assert f"{MAX_JOBS + 1:,} jobs: about 4 days and 22.3 GB of memory" in message, message
    assert (
        f"beyond the limit of {MAX_JOBS:,} jobs. Fix: split the sweep" in message and "sweep.w2=[1,2,4,8]" in message
    ), message
    with pytest.raises(PipelineError, match=r"50,000 jobs: .* 11\.3 GB .* beyond 80% of this machine's 8\.0 GB\. Fix"):
        check_multirun(["sweep.w2=range(0,50000)"], memory=8 * 10**9)


# Runs a command and prints, last on stdout, the peak resident memory (KiB) of the processes it started.
PEAK_RSS = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


def test_ten_million_job_multirun_is_refused_at_once_without_composing(checkout):
    """The issue's probe: 6 GB in 21 s and no output before; now one message, exit 2, nothing written, and the jobs
    are counted without composing them: the memory does not grow with the sweep. (Memory, not the clock: the clock
    of a loaded machine says nothing about composing.)"""
    import sys

    result = run(
        [sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "pipeline", "-m", "sweep.w2=range(0,10000000)"]
        + ["figures=none"],
        checkout,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    # composing keeps ~220 kB a job (the message's own estimate): 1 GB is ~4,500 composed jobs of the 10 million,
    # and far above what counting them takes (an interpreter with the config code loaded)
    peak_kib = int(result.stdout.split()[-1])
    assert peak_kib < 10**6, f"peak RSS {peak_kib / 1024:.0f} MiB: were the jobs composed?"
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "this multirun has 10,000,000 jobs: about" in result.stderr and "split the sweep" in result.stderr
    assert not (checkout / "outputs").exists()


def test_a_list_override_of_millions_of_weights_is_refused_before_composing():
    """200,001 weights typed as one list: counted by its commas (Hydra would spend minutes parsing it)."""
    import time

    start = time.monotonic()
    with pytest.raises(PipelineError, match=r"sweep\.w1 lists about 200,001 weights, more than 100,000"):
        config.compose(["sweep.w1=[" + "1," * 200_000 + "1]", "sweep.w2=1"], REPO)
    # counting commas takes milliseconds (seconds with Hydra's first import); Hydra's parser, whose time grows faster
    # than the list's length, takes far longer than a minute on a list this long: a minute tells the two apart and
    # leaves a loaded machine a wide margin
    assert time.monotonic() - start < 60


# ---------------------------------------------------------------- limits on what conf/ files hold; time bounds


@pytest.mark.slow
def test_a_long_list_in_a_conf_file_is_refused_before_anything_composes(checkout):
    """A 200,001-item sweep.w2 in conf/sweep/huge.yaml composed silently for 9 minutes (the limit read only the
    command line). Now every command that composes refuses it first, naming the file, the key and the fix: our compose,
    the Hydra app, and DVC's `dvc exp run` (through hydra_plugins), each exit 2 with one message."""
    import sys
    import time

    huge = checkout / "conf" / "sweep" / "huge.yaml"
    huge.write_text("name: huge\nw1: 1\nw2: [" + "1, " * 200_000 + "1]\n")
    expected = r"conf/sweep/huge\.yaml lists 200,001 items at w2, more than 100,000 in one list.*Fix"
    start = time.monotonic()
    with pytest.raises(PipelineError, match=expected):
        config.compose(["sweep=huge"], checkout)
    assert time.monotonic() - start < 30  # a parse of the file, not minutes of composing
    before = (checkout / "params.yaml").read_bytes()
    for command in (
        ["pipeline.compose", "sweep=huge"],
        ["pipeline", "sweep=huge"],
        ["dvc", "exp", "run", "-S", "sweep=huge"],
    ):
        result = run([sys.executable, "-m", *command], checkout, check=False, timeout=300)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert re.search(expected, result.stderr) and "Traceback" not in result.stderr, (command, result.stderr)
    assert (checkout / "params.yaml").read_bytes() == before


def test_learned_block_means_beyond_the_time_bound_are_refused():
    """encoding=learned encoding.max_len=200001 ran the encode stage 10 minutes with no progress line: its block means
    cost N^2 products. Refused at compose naming the estimate, the bound and the knob; 50,000 positions pass."""
    params = config.compose(["encoding=learned", "encoding.max_len=200001"], REPO)
    with pytest.raises(
        PipelineError,
        match=r"about 18 minutes of CPU for the encoding's block means \(max_len\^2 x .* = 200,001\^2 x .*\), more "
        r"than the bound of 5 minutes .*Fix: lower encoding\.max_len",
    ):
        check_limits(typed(params), params["texts"]["sentences"])
    check_limits(typed(config.compose(["encoding=learned", "encoding.max_len=50000"], REPO)), ["king queen"])


def test_word_labels_beyond_the_time_bound_are_refused(tmp_path):
    """Eight 1,000-word sentences with figures and 40 weight pairs: 56 labelled axes a sentence, about 16 minutes of
    drawing words and placing labels; refused naming figures=none (which draws none); the issue's one 1,000-word
    sentence with the default pairs, about 21 s, passes (it took 6.5+ minutes: each label was tested against every
    label placed, one at a time)."""
    shutil.copytree(REPO / "data" / "texts", tmp_path / "data" / "texts")  # study.texts_file: checked with the config
    sentence = " ".join(f"w{i}" for i in range(1000)) + "\n"
    (tmp_path / "long.txt").write_text(sentence * 8, encoding="utf-8")
    pairs = "[" + ",".join(str(i) for i in range(1, 41)) + "]"
    base = ["texts=file", "texts.file=long.txt", "tokenizer.maxlen=null", "encoding.max_len=1000"]
    with pytest.raises(
        PipelineError, match=r"word labels of the per-sentence figures .*56 labelled axes .*8,000 words.*figures=none"
    ):
        config.check(config.compose([*base, f"sweep.w1={pairs}", "sweep.w2=1"], REPO), tmp_path)
    config.check(config.compose([*base, f"sweep.w1={pairs}", "sweep.w2=1", "figures=none"], REPO), tmp_path)
    (tmp_path / "long.txt").write_text(sentence, encoding="utf-8")
    config.check(config.compose(base, REPO), tmp_path)


def _labels_one_at_a_time(ax, xy, texts, marker_pt, fontsize, rings=6):
    """The reference: each spot of each label tested with matplotlib's Bbox.contains and Bbox.overlaps against every
    box placed, one at a time (what place_labels did). Returns each label's offset from its point in points (as
    place_labels annotates it), or None for a label left out."""
    from matplotlib.transforms import Bbox

    from pipeline.figures.drawing import DIRECTIONS

    fig = ax.figure
    ax.apply_aspect()
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0
    frame = ax.get_window_extent(renderer).padded(-2)
    points = ax.transData.transform(xy)
    r = marker_pt * px
    taken = [Bbox.from_extents(x - r, y - r, x + r, y + r) for x, y in points]
    gap, step, spots = 2 * px, 0.6 * fontsize * px, []
    for (x, y), point, text in zip(points, xy, texts):
        probe = ax.annotate(text, point, fontsize=fontsize)
        w, h = probe.get_window_extent(renderer).size + 2 * gap
        probe.remove()
        candidates = (
            Bbox.from_bounds(
                x + ux * (w / 2 + r + ring * step) - w / 2, y + uy * (h / 2 + r + ring * step) - h / 2, w, h
            )
            for ring in range(rings)
            for ux, uy in DIRECTIONS
        )
        spot = next(
            (
                box
                for box in candidates
                if frame.contains(box.x0, box.y0)
                and frame.contains(box.x1, box.y1)
                and not any(box.overlaps(other) for other in taken)
            ),
            None,
        )
        spots.append(None if spot is None else ((spot.x0 + w / 2 - x) / px, (spot.y0 + h / 2 - y) / px))
        if spot is not None:
            taken.append(spot)
    return spots


@pytest.mark.slow
def test_labels_are_placed_in_seconds_where_the_one_at_a_time_test_put_them():
    """place_labels tests each label's spots against everything placed at once: 300 crowded labels land on exactly the
    spots of the one-at-a-time reference, and 1,000 take seconds (minutes before)."""
    import time

    import matplotlib.pyplot as plt
    import numpy as np

    from pipeline.figures import drawing as figures

    def axes():
        fig = plt.figure(figsize=(9, 6.5))
        ax = fig.add_axes((0.09, 0.09, 0.75, 0.75))
        ax.set(xlim=(-4, 4), ylim=(-4, 4))
        return fig, ax

    xy = np.random.default_rng(0).normal(size=(1000, 2))
    texts = [f"w{i}" for i in range(1000)]
    fig, ax = axes()
    expected = _labels_one_at_a_time(ax, xy[:300], texts[:300], marker_pt=4, fontsize=11)
    plt.close(fig)
    fig, ax = axes()
    left_out = figures.place_labels(ax, xy[:300], texts[:300], marker_pt=4, fontsize=11)
    placed = [tuple(map(float, t.xyann)) for t in ax.texts if t.get_gid() == "word-label"]
    assert left_out == expected.count(None) and 0 < left_out < 300
    assert placed == [spot for spot in expected if spot is not None]  # the same spots, to the bit
    plt.close(fig)
    fig, ax = axes()
    start = time.process_time()
    figures.place_labels(ax, xy, texts, marker_pt=4, fontsize=11)
    assert time.process_time() - start < 60
    plt.close(fig)


@pytest.mark.slow
def test_long_loops_report_progress(monkeypatch, pipeline_log):
    """The quadratic loops (a learned table's block means, placing word labels) log a progress line every 5 s: here
    every step, with a Progress that reports at once."""
    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    from pipeline.base.progress import Progress
    from pipeline.core import encoding
    from pipeline.figures import drawing as figures

    class Eager(Progress):
        def __init__(self, what, total, every=0.0, log=None):
            super().__init__(what, total, every=-1.0, log=log)

    monkeypatch.setattr(encoding, "Progress", Eager)
    monkeypatch.setattr(figures, "Progress", Eager)
    encoding.block_means(torch.rand(8192, 5), factor=512)  # 16 block rows, one a chunk
    fig = plt.figure()
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    figures.place_labels(
        ax, np.random.default_rng(0).normal(size=(20, 2)), [f"w{i}" for i in range(20)], marker_pt=4, fontsize=8
    )
    plt.close(fig)
    lines = [r.getMessage() for r in pipeline_log.records]
    assert any(line.startswith("encode: block means, block rows ") and "s left" in line for line in lines), lines
    assert any(line.startswith("figures: word labels of an axes ") for line in lines), lines
