"""MLflow: where runs go and what one pipeline result logs (a Hydra multirun's parent run:
pipeline.outputs.parent_run).

The store is resolved to an absolute location whatever the current directory (Hydra job dirs,
DVC queue temp copies): tracking.uri if set, else $MLFLOW_TRACKING_URI, else
sqlite:///<project root>/mlflow.db. A SQLite store keeps its artifacts beside it, in
<folder of the .db>/mlartifacts (the project's mlartifacts/ for the default store); a tracking
server (`python -m pipeline.server`) decides its own.

Parallel writers (Hydra joblib/submitit jobs, `dvc queue start -j N`): MLflow's SQLite sessions
wait up to 20 s on a locked database (PRAGMA busy_timeout), which covers concurrent logging; it
does not cover several processes creating a fresh store, or the same experiment, at once (the
schema migrations collide), so that part runs under a machine-wide lock (pipeline.base.locks).

Tidy runs: the experiment is tagged as classic ML (`mlflow.experimentKind`) and the printed links open its runs
table with the r* columns (`runs_page`, `runs_view`), not the GenAI overview; runs are named by what tells them apart (`default_run_name`); each
artifact is stored once (the report is logged with its figures referenced, not embedded: `linked_report`); the
GloVe store and the texts are logged as MLflow datasets (digests only, no copy of the data).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.base.trees import flatten
from pipeline.base.errors import PipelineError
from pipeline.base.paths import mlflow_artifacts, mlflow_db, project_root
from pipeline.base.secrets import redact_password as redact  # `http://bob:***@host`: the user stays

if TYPE_CHECKING:
    from pipeline.base.paths import Layout

log = logging.getLogger("pipeline")

# MLflow 3's UI reads this experiment tag (values in its JS bundle: genai_development, custom_model_development)
# to choose the experiment's pages. 3.17's UI reads it only with its GenAI / Model training switch off, and that
# switch is always on: it takes the URL's workflowType, else the browser's last choice, else GenAI. So the tag is
# set (for the UIs that honour it), and the links this project prints carry workflowType (`runs_page`).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
# The runs table's columns: the UI's "share view" (an experiment tag mlflow.sharedViewState.<key> holding the
# view as JSON, opened by the URL's viewStateShareKey=<key>); the printed link opens this view.
RUNS_VIEW = "pe-headline"
RUNS_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW}"
VIEW_SENTENCES = 8  # r* columns for the first sentences (the UI leaves out those a run does not have)
# A logged file larger than this goes up gzip-compressed as <name>.gz, to keep a run of thousands of sentences within
# the store's budget (sizes: docs/benchmarks.md#mlflow-artifacts); the seed's files stay as they are
COMPRESS_ABOVE = 1 << 20  # bytes


def runs_view() -> str:
    """The runs table view (JSON): r* of the first sentences (MLflow metric names: metrics.json's paths,
    `pipeline.core.sweep.HEADLINE`) first, then the datasets, then the encoding's two property checks."""
    from pipeline.core.sweep import HEADLINE

    r_star = [HEADLINE["r_star.{s}"].format(s=f"s{i}") for i in range(VIEW_SENTENCES)]
    checks = [f"metrics.`{HEADLINE[key]}`" for key in ("pe_norm_dev_1e-9", "pe_offset_spread_1e-9")]
    columns, dataset = [f"metrics.`{name}`" for name in r_star], "attributes.`Dataset`"
    # columnOrder: r* right after the run's name and start, then the datasets, then the encoding's checks; columnWidths:
    # each r* header whole (its name's characters at the table's font) with the datasets still in sight beside the
    # assistant panel MLflow opens on a browser's first visit (seen in chromium at 1,400 px)
    return json.dumps(
        {
            "selectedColumns": [*columns, *checks, dataset],
            "columnOrder": ["attributes.`Run Name`", *columns, dataset, *checks],
            "columnWidths": {column: 32 + 6 * len(name) for column, name in zip(columns, r_star)},
        }
    )


def runs_page(server: str, experiment_id: str) -> str:
    """The URL of the experiment's runs table, in model-training mode with the r* columns (`runs_view`), in the
    MLflow UI at `server`."""
    query = f"workflowType=machine_learning&viewStateShareKey={RUNS_VIEW}"
    return f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


def without_credentials(uri: str) -> str:
    """`uri` without its user info (`http://bob:pw@host:5000` -> `http://host:5000`): a link to print."""
    import re

    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", uri, flags=re.IGNORECASE)


def tracking_uri(configured: str | None, root: Path | None = None) -> str:
    """The store's URI: `configured` (tracking.uri), else $MLFLOW_TRACKING_URI, else the project's SQLite store."""
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            # a relative sqlite path would follow the cwd: anchor it at the project root
            uri = "sqlite:///" + str((project_root(root) / uri[len("sqlite:///") :]).resolve())
        return uri
    return f"sqlite:///{mlflow_db(root)}"


