"""The stage registry: the one declaration of the pipeline's stages, in DAG order.

Each stage is a module `pipeline.stages.<name>` with `run(cfg, layout, root)` (cfg: the validated config as the
schema's dataclasses, pipeline.config.schema.Config) and a
`python -m pipeline.stages.<name>` entry point (DVC runs that). Everything else is derived from `STAGES`:

- `dvc.yaml` (`python -m pipeline.dvcyaml`, and `pipeline.compose` after writing params.yaml): cmd, params, deps,
  outs, metrics and plots of every stage; the code deps are the stage module's transitive imports inside
  `pipeline/`; the files the config names (`input_files`: texts.file, the GloVe source's glove.<kind>) are deps of the stage
  that reads them, wherever they lie, so that editing one re-runs it;
- the Hydra in-process job (`python -m pipeline`) runs the stages with `in_jobs=True`, in this order;
- what a run logs to MLflow as artifacts (`logged_outputs`: every output declared with `log`, by the figures stage
  and by a Hydra job), and so the figures stage's inputs; which of them DVC caches (the run's start time);
- the config keys naming input files that dvc.yaml must list (`input_files`, checked by the stage that reads them
  under a plain `dvc repro`);
- the tests run the same stages in-process, check that every stage reads only the params and files
  declared here, and that `dvc.yaml` is the generated one.

Inputs and outputs name `pipeline.base.paths.Layout` attributes, so the paths are spelled once there.
Importing this module is cheap: stage modules are imported only by `Stage.load()`. It is declarative (it imports only
the GloVe sources' table), so stage modules may read it (tests/test_architecture.py ranks it below them).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pipeline.config.schema import LENGTH, MAIN, Composition
from pipeline.inputs.glove_sources import FILE_KEYS as GLOVE_FILE_KEYS

# Inputs that no stage produces (Layout attributes): the config. The files it names are deps one by one
# (`input_files`), never their folder: DVC would hash every file there, a FIFO or a link to /dev/zero forever.
EXTERNAL_INPUTS = ("conf_dir", "params")


# The figure settings the encode stage reads (figures.max_heatmap_size too: heatmaps of many positions); the figures
# stage reads the whole group.
FIGURE_KEYS = tuple(f"figures.{key}" for key in ("name", "dpi", "cmap", "sequential_cmap", "workers"))
# The tutorials' examples the encode stage draws: every group of `tutorials` but the masks of the texts (figures stage)
TUTORIAL_KEYS = tuple(
    f"tutorials.{key}" for key in ("seed", "signature", "pe_columns", "pe_heatmap", "random_embedding")
)


@dataclass(frozen=True)
class Output:
    """One stage output: a Layout attribute, and how DVC treats it.

    cache=True: DVC caches it (data/, the figures, the report page), so that `dvc checkout` / `dvc exp apply`
    restore it exactly. cache=False: small files kept in git (metrics, plot data).
    persist=True: DVC leaves it in place while the stage runs instead of deleting it first, so that a stage that
    fails under a plain `dvc repro` keeps the previous one; only for an output the stage replaces whole.
    log: the MLflow artifact folder a run logs it under ("" for the run's root; a folder's files keep their
    names); None: not logged. An HTML page is logged with the PNGs logged beside it referenced, not embedded.
    """

    layout: str
    cache: bool = True
    metric: bool = False
    plot: dict[str, Any] | None = None  # DVC plot properties (x, y, title) for a data-series file
    log: str | None = None
    persist: bool = False


@dataclass(frozen=True)
class Stage:
    name: str
    summary: str
    params: tuple[str, ...]  # params.yaml keys or groups the stage reads (as Config attributes: cfg.glove.dim)
    inputs: tuple[str, ...]  # Layout attributes: EXTERNAL_INPUTS or outputs of earlier stages
    outputs: tuple[Output, ...]
    in_jobs: bool = True  # run by the Hydra in-process job (python -m pipeline)
    untracked: tuple[str, ...] = ()  # Layout attributes also written, but per machine: not DVC outputs
    input_files: tuple[str, ...] = ()  # config keys naming files it reads: DVC deps when set (wherever they lie)
    plots: tuple[dict[str, Any], ...] = field(default=())  # top-level dvc.yaml plots over this stage's outputs

    @property
    def module(self) -> str:
        return f"pipeline.stages.{self.name}"

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    def run(self, cfg, layout, root: Path) -> Any:
        """Run the stage on `cfg` (a pipeline.config.schema.Config)."""
        return self.load().run(cfg, layout, root)


def _sweep_plot(y: list[str], title: str) -> dict[str, Any]:
    # One long-format file (a sentence column) of the sentences with figures. .dvc/plots/by_metric.json: DVC's line
    # template with one colour per metric (DVC's own tells the metrics of one revision apart by dash only), the
    # revision by dash, one line per sentence (its `detail`: no line joins one sentence's last ratio to the next's)
    return {"source": "ratio_sweep_csv", "template": "by_metric", "title": title, "x": "log10_r", "y": y}


def logged_outputs(stages: tuple[Stage, ...] | None = None) -> tuple[tuple[str, str], ...]:
    """(Layout attribute, MLflow artifact folder) of every output of `stages` (default: all) declared with `log`,
    in stage order: what the figures stage and a Hydra job log as a run's artifacts."""
    return tuple((out.layout, out.log) for stage in stages or STAGES for out in stage.outputs if out.log is not None)


