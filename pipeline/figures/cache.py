"""Figures shared by the jobs of a sweep: a figure drawn from the same data is drawn once per sweep.

A figure job (pipeline.figures.batch.Batch) is a drawing function and its arguments, which are its whole input:
data (arrays, words, titles, settings), never a file to read, plus the paths it writes, inside the batch's output
folder. Its key is a SHA-256 of the function's name and the pickled arguments, with each output path as its name in
the folder; its entry, `<sweep dir>/.stage_cache/figures/<key>/`, holds the PNGs it wrote and what it returned.
A job whose entry is there links the PNGs into its folder (hard links, as pipeline.stages.stage_cache does) instead of
drawing them. In a sweep over the weights, the figures of `figures=summary` that the weights do not change (the
metrics against r of each sentence) are drawn by the first job only. Kept for speed: without it each point draws its
ratio sweeps again (docs/benchmarks-measurements.md#sweep-caches).

Arguments that do not pickle the same way twice only cost a miss (a figure drawn again), never a wrong figure: the
key holds every byte the figure is drawn from. Code does not change during a sweep, as for the stage outputs.

Plain Python: no matplotlib here.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

from pipeline.base.files import link, publish

RESULT = "result.pickle"  # in an entry: what the job returned


def _outputs_named(value, out: Path, outputs: dict[str, Path]):
    """`value` with a path inside `out` replaced by its name there (recorded in `outputs`)."""
    if isinstance(value, Path) and value.parent == out:
        outputs[value.name] = value
        return ("output", value.name)
    return value


def job_key(job: tuple, out: Path) -> tuple[str, dict[str, Path]] | None:
    """The content key of a figure job (draw, args, kwargs) writing into `out`, and the files it writes (name ->
    path); None when the job cannot be keyed (an argument that does not pickle)."""
    draw, args, kwargs = job
    outputs: dict[str, Path] = {}
    named = (
        [_outputs_named(a, out, outputs) for a in args],
        {k: _outputs_named(v, out, outputs) for k, v in sorted(kwargs.items())},
    )
    try:
        blob = pickle.dumps((draw.__module__, draw.__qualname__, named), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return hashlib.sha256(blob).hexdigest()[:24], outputs


def restore(entry: Path, outputs: dict[str, Path]) -> tuple[bool, object]:
    """(True, what the job returned) after linking the entry's files to `outputs`; (False, None) when the entry is
    not there (or incomplete: not all of `outputs`)."""
    if not (entry / RESULT).is_file() or not all((entry / name).is_file() for name in outputs):
        return False, None
    for name, target in outputs.items():
        target.unlink(missing_ok=True)
        link(entry / name, target)
    return True, pickle.loads((entry / RESULT).read_bytes())


def store(entry: Path, outputs: dict[str, Path], result) -> None:
    """Publish what a job drew (the files `outputs`) and returned as the entry `entry`; a job that did not write
    every file it was given a path for is not stored."""
    if all(path.is_file() for path in outputs.values()):
        publish(entry, [(path, name) for name, path in outputs.items()], blobs={RESULT: pickle.dumps(result)})
