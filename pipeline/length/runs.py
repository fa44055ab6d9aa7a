"""The experiment's grid of runs (task x family x seed), the store that keeps them, and the workers that train them.

The run store (pipeline.base.paths.length_run_store: data/cache/length-runs/ of the project, machine-local, shared by
DVC runs, DVC queue copies and Hydra jobs) holds one folder per run, named by its key: the SHA-256 of everything
that decides the run's result (its RunSpec, the device type, torch's version, and the source of the code that
trains it: CODE). A finished run's folder holds result.json, cost.json and model.pt; an interrupted one's its last
checkpoint. A run whose result is in the store is read, not trained again; one with a checkpoint resumes from it.
So a killed experiment resumes where it stopped, a config that changes some runs trains only those, and a sweep's
jobs and a later `dvc repro` share what either trained. Two processes never train one key at once: each run is
trained under a machine-wide lock of its key (pipeline.base.locks), and the second reads what the first wrote.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Iterable

from pipeline.base.files import read_json, sha256_file, write_json
from pipeline.base.progress import Progress
from pipeline.length.model import Spec
from pipeline.length.train import RunSpec

log = logging.getLogger("pipeline")

# The code a run's result depends on (relative to the checkout; folders: every .py in them): the encodings it uses,
# the data, the model, training and evaluation
CODE = ("pipeline/core", "pipeline/length/tasks.py", "pipeline/length/model.py", "pipeline/length/train.py")


def plan(cfg: Any) -> list[RunSpec]:
    """The runs of the length config `cfg` (pipeline.config.schema.LengthConfig): tasks x families x seeds, in
    that order."""
    from pipeline.length.tasks import positions, vocabulary

    test_length = cfg.test_factor * cfg.train_length
    runs = []
    for task in cfg.tasks:
        for family in cfg.families:
            for seed in cfg.seeds:
                model = Spec(
                    family=family,
                    vocab=vocabulary(cfg.symbols),
                    positions=positions(test_length),
                    seed=seed,
                    d_model=cfg.model.d_model,
                    layers=cfg.model.layers,
                    heads=cfg.model.heads,
                    mlp=cfg.model.mlp,
                    rope_base=cfg.rope.base,
                    rope_layout=cfg.rope.layout,
                    rope_scaling=cfg.rope.scaling,
                    rope_factor=float(cfg.rope.factor or cfg.test_factor),
                    rope_context=positions(cfg.train_length),
                    learned_init=cfg.learned.init,
                    learned_scale=cfg.learned.scale,
                )
                runs.append(
                    RunSpec(
                        task=task,
                        model=model,
                        symbols=cfg.symbols,
                        train_length=cfg.train_length,
                        test_length=test_length,
                        steps=cfg.train.steps,
                        batch=cfg.train.batch,
                        lr=cfg.train.lr,
                        weight_decay=cfg.train.weight_decay,
                        clip=cfg.train.clip,
                        eval_batch=cfg.eval_batch,
                        eval_seed=cfg.eval_seed,
                        checkpoint_every=cfg.train.checkpoint_every,
                    )
                )
    return runs


def code_digest(root: Path | None = None) -> str:
    """SHA-256 of the source files of CODE (names and bytes, in a fixed order) under `root`, by default the checkout
    this package was imported from: the code that trains."""
    root = root or Path(__file__).resolve().parents[2]
    files = []
    for entry in CODE:
        path = root / entry
        files += sorted(path.glob("*.py")) if path.is_dir() else [path]
    listing = "".join(f"{p.relative_to(root).as_posix()}:{sha256_file(p)}\n" for p in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def run_key(run: RunSpec, device_type: str, code: str) -> str:
    """The store's name of a run: a SHA-256 of what decides its result."""
    import torch

    spec = {**run._asdict(), "model": run.model._asdict(), "device": device_type, "torch": torch.__version__}
    return hashlib.sha256((json.dumps(spec, sort_keys=True) + code).encode()).hexdigest()[:24]


def _train_in_store(item: tuple[RunSpec, str, str]) -> tuple[dict, dict]:
    """(result, cost) of one run in its store folder: read when finished, else trained (resumed from a checkpoint)
    under the key's lock; a worker's task (a module-level function: the pool pickles it)."""
    import torch

    from pipeline.base.locks import machine_lock
    from pipeline.length.train import run_one

    run, folder, device = item
    folder_path = Path(folder)
    done = folder_path / "result.json"
    if not done.exists():
        with machine_lock(f"length-run:{folder}", f"the run {run.label} ({folder}) to be trained", timeout=7 * 86400):
            if not done.exists():  # trained meanwhile by another process
                folder_path.mkdir(parents=True, exist_ok=True)
                resumed = (folder_path / "checkpoint.pt").exists()
                log.info("length: %s: %s", run.label, "resuming from its checkpoint" if resumed else "training")
                result, cost = run_one(run, folder_path, torch.device(device))
                write_json(folder_path / "cost.json", cost)
                write_json(done, result)  # last: the run counts as finished once this exists
                # as stored (floats at write_json's precision): a run read back later gives the same numbers
                return read_json(done), {**cost, "trained": True}
    return read_json(done), {**read_json(folder_path / "cost.json"), "trained": False}


def compute(runs: list[RunSpec], store: Path, device: Any, workers: int) -> list[tuple[dict, dict]]:
    """(result, cost) of every run, in order: from the store, or trained into it by `workers` forked processes (one
    thread each) on the CPU, in this process on a GPU (CUDA does not survive a fork)."""
    from pipeline.base import worker_pool

    code = code_digest()
    items = [(run, str(store / run_key(run, device.type, code)), str(device)) for run in runs]
    missing = sum(not (Path(folder) / "result.json").exists() for _, folder, _ in items)
    log.info(
        "length: %d run(s), %d in the store (%s), %d to train on %s",
        len(runs),
        len(runs) - missing,
        store,
        missing,
        device,
    )
    processes = min(workers, missing) if device.type == "cpu" and missing > 1 else 0
    out, progress = [], Progress("length: runs", len(items))
    with worker_pool.imap(_train_in_store, items, processes) as results:
        for done, (result, cost) in enumerate(results, 1):
            out.append((result, cost))
            progress.update(done)
    return out


def folders(runs: Iterable[RunSpec], store: Path, device_type: str) -> list[Path]:
    """The store folder of each run (for tests and for reading a run's weights)."""
    code = code_digest()
    return [store / run_key(run, device_type, code) for run in runs]