_COMPUTE: tuple[Stage, ...] = (
    # No stage of its own checks params.yaml (a process per params edit costs more than the check:
    # docs/benchmarks-measurements.md#stage-layout): `python -m pipeline.repro` checks it when it composes, and under
    # a plain `dvc repro` / `dvc exp run` every stage checks what costs it nothing more (_cli.check_params) before its
    # work, so that none computes from a stale or invalid config. tokenize is the gate: it depends on conf/
    # (an edit there alone changes no param) and checks the tracking store (tokenize.check_tracking); first in
    # dvc.yaml, it runs first (DVC 3 runs independent stages in dvc.yaml order), so a dead MLflow server is reported
    # before glove computes. The deps this costs: tokenize re-runs on an edit of pipeline/outputs/ (the tracking
    # module), and tokenize, glove and study on an edit of this file (their `input_files`); tokenize's and glove's
    # outputs keep their bytes, so DVC skips what follows.
    Stage(
        "tokenize",
        "texts -> word index, sequences, padded ids, padding mask (data/tokens/tokens.json); depends on conf/ and, "
        "first in a plain `dvc repro`, stops it on a stale params.yaml or an MLflow store that does not answer",
        params=("texts", "tokenizer"),
        inputs=("conf_dir",),
        outputs=(Output("tokens_dir"),),
        input_files=("texts.file",),
    ),
    Stage(
        "glove",
        "the configured GloVe source -> data/glove/ (float32 vectors.npy, vocab.txt, manifest.json)",
        params=("glove",),
        inputs=(),
        outputs=(Output("glove_dir"),),
        in_jobs=False,
        input_files=GLOVE_FILE_KEYS,  # glove.<kind> of each source kind that reads a file
    ),
    # One process for everything that depends on the encoding's, RoPE's, ALiBi's and the tutorials' config and not on
    # the texts: torch, matplotlib and the figure workers start once for the three folders
    # (docs/benchmarks-measurements.md#stage-layout). A figure whose data did not change is copied from the figure cache
    # (pipeline.figures.cache), so an edit of one part redraws that part's figures only; the tutorials' masks show the
    # texts: the figures stage's.
    Stage(
        "encode",
        "the positional encoding and its diagnostics (data/encode/), RoPE's and ALiBi's diagnostics (data/relative/, "
        "relative.json), every position-encoding family's properties (data/families/, properties.json), and their "
        "figures and the tutorials' (reports/figures/encode/, relative/, tutorials/)",
        params=(
            "encoding",
            "glove.dim",
            "relative",
            *TUTORIAL_KEYS,
            *FIGURE_KEYS,
            "figures.max_heatmap_size",
        ),
        inputs=("glove_dir",),
        outputs=(
            Output("encode_dir"),
            Output("encode_figures_dir", log="figures"),
            Output(
                "pe_norms_csv",
                cache=False,
                log="plots",
                plot={
                    "x": "position",
                    "y": "norm_dev_1e-9",
                    "y_label": "||PE(pos)|| - sqrt(d/2), in 1e-9 (float rounding)",
                    # dvc.yaml is not composed again by `dvc exp run -S encoding=...`: the configured encoding is
                    # named by the data (its `encoding` column, the legend), not by this title
                    "title": "||PE(pos)|| - sqrt(d/2) per position of the configured encoding (legend)",
                    "template": "by_encoding",
                },
            ),
            Output(
                "offset_distance_csv",
                cache=False,
                log="plots",
                plot={"x": "k", "y": "max_over_p", "title": "max over p of ||PE(p) - PE(p+k)||"},
            ),
            Output("relative_dir"),
            Output("relative_metrics", cache=False, log=""),
            Output("families_dir"),
            Output("properties_metrics", cache=False, log=""),
            Output("relative_figures_dir", log="figures"),
            Output("tutorial_figures_dir", log="figures"),
        ),
    ),
    Stage(
        "sweep",
        "the texts' embedding matrix, W1 * embedding + W2 * PE for every weight pair, 2-D PCA, metrics "
        "(data/sweep/, metrics.json)",
        params=("sweep", "metrics", "figures.max_sentences", "glove.name"),
        inputs=("tokens_dir", "glove_dir", "encode_dir"),
        # the headline is the DVC metric (a narrow `dvc exp show`); metrics.json, the summary, is a plain output;
        # in git only what stays small for any number of sentences, every sentence's numbers DVC-cached
        outputs=(
            Output("sweep_dir"),
            Output("metrics", cache=False, log=""),
            Output("headline_metrics", cache=False, metric=True, log=""),
            Output("sentence_metrics", log=""),
            Output("ratio_sweep_csv", cache=False, log="plots"),
        ),
        plots=(
            _sweep_plot(
                ["knn_semantic_hd", "knn_positional_hd", "trustworthiness_2d", "positional_rank_corr_hd"],
                "Meaning vs position against r = W2/W1 (the sentences with figures)",
            ),
        ),
    ),
    # kept apart from sweep: merged, every `sweep.*` edit would pay its r* bisections and figure again
    # (docs/benchmarks-measurements.md#stage-layout)
    Stage(
        "study",
        "exact r* of many random sentences and the texts file, per GloVe dimension (reports/study/)",
        params=(
            "study",
            "tokenizer",
            "encoding.base",
            "encoding.layout",
            "encoding.dtype",
            "sweep.ratios",
            "metrics.neighbours",
            "figures.dpi",
        ),
        inputs=("glove_dir",),
        outputs=(Output("study_dir", cache=False, log="study"),),  # in the report and the MLflow run
        in_jobs=False,
        input_files=("study.texts_file",),
    ),
    # (the figures stage, which ends the pipeline and logs the MLflow run, comes after these: STAGES below)
)

