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
    """File layout of one pipeline result, relative to `base` (the checkout, or a Hydra job dir)."""

    base: Path
    glove: Path | None = None  # the GloVe store, when shared between results (Hydra jobs)

    @property
    def glove_dir(self) -> Path:
        return self.glove or self.base / "data" / "glove"

    @property
    def tokens(self) -> Path:
        return self.base / "data" / "tokens" / "tokens.json"

    @property
    def encode_dir(self) -> Path:
        return self.base / "data" / "encode"

    @property
    def sweep_dir(self) -> Path:
        return self.base / "data" / "sweep"

    @property
    def reports(self) -> Path:
        return self.base / "reports"

    @property
    def metrics(self) -> Path:
        return self.reports / "metrics.json"

    @property
    def plots_dir(self) -> Path:
        return self.reports / "plots"

    @property
    def figures_dir(self) -> Path:
        return self.reports / "figures"

    @property
    def mlflow_run(self) -> Path:
        return self.reports / "mlflow_run.json"
