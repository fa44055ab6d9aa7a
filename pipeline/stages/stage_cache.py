"""Stage outputs shared by the jobs of a sweep, computed once and reused by content hash.

The points of a sweep over `sweep.w2` differ only in the sweep stage's params: every job would tokenize the same
texts and compute the same encoding again. Here each in-process stage's outputs are stored once per sweep, in a
content-addressed folder of the sweep dir, `<sweep dir>/.stage_cache/<stage>-<key>/`, and a job whose key is
already there links those files into its own folder (hard links; a copy across file systems) instead of running
the stage. Works for every launcher: jobs of other processes (joblib, submitit) see the same folder, and a job that
finds another computing the entry it needs (parallel jobs start together) waits for it (a lock per entry) instead of
computing it too.

The key of a stage is a SHA-256 of what determines its outputs, as the stage registry declares it:
- the params it reads (`Stage.params`: groups or dotted keys), as JSON;
- for each input produced by an earlier stage of the job, that stage's key (so a chain of keys, no re-hashing);
  the shared GloVe store by its manifest (which holds the SHA-256 of its vectors and vocabulary);
  any other input file by its bytes;
- the files the config names (`texts.file`) by their bytes, when the stage reads that part of the config.
Outputs are written atomically by the stages and never modified in place, so linked files stay intact.
A sweep dir's cache lives as long as the sweep dir (code does not change during a sweep). Its `figures/` folder holds
the figures the jobs share, keyed by what each is drawn from (pipeline.figures.cache).

Kept for speed: without it (and so without the figure cache) every point computes the encoding again, torch's import
included (docs/benchmarks-measurements.md#sweep-caches).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from pipeline.base.files import link, publish
from pipeline.base.paths import Layout

if TYPE_CHECKING:
    from pipeline.config.schema import Config

log = logging.getLogger("pipeline")

CACHE_DIR = ".stage_cache"
NAMED_FILES = ("texts.file",)  # config keys naming an input file that an in-process stage reads
# How long a job waits for another job of its sweep computing the same stage: as long as a shared GloVe store may take
# to build (pipeline.__main__), beyond any stage the limits let through (pipeline.config.limits: 5 minutes of CPU)
LOCK_WAIT = 3 * 3600.0


def _select(cfg: Config, dotted: str) -> Any:
    """The value of a dotted key of `cfg`, a group as a dict (JSON for the key)."""
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


def _sha256(path: Path) -> str:
    from pipeline.base.files import sha256_file

    if path.is_dir():
        digest = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{file.relative_to(path).as_posix()}\0{sha256_file(file)}\0".encode())
        return digest.hexdigest()
    return sha256_file(path) if path.exists() else "absent"


def stage_key(stage, params: Config, layout: Layout, root: Path, produced: dict[str, str]) -> str:
    """The content key of `stage` (a registry Stage) in this job; `produced`: Layout attribute -> key of the
    earlier stage that wrote it."""
    from pipeline.stages.registry import EXTERNAL_INPUTS

    selected = {key: _select(params, key) for key in stage.params}
    inputs = {}
    for name in stage.inputs:
        if name in produced:
            inputs[name] = produced[name]
        elif name == "glove_dir":
            inputs[name] = _sha256(layout.glove_manifest)
        elif name not in EXTERNAL_INPUTS:
            inputs[name] = _sha256(getattr(layout, name))
    for dotted in NAMED_FILES:
        if any(dotted == key or dotted.startswith(key + ".") for key in stage.params):
            value = _select(params, dotted)
            if value is not None:
                path = Path(value).expanduser()
                inputs[dotted] = _sha256(path if path.is_absolute() else root / path)
    blob = json.dumps({"stage": stage.name, "params": selected, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _outputs(stage, layout: Layout) -> list[Path]:
    return [getattr(layout, out.layout) for out in stage.outputs]


def _files(path: Path) -> Iterable[Path]:
    if path.is_dir():
        yield from (p for p in path.rglob("*") if p.is_file())
    elif path.is_file():
        yield path


def _restore(entry: Path, stage, layout: Layout) -> None:
    """Link the cached outputs of `stage` into `layout` (a fresh job dir: nothing there yet)."""
    for target in _outputs(stage, layout):
        rel = target.relative_to(layout.base)
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        source = entry / rel
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        for file in _files(source):
            link(file, target / file.relative_to(source) if source.is_dir() else target)


def _publish(entry: Path, stage, layout: Layout) -> None:
    """Store the outputs `stage` just wrote in `layout` as the cache entry."""
    files, dirs = [], []
    for target in _outputs(stage, layout):
        rel = target.relative_to(layout.base)
        if target.is_dir():
            dirs.append(rel.as_posix())
            files += [(file, (rel / file.relative_to(target)).as_posix()) for file in _files(target)]
        elif target.is_file():
            files.append((target, rel.as_posix()))
    publish(entry, files, dirs)


def run_stages(stages, params: Config, layout: Layout, root: Path) -> dict[str, bool]:
    """Run `stages` (registry Stages, in order) for one job into `layout`; with `layout.shared` (a sweep's folder
    for shared outputs), reuse a stage's outputs when its key is there, and store them when not.
    Returns {stage name: reused}."""
    cache = layout.shared
    produced: dict[str, str] = {}
    reused = {}
    for stage in stages:
        if cache is None:
            stage.run(params, layout, root)
            reused[stage.name] = False
            continue
        key = stage_key(stage, params, layout, root, produced)
        entry = cache / f"{stage.name}-{key}"
        if not entry.is_dir():
            from pipeline.base.locks import machine_lock

            # jobs in parallel (joblib, submitit) that need the same entry: one computes it, the others wait and
            # reuse it. A holder that dies releases the lock (the OS's): the wait is bounded by the work, not a guess
            with machine_lock(f"stage-cache:{entry}", f"{stage.name} of another job of this sweep", timeout=LOCK_WAIT):
                if not entry.is_dir():
                    stage.run(params, layout, root)
                    _publish(entry, stage, layout)
                    reused[stage.name] = False
        if stage.name not in reused:
            _restore(entry, stage, layout)
            reused[stage.name] = True
        produced.update({out.layout: key for out in stage.outputs})
    if cache is not None and any(reused.values()):
        log.info("reused from this sweep's earlier jobs: %s", ", ".join(n for n, r in reused.items() if r))
    return reused