# What the figures stage reads to draw the sweep's figures and write the report page
_DRAWN_FROM = (
    "tokens_dir",
    "encode_dir",
    "sweep_dir",
    "metrics",
    "ratio_sweep_csv",
    "sentence_metrics",
    "encode_figures_dir",
    "relative_figures_dir",
    "tutorial_figures_dir",
    "relative_metrics",
    "properties_metrics",
)
# ... and to log the run: params.yaml, the GloVe manifest, tokens and encoding summary (`inputs/`, datasets), and
# every output of the stages before it that asks to be logged (so DVC runs it after them)
_LOGGED_FROM = ("params", "glove_dir", "tokens_dir", "encode_dir", *(name for name, _ in logged_outputs(_COMPUTE)))

STAGES: tuple[Stage, ...] = (
    *_COMPUTE,
    # The sweep's figures, the report page that shows them and the MLflow run that logs them, in one process (one costs
    # less than several: docs/benchmarks-measurements.md#stage-layout), which opens the store while its forked figure
    # workers draw (pipeline.stages.figures.run_and_log). The run's params are the whole config, from its params.yaml
    # input (a file dep, `params` below): dvc.lock records one hash instead of every value (DVC rewrites it, in pure
    # Python, after each stage), and any key's edit (`study.*`, `tracking.*` too) re-runs it. A Hydra job runs `run`
    # (figures and report) and logs its own child run (pipeline.__main__).
    Stage(
        "figures",
        "the notebook's projections, the panels and ratio sweeps, labelled (reports/figures/sweep/), "
        "reports/report.html: one self-contained page (narrative, every figure, numbers, explorer), and one MLflow "
        "run: the config as params, the metrics, figures, report and inputs as artifacts",
        params=(),
        inputs=tuple(dict.fromkeys(_DRAWN_FROM + _LOGGED_FROM)),
        # mlflow_run.json is DVC-cached, not in git: a fresh clone has none, so its first repro logs a run
        outputs=(Output("sweep_figures_dir", log="figures"), Output("report_html", log=""), Output("mlflow_run")),
        untracked=("mlflow_last_run",),
        plots=tuple(
            {"source": name}
            for name in ("encode_figures_dir", "sweep_figures_dir", "tutorial_figures_dir", "relative_figures_dir")
        ),
    ),
)

