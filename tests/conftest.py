"""Shared fixtures. Every test logs to its own temporary MLflow store, never the project's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pipeline.base.paths import Layout

REPO = Path(__file__).resolve().parents[1]


def length_defaults():
    """The length experiment's documented config (conf/length/default.yaml) as the schema's LengthConfig."""
    from pipeline.config.params import compose
    from pipeline.config.schema import LENGTH, validate

    return validate(compose([], REPO, LENGTH), LENGTH.schema).length


def processes_in(root: Path) -> list[str]:
    """Command lines of the live processes working in `root` (dvc, its stages, a sweep, their workers and jobs)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cwd", "cmdline", "status"]):
        info = proc.info
        if info["status"] != psutil.STATUS_ZOMBIE and info["cwd"] and Path(info["cwd"]) == root:
            found.append(" ".join(info["cmdline"] or []))
    return found


def model_figures() -> int:
    """Figures that exist only with the optional extra `.[models]` installed (minilm_probing.png)."""
    from pipeline.inputs import minilm

    return int(minilm.find_model()[0] is not None)


@pytest.hookimpl(optionalhook=True)  # pytest -p no:xdist knows no such hook
def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pyproject's addopts): one worker more than the cores this process may use. Most tests wait on
    subprocesses (the pipeline's stages, DVC, git, servers, chromium): one worker a core leaves the cores idle part of
    the time, two more are no faster (docs/benchmarks.md#the-test-suite)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


def pytest_collection_modifyitems(config, items) -> None:
    """The files that hold a slow test first, each file's tests in their own order: xdist hands a free worker the
    next file (--dist loadfile, --no-loadscope-reorder), so the long files start early and the short ones fill the
    workers' ends (xdist's own order, the files with the most tests first, starts the long files of one or two tests
    last: docs/benchmarks.md#the-test-suite)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # a stable sort: the order within each part stays


# What a run of the suite may leave in the checkout it runs from: Python's and the tools' caches. Tests work in copies
# and temporary folders; a test that runs something with this checkout as its project leaves files here.
LEFT_IN_CHECKOUT_OK = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache"}
CHECKOUT_BEFORE = pytest.StashKey[set]()  # checkout_files() at the session's start


def checkout_files() -> set[str]:
    """Every file in this checkout (relative, POSIX), tracked or not, but under LEFT_IN_CHECKOUT_OK's folders."""
    found = set()
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in LEFT_IN_CHECKOUT_OK]
        found.update(Path(folder, name).relative_to(REPO).as_posix() for name in files)
    return found


def pytest_sessionstart(session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller of xdist's workers, or a run without them
        session.config.stash[CHECKOUT_BEFORE] = checkout_files()


def pytest_sessionfinish(session, exitstatus) -> None:
    """The run fails when a test left a file in this checkout (e.g. a run store, a figure cache, an MLflow store)."""
    before = session.config.stash.get(CHECKOUT_BEFORE, None)
    if before is None or os.environ.get("PE_TEST_DEVICE"):  # a worker, or the GPU check's pytest of a few files
        return
    left = sorted(checkout_files() - before)
    if left:
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(
            f"error: the tests left {len(left)} files in the checkout {REPO} (tests work in copies and temporary "
            f"folders): {left[:20]}",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def empty_mlflow_store(tmp_path_factory) -> Path | None:
    """An empty SQLite MLflow store (its tables and MLflow's default experiment), made once per pytest run
    (built_once): MLflow's migrations run once, and each test copies the file, for speed
    (docs/benchmarks.md#the-test-suite). None in the GPU check's child pytest (PE_TEST_DEVICE set: benchmarks.gpu.
    parity), whose bare machine has no MLflow and whose tests log nothing to it."""
    if os.environ.get("PE_TEST_DEVICE"):
        return None
    code = "import sys; from mlflow.tracking import MlflowClient; MlflowClient(sys.argv[1]).search_experiments()"

    def build(folder: Path) -> None:
        run([sys.executable, "-c", code, f"sqlite:///{folder / 'mlflow.db'}"], folder)

    return built_once(tmp_path_factory, "mlflow-store", build) / "mlflow.db"


@pytest.fixture(autouse=True)
def private_mlflow_store(tmp_path_factory, monkeypatch, empty_mlflow_store):
    """MLFLOW_TRACKING_URI -> a fresh SQLite store of this test's (a copy of empty_mlflow_store), in a folder of its
    own beside tmp_path (tests list what they write there)."""
    db = tmp_path_factory.mktemp("mlflow") / "mlflow-test.db"
    if empty_mlflow_store is not None:
        shutil.copyfile(empty_mlflow_store, db)
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def run(cmd: list[str], cwd: Path, check: bool = True, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """Run a command with this interpreter's bin dir first on PATH (DVC stage commands say `python`)."""
    full_env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env)
    result = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def copy_checkout(dest: Path) -> Path:
    """What a fresh clone holds: the tracked and non-ignored files of this checkout, committed in a new repo."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git_env = {
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@localhost",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@localhost",
    }
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        run(cmd, dest, **git_env)
    return dest


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A throwaway copy of the project, as a fresh clone would have it."""
    return copy_checkout(tmp_path / "project")


def copy_project(src: Path, dest: Path, link: tuple[str, ...] = ()) -> Path:
    """A copy of a project folder (git, DVC cache, outputs), file by file; DVC's own state (.dvc/tmp: its hash
    cache, locks, journal) left out, as in a fresh clone that pulled the outputs. Files under the folders `link`
    (relative, POSIX, e.g. "data/") are hard-linked instead: only for files that are replaced, never written in
    place."""

    def copy(s: str, d: str) -> None:
        (os.link if link and Path(s).relative_to(src).as_posix().startswith(link) else shutil.copy2)(s, d)

    shutil.copytree(
        src,
        dest,
        symlinks=True,
        copy_function=copy,
        ignore=lambda d, names: {"tmp"} if Path(d) == src / ".dvc" else set(),
    )
    return dest


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `name` of this pytest run, filled by `build(folder)` once: by the first xdist worker that asks,
    under a file lock (filelock, as pytest-xdist's docs show); the others wait for it. Tests only read or copy it."""
    from filelock import FileLock

    temp = tmp_path_factory.getbasetemp()
    shared = temp.parent if os.environ.get("PYTEST_XDIST_WORKER") else temp  # parent: this run's, shared by workers
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def ran_project(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, str]:
    """A fresh copy of the project after the README's first command (`python -m pipeline.repro`, the default config,
    logging into its own store outside the project), that command's result and the store's URI: made once per
    pytest run (built_once), so that the tests that start from a project that has run (`ran_checkout`) do not each
    pay a full run. Tests only copy it (`copy_project`), never run anything in it."""
    import json

    def build(base: Path) -> None:
        store = f"sqlite:///{base / 'ran.db'}"
        result = run(
            [sys.executable, "-m", "pipeline.repro"], copy_checkout(base / "project"), MLFLOW_TRACKING_URI=store
        )
        (base / "result.json").write_text(
            json.dumps([result.args, result.returncode, result.stdout, result.stderr]), encoding="utf-8"
        )

    base = built_once(tmp_path_factory, "ran", build)
    result = subprocess.CompletedProcess(*json.loads((base / "result.json").read_text(encoding="utf-8")))
    return base / "project", result, f"sqlite:///{base / 'ran.db'}"


@pytest.fixture
def ran_checkout(ran_project, tmp_path) -> Path:
    """A throwaway copy of `ran_project`: what a fresh clone holds after `python -m pipeline.repro`."""
    return copy_project(ran_project[0], tmp_path / "project")


# ---------------------------------------------------------------- every stage of the default config, every output


def run_every_stage(root: Path) -> None:
    """Every stage of the default config (the real GloVe 50-d vectors, no tracking), in this process, into a new
    project folder `root` holding a copy of conf/ and the texts. The caller points PE_PROJECT_ROOT at `root`."""
    root.mkdir(parents=True)
    shutil.copytree(REPO / "conf", root / "conf")
    shutil.copytree(REPO / "data" / "texts", root / "data" / "texts")
    from pipeline import config
    from pipeline.base.paths import Layout
    from pipeline.stages.registry import STAGES

    params = config.validate(config.compose(["tracking=disabled"], root))
    for stage in STAGES:
        stage.run(params, Layout(root), root)


EVERY_STAGE_DRIVER = """
import sys
from pathlib import Path
sys.path.insert(0, "tests")
from conftest import run_every_stage
run_every_stage(Path(sys.argv[1]))
"""
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def every_stage_with_env(base: Path, env: dict[str, str]) -> dict[str, str]:
    """Every stage (run_every_stage) into a fresh folder `base`, in a process of its own with `env` (the libraries read
    it at start) and no thread or kernel setting of this one's; returns output path -> SHA-256 (output_hashes)."""
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and not k.startswith(("NPY_", "ATEN_"))}
    result = subprocess.run(
        [sys.executable, "-c", EVERY_STAGE_DRIVER, str(base)],
        cwd=REPO,
        env={**clean, "PE_PROJECT_ROOT": str(base), **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, f"{env}: the stages failed\n{result.stderr[-3000:]}"
    return output_hashes(base)


@pytest.fixture(scope="session")
def reference_outputs(tmp_path_factory) -> dict[str, str]:
    """Output path -> SHA-256 of every stage of the default config with no switch (this machine's own kernels, one
    thread per core; every_stage_with_env), run once per pytest run (built_once): the reference of
    tests/test_machine_independence.py and of tests/test_last_bit_noise.py."""
    import json

    def build(folder: Path) -> None:
        hashes = every_stage_with_env(folder / "run", {})
        (folder / "hashes.json").write_text(json.dumps(hashes), encoding="utf-8")

    return json.loads((built_once(tmp_path_factory, "reference-run", build) / "hashes.json").read_text("utf-8"))


def changed_outputs(outputs: dict[str, str], reference: dict[str, str]) -> set[str]:
    """The outputs (output_hashes of a run) whose bytes differ from `reference`'s; both runs wrote the same files."""
    assert outputs.keys() == reference.keys()
    return {name for name in outputs if outputs[name] != reference[name]}


def output_hashes(root: Path) -> dict[str, str]:
    """Output path (relative to `root`, POSIX) -> SHA-256 of every file the stages wrote under data/ and reports/."""
    import hashlib

    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for folder in ("data", "reports")
        for path in sorted((root / folder).rglob("*"))
        if path.is_file() and not path.is_relative_to(root / "data" / "texts")
    }


# ---------------------------------------------------------------- the stages in-process on a small store

SEED_WORDS = "king queen man woman dog wolf football basketball red green yellow".split()
DIM = 8


def write_small_store(path: Path) -> Path:
    """A GloVe store of the seed's eleven words plus a few, 8-d, fixed random vectors, at `path`."""
    import numpy as np

    from pipeline.inputs.glove_store import write_store

    words = SEED_WORDS + ["the", "a", "is", "ball"]
    vectors = np.random.default_rng(0).normal(size=(len(words), DIM)).astype(np.float32)
    write_store(path, vectors, words, {"source": "test"})
    return path


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    """write_small_store's store, for this module."""
    return write_small_store(tmp_path_factory.mktemp("store") / "glove")


@pytest.fixture(scope="session")
def seed_figures(tmp_path_factory) -> Layout:
    """The in-process stages up to the report with params_for() (the seed's sentences, every figure) on a small
    store (`.glove`), run once per pytest run (built_once): what tests that look at a default run's figures and
    report read or copy, never write. Its folder is a checkout (dvc.yaml, conf/), so that it keeps the figures it
    draws in its figure cache (data/cache/figures), as a DVC run does."""
    from pipeline.base.paths import Layout

    def build(folder: Path) -> None:
        (folder / "run" / "conf").mkdir(parents=True)
        (folder / "run" / "dvc.yaml").write_text("stages: {}\n")
        run_stages(params_for(), folder / "run", write_small_store(folder / "glove"), "figures")

    folder = built_once(tmp_path_factory, "seed-figures", build)
    return Layout(folder / "run", glove=folder / "glove")


def params_for(*overrides: str) -> dict:
    from pipeline import config

    params = config.compose(["glove=path", f"glove.dim={DIM}", "glove.path=unused.txt", *overrides], REPO)
    config.validate(params)
    return params


def typed(params):
    """A composed config (a dict, as params.yaml holds it) as the stages take it: the schema's Config."""
    from pipeline import config

    return params if not isinstance(params, dict) else config.validate(params)


def stages_upto(name: str) -> tuple:
    """The registry's in-process stages (a Hydra job's), in order, up to and including `name`."""
    from pipeline.stages.registry import job_stages

    stages = job_stages()
    return stages[: [s.name for s in stages].index(name) + 1]


def stages_needed(upto: str):
    """The registry's in-process stages that `upto` reads from (its inputs' producers, and theirs), and `upto`, in
    order: a stage's outputs depend only on its declared inputs (tests/test_architecture.py checks every read), so
    the stages it does not read from are left out, for speed (docs/benchmarks.md#the-test-suite)."""
    from pipeline.base.paths import Layout
    from pipeline.stages.registry import job_stages

    at, stages = Layout(Path(".")), job_stages()
    writes = {getattr(at, out.layout): stage.name for stage in stages for out in stage.outputs}
    needed = {upto}
    for stage in reversed(stages[: [s.name for s in stages].index(upto) + 1]):
        if stage.name in needed:
            reads = [getattr(at, name) for name in stage.inputs]
            needed |= {name for path, name in writes.items() for read in reads if read == path or path in read.parents}
    return tuple(stage for stage in stages if stage.name in needed)


def run_stages(params: dict, tmp_path: Path, store: Path, upto: str = "sweep") -> Layout:
    """The in-process stages `upto` needs (stages_needed), in order, into tmp_path."""
    from pipeline.base.paths import Layout

    layout = Layout(tmp_path, glove=store)
    cfg = typed(params)
    for stage in stages_needed(upto):
        stage.run(cfg, layout, tmp_path)
    return layout


@pytest.fixture
def pipeline_log(caplog, monkeypatch):
    """The pipeline logger's records, INFO and up (a stage entry point run in this process may have stopped its
    propagation)."""
    import logging

    monkeypatch.setattr(logging.getLogger("pipeline"), "propagate", True)
    caplog.set_level(logging.INFO, logger="pipeline")
    return caplog


# ---------------------------------------------------------------- one sentence of the sweep (references for tests)


def sweep_sentence(e, p, words, pairs, ratios, d_model, groups, neighbours, n_components=2):
    """The sweep of one sentence: e, p (n, d) float64 word embeddings and positional encodings of its words."""
    from pipeline.core.sweep import sweep_sentences

    return sweep_sentences(e[None], p[None], [words], pairs, ratios, d_model, groups, neighbours, n_components)[0]


def positional_wins_at(ref):
    """wins(r): True when, at W1 = 1, W2 = r, positional neighbours (d-dimensional k-NN) are at least as many as
    semantic ones; computed exactly as the grid's points are (ref: one sentence)."""
    import numpy as np

    from pipeline.core.metrics import Reference
    from pipeline.core.sweep import wins_at

    many = Reference(ref.e[None], ref.p[None], [ref.words], ref.groups, ref.k)
    return lambda r: bool(wins_at(many, np.zeros(1, dtype=int), np.array([[r]]))[0, 0])


def exact_crossover(ratios, curves: dict, ref) -> dict:
    """The sweep's crossover entry of one sentence from its k-NN curves along the grid (ref: that sentence)."""
    from pipeline.core.metrics import Reference, positional_wins
    from pipeline.core.sweep import crossover_entry, exact_switches

    on_grid = positional_wins(curves["knn_semantic_hd"], curves["knn_positional_hd"])
    many = Reference(ref.e[None], ref.p[None], [ref.words], ref.groups, ref.k)
    return crossover_entry(ratios, on_grid, exact_switches(ratios, on_grid[None], many)[0], ref.k)


# ---------------------------------------------------------------- encodings (references for tests)


def interleaved_columns(d_model: int, layout: str):
    """(d_model,) index: column j of the `layout` encoding is column index[j] of the interleaved one."""
    import torch

    if layout == "interleaved":
        return torch.arange(d_model)
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def position_norms(pe):
    """(n,) Euclidean norm of every row, accumulated in float64 in a fixed order (on the CPU for MPS)."""
    from pipeline.core import encoding, portable

    x = encoding._float64(pe)
    return portable.tree_sum(x * x, axis=1).sqrt()
