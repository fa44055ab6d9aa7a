"""A new user's first hour (issue 23): Hydra's folders at the project root from any cwd, git states after a run,
the tokenizer's limits said once with the key to raise."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from conftest import REPO, params_for, run, run_stages, typed
from pipeline.base.errors import PipelineError


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from conftest import copy_checkout

    return copy_checkout(tmp_path_factory.mktemp("first-hour") / "project")


def python(args: list[str], cwd: Path, project: Path, check: bool = True):
    """`python -m ...` from `cwd` with the copy's package (an installed one may point at another checkout)."""
    return run([sys.executable, *args], cwd, check=check, PYTHONPATH=str(project))


# ---------------------------------------------------------------- outputs at the project root


@pytest.mark.parametrize("cwd", ["conf", "reports"])
def test_hydra_folders_resolve_under_the_project_root(project, cwd):
    out = python(["-m", "pipeline", "--cfg", "hydra", "--resolve"], project / cwd, project).stdout
    dirs = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("    dir: ")]
    assert [Path(d).parent for d in dirs] == [project / "outputs" / "runs", project / "outputs" / "multirun"]
    assert run(["git", "status", "--porcelain", "--ignored"], project).stdout == ""


@pytest.mark.slow
def test_a_sweep_from_conf_writes_nothing_under_conf(project):
    """The issue's command, one job: its folder is <root>/outputs/multirun/..., conf/ (a DVC dep) is untouched."""
    args = ["-m", "pipeline", "-m", "sweep.w2=1", "figures=none", "tracking=disabled"]
    python(args, project / "conf", project)
    assert run(["git", "status", "--porcelain", "--ignored", "conf"], project).stdout == ""
    [job] = (project / "outputs" / "multirun").glob("*/0")
    assert (job / "reports" / "metrics.json").is_file()


def test_groups_help_lists_the_schema_groups_only(tmp_path):
    """A stray folder under conf/ (an old conf/outputs/) is no config group."""
    import shutil

    from pipeline.compose import groups_help
    from pipeline.config.schema import GROUPS

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    (tmp_path / "conf" / "outputs" / "runs").mkdir(parents=True)
    (tmp_path / "conf" / "outputs" / "stray.yaml").write_text("a: 1\n")
    listed = [line.split(":")[0].strip() for line in groups_help(tmp_path).splitlines()]
    assert listed == sorted(GROUPS) and "outputs" not in listed and "hydra" not in listed


# ---------------------------------------------------------------- git states


def test_build_folders_are_ignored():
    for path in ("build/lib/pipeline/__init__.py", "pe_pipeline.egg-info/PKG-INFO"):
        assert run(["git", "check-ignore", "-q", path], REPO, check=False).returncode == 0, path


def test_a_run_leaves_nothing_staged(checkout):
    """Without DVC's core.autostage a run leaves dvc.lock unstaged like every other file it changes, so
    `git checkout -- .` reverts all of it."""
    stage = checkout / "pipeline" / "stages" / "tokenize.py"
    stage.write_text(stage.read_text() + "\n# changed\n")  # a code dep: tokenize runs again, dvc.lock changes
    run(["dvc", "repro", "--single-item", "tokenize"], checkout)
    assert " M dvc.lock" in run(["git", "status", "--porcelain"], checkout).stdout.splitlines()
    assert run(["git", "diff", "--cached", "--name-only"], checkout).stdout == ""


# ---------------------------------------------------------------- tokenizer limits