def sqlite_file(uri: str) -> Path | None:
    """The database file of an absolute sqlite:/// URI, else None."""
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:////") else None


def artifact_location(uri: str, root: Path | None = None) -> str | None:
    """Artifacts beside a local store (not in ./mlruns of the cwd); a server decides its own."""
    db = sqlite_file(uri)
    if db is not None:
        return (db.parent / mlflow_artifacts(root).name).as_uri()
    if uri.startswith(("sqlite:", "postgresql", "mysql", "mssql")):
        return mlflow_artifacts(root).as_uri()
    return None


# A tracking server that stops answering fails the run within ~30 s (3 tries of at most 8 s, 2 s of backoff) instead
# of MLflow's defaults (7 retries, exponential backoff, 120 s timeout: ~8 minutes). Set for this process only, and
# only where the user has not set them. MLflow's own "View run at <URI>" lines (two per run, and a request each) are
# left out: the stages print the runs table's link, without credentials.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "8",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}

_CLIENTS: dict[tuple[str, str], tuple[Any, str]] = {}  # (uri, experiment) -> (client, experiment id), per process
_SHARED: set[tuple[str, str]] = set()  # (parent run, folder) of a sweep's shared inputs known logged (`_shared_inputs`)


def _client(configured: str | None, experiment: str, root: Path | None):
    """(client, experiment id, uri) of tracking.uri `configured` (see `tracking_uri`); creates the store and the
    experiment on first use, once per machine, and keeps both for the rest of the process (a sweep's jobs in one
    process share them)."""
    uri = tracking_uri(configured, root)
    key = (uri, experiment)
    if key not in _CLIENTS:
        if uri.startswith(("http://", "https://")):
            for name, value in HTTP_DEFAULTS.items():
                os.environ.setdefault(name, value)
            if without_credentials(uri) != uri:  # MLflow would print the URI, password included
                os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
        with _server_errors(uri, "opening the experiment"):
            _CLIENTS[key] = _open_experiment(uri, experiment, root)
    client, experiment_id = _CLIENTS[key]
    return client, experiment_id, uri


def _open_experiment(uri: str, name: str, root: Path | None) -> tuple[Any, str]:
    from mlflow.tracking import MlflowClient

    from pipeline.base.locks import machine_lock

    with machine_lock(f"mlflow-store:{uri}", f"the MLflow store {redact(uri)} to be set up"):
        client = MlflowClient(uri)  # opens the store, creating a fresh one's tables
        experiment = client.get_experiment_by_name(name)
        if experiment is not None and _copied_from(experiment.artifact_location, uri, root) is not None:
            _set_aside(client, experiment, uri, root)
            experiment = None
        if experiment is None:
            tags = {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND, RUNS_VIEW_TAG: runs_view()}
            experiment_id = client.create_experiment(name, artifact_location=artifact_location(uri, root), tags=tags)
        else:
            experiment_id = experiment.experiment_id
            # made before the tags were set (or by someone else), or with another version of the view
            for key, value in {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND, RUNS_VIEW_TAG: runs_view()}.items():
                if experiment.tags.get(key) != value:
                    client.set_experiment_tag(experiment_id, key, value)
    close_abandoned_runs(client, uri, root)
    return client, experiment_id


def _copied_from(location: str, uri: str, root: Path | None) -> Path | None:
    """The artifact folder of the project a SQLite store was copied or moved from, when its experiment keeps its
    artifacts there (a folder of the artifact folder's name elsewhere, or a folder in it: a server's experiments get
    <root>/<id>) rather than beside the store; else None. MLflow records an experiment's artifact location as an
    absolute path when it creates it."""
    import urllib.parse

    expected = artifact_location(uri, root)
    if sqlite_file(uri) is None or expected is None or location == expected:
        return None
    parts = urllib.parse.urlsplit(location)
    if parts.scheme not in ("", "file"):
        return None
    where, here = (
        Path(urllib.parse.unquote(parts.path)),
        Path(urllib.parse.unquote(urllib.parse.urlsplit(expected).path)),
    )
    folder = where if where.name == here.name else where.parent if where.parent.name == here.name else None
    return folder if folder is not None and folder != here else None


def _set_aside(client, experiment, uri: str, root: Path | None) -> None:
    """Re-anchor a copied store on open: its experiment, whose runs keep their artifacts in the original project, is
    renamed `<name> (artifacts in <folder>)` (MLflow's API cannot change an artifact location), so that the experiment
    made next under the name keeps this store's runs beside it."""
    origin = _copied_from(experiment.artifact_location, uri, root)
    name, taken = f"{experiment.name} (artifacts in {origin})", 1
    while client.get_experiment_by_name(name) is not None:
        taken += 1
        name = f"{experiment.name} (artifacts in {origin}, {taken})"
    client.rename_experiment(experiment.experiment_id, name)
    log.warning(
        "mlflow: this store was copied from another project: its experiment %r keeps its runs' artifacts in %s; renamed "
        "it %r, and this project's runs go to a new %r with artifacts in %s",
        experiment.name,
        origin,
        name,
        experiment.name,
        artifact_location(uri, root),
    )


