"""Limits before exhaustion: configs whose memory or figure count would exceed the machine are refused when the
config is checked (compose, check_params, a Hydra job), before anything is allocated, naming the estimate and the
knob (pipeline.config.limits)."""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from pipeline import config
from pipeline.base.errors import PipelineError
from pipeline.config.limits import MAX_FIGURES, check_limits, machine_memory

SMALL_MACHINE = 16 * 10**9


def test_default_config_is_within_limits():
    params = config.compose([], REPO)
    config.check(params, REPO)
    check_limits(params, params["texts"]["sentences"], memory=SMALL_MACHINE)


def test_huge_max_len_is_refused_naming_the_estimate_and_knob():
    """encoding.max_len=100000000 (a 20 GB torch allocation in the issue): 60 GB estimated, refused."""
    params = config.compose(["encoding.max_len=100000000"], REPO)
    with pytest.raises(
        PipelineError,
        match=r"about 60\.0 GB .*positional encoding \(encoding\.max_len x d x 12 bytes = "
        r"100,000,000 x 50 x 12\).*16\.0 GB.*Fix: lower encoding\.max_len",
    ):
        check_limits(params, params["texts"]["sentences"], memory=SMALL_MACHINE)


def test_max_len_beyond_this_machine_is_refused_by_config_check():
    """Through config.check (what compose and check_params run), on this machine's real memory."""
    memory = machine_memory()
    max_len = int(memory / (50 * 12)) + 1  # just over the whole memory at d = 50
    params = config.compose([f"encoding.max_len={max_len}"], REPO)
    with pytest.raises(PipelineError, match=r"encoding\.max_len"):
        config.check(params, REPO)


def test_ten_million_weight_pairs_are_refused():
    """A sweep of 10^7 pairs: the batched PCA would hold 10^7 Gram matrices (and figures would follow)."""
    params = config.compose([], REPO)
    params["sweep"]["w1"] = [1.0] * 10**7
    params["sweep"]["w2"] = 1.0
    with pytest.raises(
        PipelineError,
        match=r"sweep's batched PCA \(\(pairs \+ 1 \+ ratios\) x n\^2 x 24 bytes = "
        r"10,000,042 x 11\^2 x 24.*Fix: use fewer weight pairs \(sweep\.w1",
    ):
        check_limits(params, params["texts"]["sentences"], memory=SMALL_MACHINE)


def test_a_100k_word_sentence_without_maxlen_is_refused(tmp_path):
    """One 100,000-word sentence with tokenizer.maxlen=null: n^2 Gram matrices of 10^10 entries; the message points at
    tokenizer.maxlen."""
    (tmp_path / "long.txt").write_text(" ".join(["king", "queen"] * 50_000) + "\n", encoding="utf-8")
    params = config.compose(["texts=file", "texts.file=long.txt", "tokenizer.maxlen=null"], REPO)
    with pytest.raises(PipelineError, match=r"100,000\^2 .*tokenizer\.maxlen cuts them"):
        config.check(params, tmp_path)
    params = config.compose(["texts=file", "texts.file=long.txt", "tokenizer.maxlen=100"], REPO)
    config.check(params, tmp_path)  # cut at 100 words: fine


def test_ten_thousand_sentences_with_many_figures_are_refused(tmp_path):
    """10,000 sentences, figures for 100 of them and 30 weight pairs: 3,300 figures, refused before drawing any."""
    (tmp_path / "many.txt").write_text("".join(f"king queen man woman {i}\n" for i in range(10_000)), encoding="utf-8")
    w1 = "[" + ",".join(str(i) for i in range(1, 31)) + "]"
    params = config.compose(
        ["texts=file", "texts.file=many.txt", "figures.max_sentences=100", f"sweep.w1={w1}", "sweep.w2=1"], REPO
    )
    with pytest.raises(PipelineError) as info:
        config.check(params, tmp_path)
    message = str(info.value)
    assert re.search(r"about 3,300 figures \(100 sentences x \(31 weight pairs \+ 2\)\)", message), message
    assert f"more than {MAX_FIGURES:,}" in message and "figures.max_sentences" in message
    params = config.compose(["texts=file", "texts.file=many.txt", f"sweep.w1={w1}", "sweep.w2=1"], REPO)
    config.check(params, tmp_path)  # the default figures.max_sentences (8): 264 figures
