"""Figures drawn once per content: a figure drawn from the same data by the same code is copied, not drawn again.

A figure job (pipeline.figures.batch.Batch) is a drawing function and its arguments, which are its whole input:
data (arrays, words, titles, settings), never a file to read, plus the paths it writes. Its key is a SHA-256 of the
function's name, the pickled arguments (each output path as its file name) and `FINGERPRINT`, the code and the
libraries that draw (every module of this package, the portable arithmetic its axes use, matplotlib's, numpy's and
Pillow's versions); its entry, `<cache>/<key>/`, holds the PNGs it wrote, what it returned, and their SHA-256. A job
whose entry is there and intact gets the PNGs copied to its paths instead of drawing them: an edit of one part of the
encode stage's config redraws that part's figures only, and the points of a sweep over the weights draw the figures
the weights do not change once. Figures are byte-identical on every machine (docs/reliability.md), so a copy has the
bytes the drawing would write. Kept for speed (docs/benchmarks-measurements.md#stage-layout).

The project's cache (data/cache/figures/, DVC runs) is pruned to its MAX_BYTES, least recently used first; a sweep's
(<sweep dir>/.stage_cache/figures/) lives as long as the sweep's folder. Arguments that do not pickle the same way
twice only cost a miss (a figure drawn again), never a wrong figure: the key holds every byte it is drawn from.

Plain Python: no matplotlib imported here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

from pipeline.base.files import publish, sha256_file

RESULT = "result.pickle"  # in an entry: what the job returned
SUMS = "sha256.json"  # in an entry: the SHA-256 of each file it holds
MAX_BYTES = 256 * 2**20  # the project's cache, pruned to this after each stage that draws


@functools.cache
def fingerprint() -> str:
    """The code and libraries a figure's bytes depend on beyond its arguments."""
    from importlib.metadata import version

    here = Path(__file__).resolve().parent
    sources = [*sorted(here.glob("*.py")), here.parent / "core" / "portable.py"]
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for package in ("matplotlib", "numpy", "pillow"):
        digest.update(f"{package} {version(package)}\0".encode())
    return digest.hexdigest()


def job_key(job: tuple) -> tuple[str, dict[str, Path]] | None:
    """The content key of a figure job (draw, args, kwargs), and the files it writes (name -> path: its Path
    arguments); None when the job cannot be keyed (an argument that does not pickle)."""
    draw, args, kwargs = job
    outputs: dict[str, Path] = {}

    def named(value):
        if isinstance(value, Path):
            outputs[value.name] = value
            return ("output", value.name)
        return value

    keyed = ([named(a) for a in args], {k: named(v) for k, v in sorted(kwargs.items())})
    try:
        blob = pickle.dumps((fingerprint(), draw.__module__, draw.__qualname__, keyed), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return hashlib.sha256(blob).hexdigest()[:32], outputs


def restore(entry: Path, outputs: dict[str, Path]) -> tuple[bool, object]:
    """(True, what the job returned) after copying the entry's files to `outputs`; (False, None) when the entry is
    not there, incomplete or damaged (a file whose SHA-256 differs: the entry is removed and the job drawn again)."""
    try:
        sums = json.loads((entry / SUMS).read_text(encoding="utf-8"))
        result = pickle.loads((entry / RESULT).read_bytes())
    except (OSError, ValueError, pickle.UnpicklingError, EOFError):
        return False, None
    if set(sums) != set(outputs) or any(sha256_file(entry / name) != digest for name, digest in sums.items()):
        shutil.rmtree(entry, ignore_errors=True)
        return False, None
    for name, target in outputs.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(entry / name, target)
    os.utime(entry)  # recently used: pruned last
    return True, result


def store(entry: Path, outputs: dict[str, Path], result) -> None:
    """Publish what a job drew (the files `outputs`) and returned as the entry `entry`; a job that did not write
    every file it was given a path for is not stored."""
    if all(path.is_file() for path in outputs.values()):
        sums = {name: sha256_file(path) for name, path in outputs.items()}
        blobs = {RESULT: pickle.dumps(result), SUMS: json.dumps(sums, sort_keys=True).encode()}
        publish(entry, [(path, name) for name, path in outputs.items()], blobs=blobs)


def prune(cache: Path, max_bytes: int = MAX_BYTES) -> None:
    """Remove the least recently used entries of `cache` until it holds at most `max_bytes`."""
    entries = []
    for entry in cache.iterdir() if cache.is_dir() else ():
        try:
            size = sum(f.stat().st_size for f in entry.iterdir())
            entries.append((entry.stat().st_mtime, size, entry))
        except OSError:  # removed meanwhile
            continue
    total = sum(size for _, size, _ in entries)
    for _, size, entry in sorted(entries):
        if total <= max_bytes:
            break
        shutil.rmtree(entry, ignore_errors=True)
        total -= size