def tokenize_file(tmp_path: Path, small_store: Path, lines: list[str], *overrides: str):
    (tmp_path / "texts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    params = params_for("texts=file", "texts.file=texts.txt", *overrides)
    return run_stages(params, tmp_path, small_store, upto="tokenize")


def test_dropped_words_are_one_warning_naming_the_keys(tmp_path, small_store, pipeline_log):
    """num_words=5 keeps the 4 most frequent words (king queen man woman); maxlen=3 cuts the longest sentences."""
    lines = ["king queen man woman", "king queen man woman", "king queen dog wolf", "man woman red green yellow"]
    tokenize_file(tmp_path, small_store, lines, "tokenizer.num_words=5", "tokenizer.maxlen=3", "encoding.max_len=10")
    [warning] = [r.getMessage() for r in pipeline_log.records if r.levelno == logging.WARNING]
    assert "5 word(s) in 2 of 4 sentences dropped" in warning and "raise tokenizer.num_words" in warning
    assert "tokenizer.maxlen=3" in warning and "2 cut in 2 of 4 sentences" in warning
    assert "raise tokenizer.maxlen" in warning


def test_a_sentence_left_without_words_names_num_words(tmp_path, small_store):
    lines = ["king queen man woman", "king queen man woman", "dog wolf red"]
    with pytest.raises(PipelineError) as info:
        tokenize_file(tmp_path, small_store, lines, "tokenizer.num_words=5")
    message = str(info.value)
    assert message.startswith("sentence 2 ('dog wolf red') has 0 token(s)")
    assert "raise tokenizer.num_words (tokenizer.num_words=8 keeps all 7 words" in message


def test_a_file_of_many_words_keeps_every_word_by_default(tmp_path, small_store):
    """texts=file with the default tokenizer: every word of every sentence is a token (Keras's num_words=None), so
    a file of more distinct words than the notebook's num_words=64 works on its first run."""
    words = [f"w{i}" for i in range(200)]  # 200 distinct words: past the notebook's 64
    lines = [" ".join(words[i : i + 4]) for i in range(0, 200, 4)]
    tokens = read_tokens(tokenize_file(tmp_path, small_store, lines))
    assert [len(ids) for ids in tokens["ids"]] == [4] * 50


def read_tokens(layout):
    from pipeline.base.files import read_json

    return read_json(layout.tokens)


@pytest.mark.parametrize("option", ["seed", "queen_king", "brown_ball", "transformers", "file"])
def test_the_notebooks_num_words_changes_no_builtin_texts(tmp_path, small_store, option):
    """The notebook's Tokenizer(num_words=64) and the default (every word) give the same tokens for every texts
    option the project ships (each holds fewer than 64 distinct words), and for the study's texts file: the outputs
    of the default run keep their bytes."""
    from dataclasses import replace

    from pipeline.inputs.texts import load_texts, read_sentences
    from pipeline.inputs.tokens import tokenize

    cfg = typed(params_for(f"texts={option}"))
    texts = load_texts(cfg.texts, REPO)
    study = read_sentences(cfg.study.texts_file, REPO, "study.texts_file")
    assert cfg.tokenizer.num_words is None
    notebook = replace(cfg.tokenizer, num_words=64)
    for sentences in (texts, study):
        assert tokenize(sentences, notebook) == tokenize(sentences, cfg.tokenizer)


# ---------------------------------------------------------------- thousands of sentences


@pytest.mark.slow  # the pipeline (figures=none) over 3,000 sentences: about 20 s on 2 cores
def test_three_thousand_sentences_stay_small_in_git_logs_and_mlflow(tmp_path, small_store, pipeline_log):
    """A 3,000-sentence texts file of the store's GloVe words, with the default sweep (4 pairs, 41 ratios): every
    sentence's numbers in the DVC-cached tables, each sentence's row the one it gets when swept alone (sentences
    of one length are swept together), the git-tracked outputs the same few small files as for two sentences,
    short log lines, and an MLflow run of a few files and a bounded number of metrics (docs/science.md: "Thousands
    of sentences")."""
    import random

    from mlflow.tracking import MlflowClient

    from conftest import SEED_WORDS
    from pipeline.base.files import read_columns
    from pipeline.outputs.tracking import log_result
    from pipeline.stages.registry import STAGES, logged_outputs

    count, rng = 3000, random.Random(23)
    lines = [" ".join(rng.sample(SEED_WORDS, rng.randint(3, 5))) for _ in range(count)]
    overrides = ("texts=file", "texts.file=texts.txt", "tokenizer.num_words=1000", "figures=none")
    (tmp_path / "texts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    params = params_for(*overrides)
    layout = run_stages(params, tmp_path, small_store, upto="figures")

    in_git = [getattr(layout, out.layout) for stage in STAGES for out in stage.outputs if not out.cache]
    sizes = {path.name: path.stat().st_size for path in in_git if path.is_file()}
    assert "metrics.json" in sizes and all(size < 100_000 for size in sizes.values()), sizes
    assert read_columns(layout.sentence_metrics, ["sentence"])["sentence"].tolist() == list(range(count))
    assert len(read_columns(layout.all_ratio_sweeps_csv, ["sentence"])["sentence"]) == 41 * count
    assert max(len(record.getMessage()) for record in pipeline_log.records) < 300

    # three of the sentences as a texts file of their own: the same bytes in their rows of sentences.csv
    picked = [0, 1234, count - 1]
    alone_root = tmp_path / "alone"
    alone_root.mkdir()
    (alone_root / "texts.txt").write_text("\n".join(lines[i] for i in picked) + "\n", encoding="utf-8")
    alone = run_stages(params_for(*overrides), alone_root, small_store, upto="sweep")
    rows, alone_rows = layout.sentence_metrics.read_text().splitlines(), alone.sentence_metrics.read_text().splitlines()
    for j, i in enumerate(picked):
        assert rows[1 + i].split(",", 1)[1] == alone_rows[1 + j].split(",", 1)[1], lines[i]

    record = log_result(params, layout, tmp_path, artifacts=logged_outputs())
    client = MlflowClient()
    run = client.get_run(record["run_id"])
    assert len(run.data.metrics) < 1000 and "sentences.r_star_median" in run.data.metrics
    logged = [f.path for f in client.list_artifacts(run.info.run_id)]
    assert {"sentences.csv", "sentences.csv.gz"} & set(logged) and len(logged) < 10  # .gz: above 1 MB


@pytest.mark.slow
def test_one_sentence_is_counted_in_the_singular(tmp_path, small_store, pipeline_log):
    """`texts=queen_king` (one sentence): the tokenize and sweep stages' lines say "1 sentence", not "1 sentences"."""
    from pipeline.base.words import counted

    assert (counted(1, "sentence"), counted(2, "sentence"), counted(1200, "ratio")) == (
        "1 sentence",
        "2 sentences",
        "1,200 ratios",
    )
    run_stages(params_for("texts=queen_king", "figures=none"), tmp_path, small_store, upto="sweep")
    lines = [r.getMessage() for r in pipeline_log.records if r.getMessage().startswith(("tokenize:", "sweep:"))]
    assert any(line.startswith("tokenize: 1 sentence, ") for line in lines), lines
    assert any(" x 1 sentence; " in line for line in lines), lines
    assert not any("1 sentences" in line for line in lines), lines


def test_panels_of_a_users_sentence_show_no_legend_of_groups_it_lacks(tmp_path, monkeypatch):
    """A user's sentence outside metrics.groups' words: every dot grey, and the legend says so instead of naming the
    default groups (king/queen, ...); a sentence with some group words names those groups only."""
    import numpy as np

    from pipeline.figures import drawing as fig
    from pipeline.figures.projections import projection_panels

    seen = []
    monkeypatch.setattr(
        fig, "SAVED", [lambda figure, path: seen.append([t.get_text() for t in figure.legends[0].texts])]
    )
    groups = [["king", "queen"], ["man", "woman"], ["red", "green", "yellow"]]
    coords = [np.array([[0.0, 0.0], [1.0, 0.5], [0.5, 1.0]])]
    for words in (["the", "teacher", "walked"], ["the", "red", "king"]):
        projection_panels(
            coords, ["W1=1"], words, [0, 1, 2], groups, tmp_path / "p.png", title="t", arrows=False, dpi=30
        )
    assert seen == [
        ["no word of the sentence is in a semantic group (metrics.groups)"],
        ["king/queen", "red/green/yellow"],
    ]
    from pipeline.figures.labels import GROUP_COLOURS, group_colours

    assert group_colours(["red"], groups)[1] == {"red/green/yellow": GROUP_COLOURS[2]}  # its colour kept