def prepare_store(uri: str, experiment: str, root: Path | None = None) -> str:
    """Create the store (tables) and the experiment now; return the experiment id."""
    return _client(uri, experiment, root)[1]


@functools.lru_cache(maxsize=8)
def git_commit(root: Path) -> str | None:
    """HEAD's hash (`-dirty` with uncommitted changes to tracked files); once per process (a sweep's jobs)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _numeric_metrics(metrics: dict) -> dict[str, float]:
    return {k: float(v) for k, v in flatten(metrics).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _params(params: dict) -> list:
    """The composed config as MLflow params: flattened keys, lists/dicts as JSON, values cut at 6,000 chars."""
    from mlflow.entities import Param

    flat = {k: json.dumps(v) if isinstance(v, (list, dict)) else str(v) for k, v in flatten(params).items()}
    return [Param(k, v[:6000]) for k, v in flat.items()]


def params_digest(params: dict) -> str:
    """A short hash of the config that decides the result (every group but `tracking`)."""
    config = {group: value for group, value in params.items() if group != "tracking"}
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:6]


RUN_NAME_CHARS = 40  # what the MLflow runs table shows of a name at its default column width


def default_run_name(params: dict, label: str | None = None, changed: list[str] | None = None) -> str:
    """What sets the run apart from conf/'s defaults (`changed`, overrides: pipeline.config.params.differences), e.g.
    `encoding=learned sweep.w2=10`, or `defaults`; cut to RUN_NAME_CHARS with the config's short hash after it when
    longer, so that names stay distinct; after `label` (a DVC experiment's name) when there is one. Without
    `changed`, what the run is: `6B-50d seed sinusoidal · 3f2a9c`."""
    if changed is None:
        what = f"{params['glove']['name']} {params['texts']['name']} {params['encoding']['name']}"
        return f"{label} · {what}" if label else f"{what} · {params_digest(params)}"
    what = " ".join(changed) or "defaults"
    if len(what) > RUN_NAME_CHARS:
        what = f"{what[: RUN_NAME_CHARS - 1]}… · {params_digest(params)}"
    return f"{label} · {what}" if label else what


def sweep_run_name(overrides: list[str], started: float) -> str:
    """A sweep's parent run: its overrides and when it started, e.g. `sweep sweep.w2=1,10 · 2024-05-14 10:32:07`."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
    return f"sweep {' '.join(overrides) or '(no overrides)'} · {when}"


# In the MLflow UI an HTML artifact is shown as a blob: page, where `figures/x.png` does not resolve: this loads
# the figures from the server's get-artifact endpoint instead. Opened from a downloaded run, the relative paths work.
_FIGURES_FROM_SERVER = """<script>/* MLflow UI: figures from this run's artifacts */
if (location.protocol === "blob:") {{
  const base = new URL(location.href.slice(5)).origin + "/get-artifact?run_uuid={run_id}&path=";
  for (const img of document.querySelectorAll('{selector}'))
    img.src = base + encodeURIComponent(img.getAttribute("src"));
}}
</script>"""


def linked_report(html: str, pngs: dict[Path, str], run_id: str) -> str:
    """The report as logged beside its figures: each embedded figure (an <img data-figure="NAME.png"> with a data
    URI, pipeline.outputs.report, at full size or scaled) of a PNG of `pngs` ({file: its artifact path}) becomes a
    reference to that artifact, at full size, so the run stores every figure once. The report on disk stays
    self-contained."""
    import re

    paths = {png.name: path for png, path in pngs.items()}

    def link(match: re.Match) -> str:
        path = paths.get(match.group(2))
        return f'{match.group(1)}src="{path}"' if path else match.group(0)

    html = re.sub(r'(data-figure="([^"]+)" )src="data:image/png;base64,[^"]*"', link, html)  # one pass over the page
    folders = sorted({path.rpartition("/")[0] + "/" for path in pngs.values() if "/" in path})
    if not folders:
        return html
    script = _FIGURES_FROM_SERVER.format(run_id=run_id, selector=", ".join(f'img[src^="{f}"]' for f in folders))
    return html.replace("</body>", script + "</body>", 1)


def _datasets(params: dict, layout: "Layout") -> list:
    """The GloVe store and the texts as MLflow dataset inputs (the runs table's Datasets column): digests from
    the store manifest's SHA-256 and the tokens file; nothing of the data itself is copied."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    from pipeline.base.files import read_json, sha256_file

    manifest = read_json(layout.glove_manifest)
    glove = Dataset(
        name=f"glove {params['glove']['name']}",
        digest=manifest["vectors_sha256"][:12],
        source_type="local",
        source=json.dumps(
            {
                "uri": layout.glove_dir.resolve().as_uri(),
                "vectors_sha256": manifest["vectors_sha256"],
                "vocab_sha256": manifest["vocab_sha256"],
                "origin": manifest.get("origin"),
            }
        ),
        profile=json.dumps({"rows": manifest["rows"], "dim": manifest["dim"], "dtype": manifest["dtype"]}),
    )
    tokens_sha = sha256_file(layout.tokens)
    texts = params["texts"]
    texts_ds = Dataset(
        name=f"texts {texts['name']}",
        digest=tokens_sha[:12],
        source_type="local",
        source=json.dumps(
            {"uri": layout.tokens.resolve().as_uri(), "tokens_sha256": tokens_sha, "texts_file": texts.get("file")}
        ),
        profile=json.dumps({"sentences": len(read_json(layout.tokens)["texts"])}),
    )
    return [
        DatasetInput(glove, [InputTag("mlflow.data.context", "embeddings")]),
        DatasetInput(texts_ds, [InputTag("mlflow.data.context", "texts")]),
    ]


# What a store says when two writers insert the same row at once (SQLite, PostgreSQL, MySQL)
_DUPLICATE_ROW = ("UNIQUE constraint failed", "duplicate key value violates unique constraint", "Duplicate entry")


def _log_inputs(client, run_id: str, datasets: list, tries: int = 5) -> None:
    """client.log_inputs, retried when a concurrent run inserted the same dataset first: MLflow's store looks the
    dataset up, then inserts it, so two jobs of a parallel sweep logging one new dataset at once both insert and
    one fails the datasets table's UNIQUE constraint (its transaction rolled back). The retry finds the row."""
    for attempt in range(tries):
        try:
            client.log_inputs(run_id, datasets=datasets)
            return
        except Exception as exc:
            if attempt == tries - 1 or not any(text in str(exc) for text in _DUPLICATE_ROW):
                raise
            time.sleep(0.1 * (attempt + 1))


def _shared_inputs(client, layout: "Layout", shared_with: str) -> str:
    """Log the inputs every job of a sweep shares (GloVe manifest, tokens, encoding summary) once, on the sweep's
    parent run `shared_with`, under inputs/<digest>/; returns that artifact folder. Digest: of the files' bytes."""
    from pipeline.base.files import sha256_file

    files = [path for path in (layout.glove_manifest, layout.tokens, layout.encode_summary) if path.exists()]
    digest = hashlib.sha256("".join(f"{p.name}:{sha256_file(p)}" for p in files).encode()).hexdigest()[:12]
    folder = f"inputs/{digest}"
    # an earlier job may have logged them; known to this process, not asked again (docs/benchmarks.md#the-pipeline)
    if (shared_with, folder) not in _SHARED and not client.list_artifacts(shared_with, folder):
        for path in files:
            _log_file(client, shared_with, path, folder)
    _SHARED.add((shared_with, folder))
    return folder


def artifact_name(path: Path) -> str:
    """The name `path` is logged under: its own, or <name>.gz above COMPRESS_ABOVE bytes."""
    return f"{path.name}.gz" if path.stat().st_size > COMPRESS_ABOVE else path.name


def _log_file(client, run_id: str, path: Path, folder: str | None) -> None:
    """Log one file under `folder`, gzip-compressed (reproducibly: no name or time in the header) when large."""
    import gzip
    import shutil
    import tempfile

    name = artifact_name(path)
    if name == path.name:
        client.log_artifact(run_id, str(path), folder)
        return
    with tempfile.TemporaryDirectory() as tmp:
        packed = Path(tmp) / name
        with path.open("rb") as src, packed.open("wb") as raw, gzip.GzipFile("", "wb", 6, raw, mtime=0) as out:
            shutil.copyfileobj(src, out, 1 << 20)
        client.log_artifact(run_id, str(packed), folder)


def log_result(
    params: dict,
    layout: "Layout",
    root: Path,
    *,
    artifacts: tuple[tuple[str, str], ...],
    run_name: str | None = None,
    parent_run_id: str | None = None,
    extra_tags: dict[str, str] | None = None,
    start_time: int | None = None,
    share_inputs: bool = False,
    previous: dict | None = None,
) -> dict[str, Any]:
    """Log one pipeline result (the outputs of `layout`) as one MLflow run; returns its ids, URI, name and times.

    params: the composed config (flattened into params, with the metrics in one log_batch); datasets: the GloVe
    store and the texts (`_datasets`); artifacts: (Layout attribute, artifact folder) of each output to log, the
    registry's `logged_outputs` (figures, metrics, plot data, the report with its figures referenced:
    `_log_artifacts`), and as `inputs/` the params, GloVe manifest (not the store), tokens and encoding summary. share_inputs (a sweep's child run): the inputs all jobs share are logged once, on the parent run
    (`_shared_inputs`; tag `shared_inputs` names the folder), and only params.yaml on the child. previous: the
    record of the previous run of this result (the DVC path's mlflow_last_run.json): an input file unchanged since
    (same SHA-256, same store, that run still there) is not uploaded again; tag `inputs.<file>` names the run
    holding it (`_reused_inputs`); the record returned lists where each input is (`inputs`).
    run_name: default `default_run_name(params, $DVC_EXP_NAME)`; start_time (ms): when the pipeline started
    (default now); the run ends when its logging does. A tracking server that stops answering raises one
    PipelineError (within ~30 s); the run is then ended FAILED, now or by the next run that reaches the server.
    """
    client, experiment_id, uri = _client(params["tracking"]["uri"], params["tracking"]["experiment"], root)
    tags = _run_tags(params, root, extra_tags, parent_run_id)
    name = run_name or default_run_name(params, os.environ.get("DVC_EXP_NAME"))
    with _server_errors(uri, "creating the run"):
        run = client.create_run(experiment_id, run_name=name, tags=tags, start_time=start_time)
    run_id = run.info.run_id
    pending = _pending(root, uri, run_id)
    try:
        with _server_errors(uri, "its params, metrics and artifacts", run_id):
            where = _log_run(
                client, run_id, params, layout, artifacts, (uri, experiment_id), parent_run_id, share_inputs, previous
            )
            end_time = int(time.time() * 1000)
            client.set_terminated(run_id, "FINISHED", end_time=end_time)
    except PipelineError:
        raise  # the server stopped answering: the run stays pending, ended FAILED by the next run that reaches it
    except BaseException as exc:
        _end_unfinished(client, uri, run_id, exc)
        pending.unlink(missing_ok=True)
        raise
    pending.unlink(missing_ok=True)
    return {
        "run_id": run_id,
        "experiment_id": experiment_id,
        "tracking_uri": redact(uri),
        "run_name": name,
        "start_time": run.info.start_time,
        "end_time": end_time,
        "inputs": where,
    }


def _run_tags(params: dict, root: Path, extra_tags: dict[str, str] | None, parent_run_id: str | None) -> dict:
    tags = {
        "git_commit": git_commit(root) or "unknown",
        "glove": params["glove"]["name"],
        "texts": params["texts"]["name"],
        "params_digest": params_digest(params),
        **(extra_tags or {}),
    }
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    return tags


def _log_run(
    client,
    run_id: str,
    params: dict,
    layout: "Layout",
    artifacts: tuple[tuple[str, str], ...],
    store: tuple[str, str],
    parent_run_id: str | None,
    share_inputs: bool,
    previous: dict | None,
) -> dict:
    """Log the run's params, metrics, datasets, inputs and artifacts (log_result says which); store: (tracking URI,
    experiment id). Returns where each input file is ({file name: {"sha256", "run_id"}})."""
    from mlflow.entities import Metric, RunTag

    from pipeline.base.files import read_json

    metrics = read_json(layout.metrics)
    now = int(time.time() * 1000)
    inputs = [
        path for path in (layout.params, layout.glove_manifest, layout.tokens, layout.encode_summary) if path.exists()
    ]
    if share_inputs and parent_run_id:
        folder = _shared_inputs(client, layout, parent_run_id)
        input_tags = [RunTag("shared_inputs", f"{folder}/ of the parent run {parent_run_id}")]
        inputs, where = [layout.params], {}
    else:
        same = previous and [previous.get(k) for k in ("tracking_uri", "experiment_id")] == [redact(store[0]), store[1]]
        inputs, input_tags, where = _reused_inputs(client, run_id, inputs, previous.get("inputs") if same else None)
    client.log_batch(
        run_id,
        params=_params(params),
        tags=[*input_tags, *_note(layout.headline_metrics)],
        metrics=[Metric(k, v, now, 0) for k, v in _numeric_metrics(metrics).items()],
    )
    if layout.glove_manifest.exists() and layout.tokens.exists():
        _log_inputs(client, run_id, _datasets(params, layout))
    _log_artifacts(client, run_id, layout, artifacts, inputs)
    return where


def _note(headline: Path) -> list:
    """The run's description (MLflow shows it on the run's page in its GenAI and model-training modes alike): the
    numbers of reports/headline.json, one line each; none without that file."""
    from mlflow.entities import RunTag

    from pipeline.base.files import read_json

    lines = [f"- `{name}` = {value}" for name, value in (read_json(headline) if headline.exists() else {}).items()]
    intro = "The headline (reports/headline.json; every metric under Model metrics):"
    return [RunTag("mlflow.note.content", "\n".join([intro, "", *lines]))] if lines else []


def _end_unfinished(client, uri: str, run_id: str, exc: BaseException) -> None:
    """End a run its logging did not finish: KILLED on a stop signal (as MLflow says it), else FAILED; tag the error."""
    from pipeline.base.stops import Interrupted

    stopped = isinstance(exc, (Interrupted, KeyboardInterrupt))
    with _server_errors(uri, "ending the run", run_id):
        client.set_terminated(run_id, "KILLED" if stopped else "FAILED")
        reason = f"interrupted by {exc.name}" if isinstance(exc, Interrupted) else f"{type(exc).__name__}: {exc}"
        client.set_tag(run_id, "error", redact(reason)[:5000])


def _reused_inputs(client, run_id: str, files: list[Path], previous: dict | None) -> tuple[list[Path], list, dict]:
    """Which input files `run_id` uploads: those not unchanged since the previous run of this result (`previous`:
    {file name: {"sha256", "run_id" holding it}}, or None). Returns (files to upload, a tag `inputs.<name>` =
    `runs:/<run>/inputs/<name>` per reused file, {file name: {"sha256", "run_id"}} for the next run)."""
    from mlflow.entities import RunTag

    from pipeline.base.files import sha256_file

    upload, tags, where, active = [], [], {}, {}
    for path in files:
        digest, before = sha256_file(path), (previous or {}).get(path.name)
        holder = before["run_id"] if before and before.get("sha256") == digest else None
        if holder and holder not in active:
            try:
                active[holder] = client.get_run(holder).info.lifecycle_stage == "active"
            except Exception:  # noqa: BLE001 - deleted for good, or never in this store: upload the file again
                active[holder] = False
        if holder and active[holder]:
            tags.append(RunTag(f"inputs.{path.name}", f"runs:/{holder}/inputs/{artifact_name(path)}"))
        else:
            upload.append(path)
            holder = run_id
        where[path.name] = {"sha256": digest, "run_id": holder}
    return upload, tags, where


def _log_artifacts(client, run_id: str, layout: "Layout", artifacts: tuple[tuple[str, str], ...], inputs: list[Path]):
    """Each output of `artifacts` ((Layout attribute, artifact folder)) under its folder, an HTML page with the PNGs
    of the logged folders referenced (`linked_report`), and `inputs`, each once (large files compressed:
    `_log_file`). An output that a partial result
    lacks (a test's tree without the report) is left out: these outputs are the figures stage's inputs or its own
    outputs, so DVC has checked that they exist."""
    import tempfile

    logged = [(getattr(layout, name), folder or None) for name, folder in artifacts]
    logged = [(path, folder) for path, folder in logged if path.exists()]
    pngs = {
        png: f"{folder}/{png.name}" if folder else png.name
        for path, folder in logged
        if path.is_dir()
        for png in sorted(path.glob("*.png"))
    }
    from pipeline.base.progress import Progress

    progress = Progress("mlflow: artifacts", len(logged) + len(inputs))
    for done, (path, folder) in enumerate(logged, 1):
        if path.is_dir():
            client.log_artifacts(run_id, str(path), folder)
        elif path.suffix == ".html":
            with tempfile.TemporaryDirectory() as tmp:
                page = Path(tmp) / path.name
                page.write_text(linked_report(path.read_text(encoding="utf-8"), pngs, run_id), encoding="utf-8")
                client.log_artifact(run_id, str(page), folder)
        else:
            _log_file(client, run_id, path, folder)
        progress.update(done)
    for done, path in enumerate(inputs, len(logged) + 1):
        _log_file(client, run_id, path, "inputs")
        progress.update(done)


# ---------------------------------------------------------------- a store that cannot be used, runs left RUNNING


def _unreachable(exc: BaseException) -> bool:
    """Whether `exc` says an HTTP tracking server did not answer (refused, reset, timed out, retries exhausted)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__module__.startswith(("requests", "urllib3")) or isinstance(exc, (ConnectionError, TimeoutError)):
            return True
        text = str(exc)
        if "API request to" in text and any(
            word in text
            for word in ("Max retries exceeded", "timed out", "timeout", "Connection", "RemoteDisconnected")
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@contextlib.contextmanager
def _server_errors(uri: str, doing: str, run_id: str | None = None):
    """A server that stops answering while we `doing`: one PipelineError (credentials redacted) that says what
    became of the run: none was logged, or `run_id` is left for the next run that reaches the server to end."""
    try:
        yield
    except Exception as exc:
        http = uri.startswith(("http://", "https://"))
        garbled = http and "not in a valid JSON format" in str(exc)  # something else answers there: 200 OK, no JSON
        if not garbled and not (http and _unreachable(exc)):
            raise
        reason = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)[:300]
        outcome = f"run {run_id} is incomplete: the next run that reaches the server ends it FAILED" if run_id else ""
        what = "answers, but not with MLflow's JSON" if garbled else "stopped answering"
        raise PipelineError(
            f"the MLflow tracking server at {redact(uri)} {what} while logging ({doing}: {reason}); "
            f"{outcome or 'nothing was logged'}. Fix: start it again, or point tracking.uri / MLFLOW_TRACKING_URI at "
            "a running one (`python -m pipeline.server`, see README), and re-run; or log locally (unset "
            "MLFLOW_TRACKING_URI) or use tracking=disabled."
        ) from None


def _pending(root: Path | None, uri: str, run_id: str) -> Path:
    """Record that this process is logging `run_id` (a job's run, or a sweep's parent run), until it ends the run and
    removes the record. A record left behind (the process was killed, or the server stopped answering) lets the next
    process that opens the store end the run as FAILED (`close_abandoned_runs`). Holds no URI, only its hash."""
    from pipeline.base.files import write_json
    from pipeline.base.paths import mlflow_pending

    path = mlflow_pending(root) / f"{run_id}.json"
    record = {"run_id": run_id, "store": _store_key(uri), "pid": os.getpid(), "host": socket.gethostname()}
    write_json(path, {**record, "created": time.time()})
    return path


def _store_key(uri: str) -> str:
    return hashlib.sha256(uri.encode()).hexdigest()[:16]


def _alive(record: dict) -> bool:
    """Whether the process that wrote a pending record may still be logging (same host and pid alive, or another
    host and less than a day old)."""
    if record.get("host") != socket.gethostname():
        return time.time() - record.get("created", 0) < 86400
    from pipeline.base.processes import running

    return running(record["pid"], started_by=record.get("created"))


def close_abandoned_runs(
    client, uri: str, root: Path | None, status: str = "FAILED", why: str | None = None, ours: bool = False
) -> list[str]:
    """End as `status` (FAILED; KILLED after a stop signal, `why`) the runs of this store that a killed process (a
    job, or a sweep's launcher), or a server that stopped answering, left RUNNING (their pending records; with
    `ours`, those of this process too); returns their ids."""
    from pipeline.base.files import read_json
    from pipeline.base.paths import mlflow_pending

    closed = []
    folder = mlflow_pending(root)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = read_json(path)
        except (OSError, ValueError):
            continue
        mine = ours and record.get("pid") == os.getpid() and record.get("host") == socket.gethostname()
        if record.get("store") != _store_key(uri) or (_alive(record) and not mine):
            continue
        run_id = record["run_id"]
        try:
            if client.get_run(run_id).info.status == "RUNNING":
                client.set_tag(
                    run_id,
                    "error",
                    why
                    or "the process logging this run was killed, or the tracking server stopped answering: the run "
                    "is incomplete",
                )
                client.set_terminated(run_id, status)
                closed.append(run_id)
        except Exception as exc:  # noqa: BLE001 - deleted run, or a store that no longer knows it: nothing to end
            if _unreachable(exc):
                raise  # the record stays for a run that reaches the server
            log.debug("pending run %s: %s", run_id, redact(str(exc)))
        path.unlink(missing_ok=True)
    if closed and status == "FAILED":
        log.warning(
            "mlflow: ended %d run(s) left RUNNING by a killed process or a lost server as FAILED: %s",
            len(closed),
            ", ".join(closed),
        )
    return closed


def fail_put_back(record: dict, root: Path) -> str:
    """End FAILED the run of `record` (mlflow_last_run.json, pipeline.outputs.run_record), whose results
    pipeline.repro put back; returns the words that say so, for the run's last line."""
    from mlflow.tracking import MlflowClient

    run_id, uri = record["run_id"], record["tracking_uri"]
    uri = tracking_uri(None, root) if "***" in uri else uri  # the password came from MLFLOW_TRACKING_URI
    try:
        _end_unfinished(MlflowClient(uri), uri, run_id, RuntimeError("its results were put back by pipeline.repro"))
    except Exception as exc:  # noqa: BLE001 - the workspace is back; say what became of the run
        return f"; the MLflow run {run_id} it logged could not be ended FAILED ({redact(str(exc))[:300]})"
    return f"; the MLflow run {run_id} it logged is ended FAILED"


def log_failed_run(
    params: dict,
    root: Path,
    *,
    run_name: str,
    error: str,
    parent_run_id: str | None = None,
    extra_tags: dict[str, str] | None = None,
) -> str:
    """Record a job that failed as a FAILED run (its config as params, the error as tag `error`); returns its id."""
    client, experiment_id, uri = _client(params["tracking"]["uri"], params["tracking"]["experiment"], root)
    tags = {"error": redact(error)[:5000], "git_commit": git_commit(root) or "unknown", **(extra_tags or {})}
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    with _server_errors(uri, "recording a failed job"):
        run_id = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
        try:
            client.log_batch(run_id, params=_params(params))
        finally:
            client.set_terminated(run_id, "FAILED")
    return run_id


def check_reachable(configured: str | None, root: Path | None = None) -> None:
    """Fail early, before any computing, when the store of tracking.uri `configured` (see `tracking_uri`) cannot be
    used: an HTTP URI with a query string or fragment (MLflow's client appends its API paths to the whole URI, so none
    of its requests would reach the server), an HTTP tracking server that does not answer `OK` on /health
    (credentials in the URI, `http://user:password@host`, or in MLFLOW_TRACKING_USERNAME / _PASSWORD, are sent as
    HTTP Basic auth, MLFLOW_TRACKING_TOKEN as a bearer token, as MLflow sends them, and never printed), or a SQLite
    store file that is damaged or no database (`check_sqlite_store`)."""
    uri = tracking_uri(configured, root)
    if sqlite_file(uri) is not None:
        check_sqlite_store(sqlite_file(uri))
    if not uri.startswith(("http://", "https://")):
        return
    import base64
    import http.client
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(uri)
    address = urllib.parse.urlsplit(without_credentials(uri))
    if parts.query or parts.fragment:
        bare = urllib.parse.urlunsplit((address.scheme, address.netloc, address.path, "", ""))
        raise PipelineError(
            f"the MLflow tracking URI {redact(uri)} has a {'query string' if parts.query else 'fragment'}: MLflow's "
            "client appends its API paths (/api/2.0/...) to the whole URI, so none of its requests would reach the "
            f"server. Fix: give the server's address alone ({bare}), and a token in MLFLOW_TRACKING_TOKEN (or a user "
            "and password in MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD), which MLflow sends as headers."
        )
    health = urllib.parse.urlunsplit((address.scheme, address.netloc, address.path.rstrip("/") + "/health", "", ""))
    request = urllib.request.Request(health)
    user, password = parts.username, parts.password
    if user is None and os.environ.get("MLFLOW_TRACKING_USERNAME"):
        user, password = os.environ["MLFLOW_TRACKING_USERNAME"], os.environ.get("MLFLOW_TRACKING_PASSWORD", "")
    if user is not None:
        basic = urllib.parse.unquote(user) + ":" + urllib.parse.unquote(password or "")
        request.add_header("Authorization", "Basic " + base64.b64encode(basic.encode()).decode())
    elif os.environ.get("MLFLOW_TRACKING_TOKEN"):
        request.add_header("Authorization", f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = response.read(64)
    except http.client.HTTPException:  # not HTTP (e.g. BadStatusLine): refused below as no MLflow server
        answer = b""
    except (OSError, ValueError) as exc:
        raise PipelineError(
            f"MLflow server {redact(uri)} does not answer ({redact(str(exc))}): start it (`python -m "
            "pipeline.server`, see README), fix tracking.uri / MLFLOW_TRACKING_URI, or use "
            "tracking=disabled."
        ) from None
    if answer.strip() != b"OK":
        raise PipelineError(
            f"{redact(uri)} answers, but not as an MLflow tracking server (GET {health} did not say OK): fix "
            "tracking.uri / MLFLOW_TRACKING_URI (the server's address, e.g. http://127.0.0.1:5000), or use "
            "tracking=disabled."
        )


@functools.cache
def check_sqlite_store(db: Path) -> None:
    """Refuse a SQLite store file that is damaged (truncated, a corrupted page) or not a database: `PRAGMA
    quick_check` on a read-only connection, once per process and file (a sweep's jobs share one check), since it
    reads the whole file (docs/benchmarks-measurements.md#files-and-parsing). A missing file is fine (the first run
    creates it); a store locked or unreadable is left to MLflow (its own message)."""
    import shlex
    import sqlite3
    import urllib.parse

    if not db.is_file():
        return
    try:
        with contextlib.closing(sqlite3.connect(f"file:{urllib.parse.quote(str(db))}?mode=ro", uri=True)) as con:
            problems = [row[0] for row in con.execute("PRAGMA quick_check")]
    except sqlite3.OperationalError:  # locked, unreadable: not damage
        return
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        problems = [str(exc)]
    if problems != ["ok"]:
        name = shlex.quote(str(db))
        raise PipelineError(
            f"the MLflow store {db} is damaged ({'; '.join(problems[:3])[:300]}), so no run can be logged to it. "
            f"Fix: move it aside (`mv {name} {name}.broken`; the next run creates a new, empty store), or recover "
            f"what it holds into a new file first (`sqlite3 {name} .recover | sqlite3 {name}.recovered`)."
        )
