"""Where things live: the project root and the layout of every stage's inputs and outputs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT_MARKERS = ("dvc.yaml", "conf")
# DVC runs queued experiments in temporary copies under <project>/.dvc/tmp/exps/<tmpdir>/.
DVC_TEMP_PARTS = (".dvc", "tmp", "exps")


def _is_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in ROOT_MARKERS)


def _outside_dvc_temp_copy(path: Path) -> Path:
    parts = path.parts
    for i in range(len(parts) - len(DVC_TEMP_PARTS) + 1):
        if parts[i : i + len(DVC_TEMP_PARTS)] == DVC_TEMP_PARTS:
            return Path(*parts[:i])
    return path


def _under(parent: str, *parts: str) -> property:
    """A Layout path: `parts` below the Layout path (or field) named `parent`."""
    return property(lambda self: getattr(self, parent).joinpath(*parts))


def checkout_root(start: Path | None = None) -> Path:
    """The checkout the code runs in: the nearest folder above `start` (default: cwd) with dvc.yaml and conf/.

    In a DVC queue's temporary copy this is the copy itself (its conf/ and params.yaml are the
    experiment's own).
    """
    env = os.environ.get("PE_PROJECT_ROOT")
    if env:
        return Path(env).resolve()
    for candidate in [Path(start or os.getcwd()).resolve(), Path(__file__).resolve().parent]:
        for path in [candidate, *candidate.parents]:
            if _is_root(path):
                return path
    raise FileNotFoundError(
        "cannot find the project root (a folder holding dvc.yaml and conf/) above "
        f"{Path(start or os.getcwd()).resolve()}: run from inside the project or set PE_PROJECT_ROOT"
    )


def project_root(start: Path | None = None) -> Path:
    """The user's project, where shared state lives (MLflow store, download cache).

    Same as `checkout_root` except inside a DVC queue's temporary copy, where it is the project
    that owns the copy, so that queued experiments log to the project's store, not a temporary one.
    DVC 3.x runs queued experiments in <project>/.dvc/tmp/exps/tmpXXXX/ and sets $DVC_ROOT to
    <project> for their stages; either one identifies the owner.
    """
    checkout = checkout_root(start)
    dvc_root = os.environ.get("DVC_ROOT")
    if dvc_root:
        owner = Path(dvc_root).resolve()
        if owner != checkout and owner in checkout.parents and _is_root(owner):
            return owner
    return _outside_dvc_temp_copy(checkout)


@dataclass(frozen=True)
class Layout:
    """Every file a pipeline result reads or writes, relative to `base` (the checkout, or a Hydra job dir).

    The one place where paths are spelled: stages, tracking, the Hydra runner and the stage registry
    (hence dvc.yaml) ask a Layout, never join path strings themselves. `Layout(Path("."))` gives the
    paths relative to the checkout, as dvc.yaml writes them.
    """

    base: Path
    glove: Path | None = None  # the GloVe store, when shared between results (Hydra jobs)
    shared: Path | None = (
        None  # a sweep's folder of what its jobs share (pipeline.stages.stage_cache), in a Hydra multirun
    )

    @property
    def figure_cache(self) -> Path | None:
        """Figures by the content hash of what each draws (pipeline.figures.cache): a sweep's, shared by its jobs, or
        the checkout's when `base` is one (a DVC run); None elsewhere (a single Hydra run draws every figure)."""
        if self.shared is not None:
            return self.shared / "figures"
        return self.base / "data" / "cache" / "figures" if _is_root(self.base) else None

    # ---- inputs and configuration
    conf_dir = _under("base", "conf")
    dvc_yaml = _under("base", "dvc.yaml")  # The pipeline, generated from pipeline/stages/registry.py
    dvc_lock = _under("base", "dvc.lock")
    params = _under("base", "params.yaml")

    # ---- data/ (DVC-cached stage outputs)
    data_dir = _under("base", "data")

    @property
    def work_dirs(self) -> tuple[Path, ...]:
        """Where stages write, hence where a killed run's temporaries may lie (base.files.clean_stale_temporaries)."""
        return (self.data_dir, self.reports)

    @property
    def glove_dir(self) -> Path:
        return self.glove or self.data_dir / "glove"

    glove_manifest = _under("glove_dir", "manifest.json")
    tokens_dir = _under("data_dir", "tokens")
    tokens = _under("tokens_dir", "tokens.json")
    encode_dir = _under("data_dir", "encode")
    encode_summary = _under("encode_dir", "encode.json")
    pe_matrix = _under("encode_dir", "pe.npy")  # (max_len, d) positional encoding
    # (V + 1, d) word vectors by token id; row 0 and OOV rows zero (stage sweep: it depends on the texts, the encoding
    # does not)
    embedding_matrix = _under("sweep_dir", "embeddings.npy")
    dot_matrix = _under("encode_dir", "dot.npy")
    distance_matrix = _under("encode_dir", "distance.npy")
    profiles = _under("encode_dir", "profiles.npz")  # The sinusoid's 1-D offset profiles (absent for a learned table)
    matrices_info = _under("encode_dir", "matrices.json")
    relative_dir = _under("data_dir", "relative")  # RoPE's and ALiBi's diagnostics (stage encode)
    # RoPE: scores over (m, n), their spread per offset, decay bounds per base scaling (npz)
    rope_arrays = _under("relative_dir", "rope.npz")
    # ALiBi: slopes, (heads, L, L) biases and penalties per head count (npz)
    alibi_arrays = _under("relative_dir", "alibi.npz")
    # Every position-encoding family side by side (stage encode): RoPE's scalings', MiniLM's arrays
    families_dir = _under("data_dir", "families")
    # Per RoPE scaling: decay bound, the expected score with k = q per distance, frequencies, wavelengths (npz)
    scaling_arrays = _under("families_dir", "scalings.npz")
    # all-MiniLM-L6-v2's table proximity and layer 0's per-head probe logits and attention (npz; only with the optional
    # extra `.[models]`)
    minilm_arrays = _under("families_dir", "minilm.npz")
    sweep_dir = _under("data_dir", "sweep")
    # Every weight pair's and ratio's 2-D projection per sentence (npz)
    projections = _under("sweep_dir", "projections.npz")
    projections_meta = _under("sweep_dir", "projections.json")
    # Every sentence's metrics against r = W2/W1, long format (reports/plots/ratio_sweep.csv: the first ones)
    all_ratio_sweeps_csv = _under("sweep_dir", "ratio_sweep.csv")

    # ---- reports/ (small, in git, except the figures folder, which DVC caches so that checkouts are exact)
    reports = _under("base", "reports")
    # The summary of the metrics (encoding, embedding, the first figures.max_sentences sentences, the rest summarised):
    # small in git for any number of sentences; every sentence's in sentence_metrics
    metrics = _under("reports", "metrics.json")
    # The few metrics DVC shows (`dvc exp show`, `dvc metrics show/diff`); metrics.json holds more
    headline_metrics = _under("reports", "headline.json")
    # RoPE's and ALiBi's numbers (stage encode); kept out of headline.json
    relative_metrics = _under("reports", "relative.json")
    # The families x properties table and the RoPE scalings' summary (stage encode), gated
    properties_metrics = _under("reports", "properties.json")
    plots_dir = _under("reports", "plots")
    pe_norms_csv = _under("plots_dir", "pe_norms.csv")
    offset_distance_csv = _under("plots_dir", "offset_distance.csv")
    # The metrics against r = W2/W1 of the sentences with figures (figures.max_sentences), long format with a sentence
    # column: DVC's plot of them (every sentence's: all_ratio_sweeps_csv)
    ratio_sweep_csv = _under("plots_dir", "ratio_sweep.csv")
    # Every sentence's metrics, one row each (DVC-cached: any number of sentences; metrics.json lists the first
    # figures.max_sentences and summarises the rest)
    sentence_metrics = _under("reports", "sentences.csv")
    # The crossover study (stage study): crossover.json, r_star.csv, crossover_study.png
    study_dir = _under("reports", "study")
    # Distribution of r* per GloVe dimension and sentence length, the stores used and the dimensions missing
    study_summary = _under("study_dir", "crossover.json")
    # One row per (dimension, sentence): d, length, from_file, sentence, r_star, switches, sqrt_d_semantic
    study_table = _under("study_dir", "r_star.csv")
    study_figure = _under("study_dir", "crossover_study.png")
    # Every figure, in one folder per stage that draws them (PNG names are unique across them)
    figures_dir = _under("reports", "figures")
    # The encoding's figures: the matrix, its dot products and distances, the two properties (stage encode)
    encode_figures_dir = _under("figures_dir", "encode")
    # RoPE's and ALiBi's figures and the families' (stage encode)
    relative_figures_dir = _under("figures_dir", "relative")
    # The tutorials' examples (stage encode; the masks of the texts are the figures stage's)
    tutorial_figures_dir = _under("figures_dir", "tutorials")
    # The projections, panels, ratio sweeps and crossover summary (stage figures)
    sweep_figures_dir = _under("figures_dir", "sweep")

    @property
    def figure_dirs(self) -> tuple[Path, ...]:
        """Every stage's figure folder (the study's holds its figure beside its numbers)."""
        return (
            self.encode_figures_dir,
            self.sweep_figures_dir,
            self.tutorial_figures_dir,
            self.relative_figures_dir,
            self.study_dir,
        )

    report_html = _under("reports", "report.html")
    # What the figures stage logged to MLflow, the same on every machine (DVC-cached output, not in git)
    mlflow_run = _under("reports", "mlflow_run.json")

    # ---- experiments/length/: the length-generalisation experiment, a DVC project of its own (docs/length-experiment.md)
    # The experiment's DVC project: its dvc.yaml, dvc.lock, params.yaml and results/
    length_dir = _under("base", "experiments", "length")
    # Composed from conf/length_experiment.yaml (`python -m pipeline.compose --length`, or `dvc exp run` there)
    length_params = _under("length_dir", "params.yaml")
    # Generated from the stage registry's LENGTH_STAGES (`python -m pipeline.dvcyaml`)
    length_dvc_yaml = _under("length_dir", "dvc.yaml")
    # What the experiment reports (small, in git): summary.json, the two CSVs and the figure
    length_results = _under("length_dir", "results")
    # Accuracy per task, family and length bucket over seeds (gated: `python -m pipeline.gate`, `length.*`)
    length_summary = _under("length_results", "summary.json")
    # The last MLflow run id and store URI (differs per machine; not versioned)
    mlflow_last_run = _under("reports", "mlflow_last_run.json")


def download_cache(root: Path | None = None) -> Path:
    """Downloads and shared GloVe stores: one per project (shared by DVC queue copies and Hydra jobs)."""
    return project_root(root) / "data" / "cache"


def length_run_store(root: Path | None = None) -> Path:
    """The length experiment's runs, one folder per run key (pipeline.length.runs): finished ones and the checkpoints
    of interrupted ones. Per project (DVC runs, DVC queue copies and Hydra jobs share it), not versioned."""
    return download_cache(root) / "length-runs"


def mlflow_db(root: Path | None = None) -> Path:
    """The project's default MLflow store (SQLite), shared by DVC runs, queue copies and Hydra jobs."""
    return project_root(root) / "mlflow.db"


def mlflow_artifacts(root: Path | None = None) -> Path:
    """The default store's artifact root, beside it."""
    return project_root(root) / "mlartifacts"


def mlflow_pending(root: Path | None = None) -> Path:
    """Records of MLflow runs being logged (removed when each run ends): what a killed process or a tracking server
    that stopped answering left RUNNING, for the next run to end as FAILED. Per project, not versioned."""
    return download_cache(root) / "mlflow-pending"
