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
# What a run takes from the config as it is: (group, key) of the model's Spec (as <group>_<key>), and length.train's keys
RECEIVED = (("rope", "base"), ("rope", "layout"), ("rope", "scaling"), ("learned", "init"), ("learned", "scale"))
TRAINING = ("steps", "batch", "weight_decay", "clip", "checkpoint_every", "criterion", "validate_every")
TRAINING += ("validation_batch", "validation_seed")


def plan(cfg: Any, chosen: dict | None = None, seeds: list[int] | None = None) -> list[RunSpec]:
    """The runs of the length config `cfg` (pipeline.config.schema.LengthConfig): tasks x families x seeds (default
    cfg.seeds), in that order, each at the learning rate `chosen` (`choose`) gives its task and family (default: the
    first of the search, cfg.train.lrs[0])."""
    from pipeline.length.tasks import positions, vocabulary

    test_length = cfg.test_factor * cfg.train_length
    t, context = cfg.train, positions(cfg.train_length)
    shared = {k: getattr(cfg.model, k) for k in ("d_model", "layers", "heads", "mlp")} | {
        f"{group}_{k}": getattr(getattr(cfg, group), k) for group, k in RECEIVED
    }
    training = {k: getattr(t, k) for k in TRAINING} | {
        k: getattr(cfg, k) for k in ("symbols", "eval_batch", "eval_seed")
    }
    runs = []
    for task, family in ((task, family) for task in cfg.tasks for family in cfg.families):
        lr = (chosen or {}).get(task, {}).get(family, {}).get("lr", t.lrs[0])
        for seed in cfg.seeds if seeds is None else seeds:
            random_range = cfg.random_range if family == "randomized" else 0
            model = Spec(
                family, vocabulary(cfg.symbols), positions(test_length), seed, **shared, random_range=random_range
            )
            model = model._replace(rope_factor=float(cfg.rope.factor or cfg.test_factor), rope_context=context)
            runs.append(RunSpec(task, model, train_length=cfg.train_length, test_length=test_length, lr=lr, **training))
    return runs


def search(cfg: Any) -> list[RunSpec]:
    """The learning-rate search: every (task, family) at each of cfg.train.lrs, seed cfg.train.search_seed (none
    for a single learning rate)."""
    if len(cfg.train.lrs) < 2:
        return []
    return [run._replace(lr=lr) for run in plan(cfg, seeds=[cfg.train.search_seed]) for lr in cfg.train.lrs]


def choose(results: list[dict]) -> dict[str, dict[str, dict]]:
    """task -> family -> the learning rate the search chose and its evidence, on held-out in-range validation only:
    the rate that reached the criterion in the fewest steps, else the one with the best last validation; ties go to
    the smaller rate."""
    chosen: dict[str, dict[str, dict]] = {}
    for r in results:
        entry = chosen.setdefault(r["task"], {}).setdefault(r["family"], {"search": {}})
        entry["search"][f"{r['lr']:g}"] = {k: r[k] for k in ("steps", "converged")} | {
            "validation": r["validations"][-1]
        }
    for entry in (e for families in chosen.values() for e in families.values()):
        rank = {
            lr: (not s["converged"], s["steps"] if s["converged"] else -s["validation"], float(lr))
            for lr, s in entry["search"].items()
        }
        entry["lr"] = float(min(rank, key=rank.get))
    return chosen


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


def _train_in_store(item: tuple[RunSpec, str, str, tuple]) -> tuple[dict, dict, list[dict]]:
    """(result, cost, the extended results) of one run in its store folder: read when finished, else trained (resumed
    from a checkpoint) under the key's lock; a RoPE run's `extensions` (scaling, factor) evaluated at test time
    (`extend`); a worker's task (a module-level function: the pool pickles it)."""
    import torch

    from pipeline.base.locks import machine_lock
    from pipeline.length.train import checkpoints, run_one

    run, folder, device, extensions = item
    folder_path = Path(folder)
    done = folder_path / "result.json"
    cost = None
    if not done.exists():
        with machine_lock(f"length-run:{folder}", f"the run {run.label} ({folder}) to be trained", timeout=7 * 86400):
            if not done.exists():  # trained meanwhile by another process
                folder_path.mkdir(parents=True, exist_ok=True)
                resumed = bool(checkpoints(folder_path))
                log.info("length: %s: %s", run.label, "resuming from its checkpoint" if resumed else "training")
                result, cost = run_one(run, folder_path, torch.device(device))
                write_json(folder_path / "cost.json", cost)
                write_json(done, result)  # last: the run counts as finished once this exists
    # as stored (floats at write_json's precision): a run read back later gives the same numbers
    result = read_json(done)
    cost = {**(cost or read_json(folder_path / "cost.json")), "trained": cost is not None}
    extended = extend(run, result, folder_path, torch.device(device), extensions) if run.model.family == "rope" else []
    return result, cost, extended


def extension_family(scaling: str, factor: float) -> str:
    """The name of a test-time extension's rows: rope_pi_2x, rope_ntk_3x, ... (position interpolation: linear)."""
    return f"rope_{'pi' if scaling == 'linear' else scaling}_{factor:g}x"


def extend(run: RunSpec, result: dict, folder: Path, device: Any, extensions: Iterable[tuple[str, float]]) -> list:
    """The trained RoPE run's model (folder/model.pt) evaluated with each (scaling, factor) of pipeline.core.
    rope_scaling applied at test time, no fine-tuning (pipeline.length.model.rescaled): one result each, its family
    `extension_family`, kept in the folder (extended-<scaling>-<factor>.json) once computed."""
    import torch

    from pipeline.length.model import build, rescaled
    from pipeline.length.train import deterministic, evaluate

    out, model = [], None
    for scaling, factor in extensions:
        path = folder / f"extended-{scaling}-{factor:g}.json"
        if not path.exists():
            if model is None:
                deterministic(device)
                model = build(run.model, device)
                model.load_state_dict(torch.load(folder / "model.pt", map_location=device, weights_only=True))
            write_json(path, evaluate(rescaled(model, scaling, factor), run, device))
        out.append({**result, **read_json(path), "family": extension_family(scaling, factor)})
    return out


def compute(
    runs: list[RunSpec], store: Path, device: Any, workers: int, extensions: tuple = ()
) -> list[tuple[dict, dict]]:
    """(result, cost) of every run, in order, then of every RoPE run's test-time `extensions` ((scaling, factor)
    pairs): from the store, or trained into it by `workers` forked processes (one thread each) on the CPU, in this
    process on a GPU (CUDA does not survive a fork)."""
    from pipeline.base import worker_pool

    code = code_digest()
    items = [(run, str(store / run_key(run, device.type, code)), str(device), extensions) for run in runs]
    missing = sum(not (Path(item[1]) / "result.json").exists() for item in items)
    log.info(
        "length: %d run(s), %d in the store (%s), %d to train on %s",
        len(runs),
        len(runs) - missing,
        store,
        missing,
        device,
    )
    processes = min(workers, missing) if device.type == "cpu" and missing > 1 else 0
    out, extended, progress = [], [], Progress("length: runs", len(items))
    with worker_pool.imap(_train_in_store, items, processes) as results:
        for done, (result, cost, more) in enumerate(results, 1):
            out.append((result, cost))
            extended += [(r, {"cpu_seconds": 0.0, "trained": False}) for r in more]
            progress.update(done)
    return out + extended


def folders(runs: Iterable[RunSpec], store: Path, device_type: str) -> list[Path]:
    """The store folder of each run (for tests and for reading a run's weights)."""
    code = code_digest()
    return [store / run_key(run, device_type, code) for run in runs]