BY_NAME = {stage.name: stage for stage in STAGES}

# The length-generalisation experiment (docs/length-experiment.md): a DVC project of its own in
# experiments/length/ (its .dvc/, dvc.yaml, dvc.lock and params.yaml, composed from conf/length_experiment.yaml), so
# that the pipeline's `dvc repro`, `dvc status`, `dvc exp show` and `dvc metrics` never see it, and its minutes
# of training never run with the pipeline. Its stage runs in the checkout root (wdir), where `python -m pipeline...`
# imports this checkout's package. One stage: the runs live in the run store (pipeline.length.runs), keyed by what
# decides them, so a change of the figure or of MLflow's logging re-runs it in seconds.
LENGTH_STAGES: tuple[Stage, ...] = (
    Stage(
        "length",
        "one tiny causal transformer per task, position family and seed, trained on short strings and tested on every "
        "length up to k times longer (experiments/length/results/), one MLflow run per family",
        params=("length", "tracking"),
        inputs=(),
        outputs=(Output("length_results", cache=False, persist=True),),  # replaced whole (replace_dir)
        in_jobs=False,
    ),
)


@dataclass(frozen=True)
class Pipeline:
    """One dvc.yaml: its stages, the Layout attribute of the file, the composition whose params file its stages read,
    and where their commands run relative to it (None: beside it)."""

    stages: tuple[Stage, ...]
    dvc_yaml: str
    composition: Composition
    wdir: str | None = None

    @property
    def params(self) -> str:
        """The Layout attribute of its params file."""
        return self.composition.params


PIPELINE = Pipeline(STAGES, "dvc_yaml", MAIN)
LENGTH_PIPELINE = Pipeline(LENGTH_STAGES, "length_dvc_yaml", LENGTH, wdir="../..")
PIPELINES = (PIPELINE, LENGTH_PIPELINE)


def job_stages() -> tuple[Stage, ...]:
    """The stages a Hydra job runs in-process, in order (it validates at compose, shares GloVe stores, and logs
    to MLflow itself under the sweep's parent run)."""
    return tuple(stage for stage in STAGES if stage.in_jobs)
