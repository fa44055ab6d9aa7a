"""Atomic writes and hashing: a crash leaves either the old file or the new one, never half of one.

Numbers in written files have a fixed precision: `write_json` and `write_columns` round every float to
SIGNIFICANT_DIGITS significant digits of max(|x|, 1) (12 significant digits above 1, 11 decimal places below: a
small number computed from O(1) ones, such as a deviation or a Procrustes disparity, carries their absolute rounding
noise, not noise relative to itself), so that files read as numbers and a diff shows changes, not float noise.
That every number has the same bits on every machine comes from how it is computed (pipeline.core.portable), not
from this rounding: a one-ulp difference would still cross a rounding boundary with probability ~ 2^-52 / 10^-12
per value.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Every temporary file or folder the pipeline makes beside its outputs is named
#     .pe-tmp.<host>.<pid>.<name>.<random>
# so that git ignores it (.gitignore: .pe-tmp.*) and the next run can tell a killed run's leftovers (same host,
# process gone) from a running process's work in progress, and remove them (clean_stale_temporaries).
TEMP_MARK = ".pe-tmp."
DVC_TEMP = re.compile(r".*\.[A-Za-z0-9_-]{22}\.tmp")  # dvc_objects' tmp_fname: a link test's or a copy's, by DVC


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname().split(".")[0])[:32] or "host"


def temp_prefix(name: str) -> str:
    """The prefix of a temporary beside `name`: marks it as this process's (see TEMP_MARK)."""
    return f"{TEMP_MARK}{_host()}.{os.getpid()}.{name}."


def clean_stale_temporaries(folders: Iterable[Path], dvc_idle: bool = False) -> list[Path]:
    """Remove the temporaries (TEMP_MARK names) that processes of this host no longer alive left in `folders`
    (searched recursively; not followed into the temporaries themselves), and with `dvc_idle` (no DVC runs in the
    workspace) DVC's own files (DVC_TEMP) a killed DVC left. Returns what was removed."""
    from pipeline.base.processes import running

    host, removed = _host(), []
    for folder in folders:
        for current, dirs, files in os.walk(folder):
            for name in [*dirs, *files]:
                path = Path(current) / name
                if dvc_idle and DVC_TEMP.fullmatch(name) and name in files:
                    path.unlink(missing_ok=True)
                    removed.append(path)
                if not name.startswith(TEMP_MARK):
                    continue
                parts = name[len(TEMP_MARK) :].split(".", 2)
                if len(parts) < 3 or parts[0] != host or not parts[1].isdigit():
                    continue
                try:
                    made = os.lstat(path).st_mtime
                except FileNotFoundError:  # removed meanwhile (its process finished)
                    continue
                if running(int(parts[1]), started_by=made):
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                removed.append(path)
            dirs[:] = [d for d in dirs if not d.startswith(TEMP_MARK)]
    return removed


@contextmanager
def atomic_path(target: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it onto `target` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target.name), suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes it private; give it the usual permissions
        os.replace(tmp_path, target)
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:  # a write that found the disk full names no file: this one
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise
    finally:
        tmp_path.unlink(missing_ok=True)


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


SIGNIFICANT_DIGITS = 12
# Below this magnitude, digits are counted from it (a fixed number of decimals) in write_json / write_columns.
MAGNITUDE_FLOOR = 1.0
# 10^k parsed from decimal (correctly rounded, exact up to 1e22): numpy's power and log10 may use vector
# routines that differ by an ulp between CPUs, which would move the rounding point.
_MIN_EXPONENT = -307
_POWERS_OF_TEN = np.array([float(f"1e{k}") for k in range(_MIN_EXPONENT, 309)])


def _power_of_ten(k: np.ndarray) -> np.ndarray:
    return _POWERS_OF_TEN[np.asarray(k, dtype=np.int64) - _MIN_EXPONENT]


def round_significant(values: Any, digits: int = SIGNIFICANT_DIGITS, floor: Any = 0.0) -> np.ndarray:
    """`values` rounded to `digits` significant digits of max(|value|, floor), as float64 of the broadcast shape.

    floor: a scalar or an array broadcastable against `values`, e.g. the largest magnitude of each (n, 2) frame
    of a (frames, n, 2) coordinate array (keepdims), so that a point near the origin keeps the frame's absolute
    precision rather than digits that are rounding noise. NaN, infinities and zeros pass unchanged.
    While the decimal places kept (digits - 1 - exponent of the magnitude) are at most 22 (|x| >= 1e-11 at 12
    digits, or any x with floor 1), the result is the double nearest to the rounded decimal, whose repr has at
    most `digits` significant digits; below that it is within an ulp of it. Either way the same input gives the
    same bits on every machine (IEEE products and rint only).
    """
    x = np.asarray(values, dtype=np.float64)
    magnitude = np.maximum(np.abs(x), floor)
    keep = np.isfinite(x) & (magnitude >= _POWERS_OF_TEN[0])
    magnitude = np.where(keep, magnitude, 1.0)
    exponent = np.searchsorted(_POWERS_OF_TEN, magnitude, side="right") - 1 + _MIN_EXPONENT  # 10^e <= m < 10^(e+1)
    shift = np.clip(digits - 1 - exponent, -300, 300)  # decimal places kept (negative: tens, ...)
    up, down = _power_of_ten(np.maximum(shift, 0)), _power_of_ten(np.maximum(-shift, 0))
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.round(x * up / down) * down / up
    return np.where(keep, rounded, x)


def _rounded_tree(tree: Any) -> Any:
    """Every float (numpy floats included) in nested dicts / lists at fixed precision; numpy ints as ints.

    SIGNIFICANT_DIGITS significant digits of max(|value|, MAGNITUDE_FLOOR), all floats in one array operation (a
    sweep of thousands of weight pairs writes hundreds of thousands of them)."""
    floats: list = []
    # a list of these alone holds nothing to round: its types are checked in C, not walked (docs/benchmarks.md#json)
    plain = {int, str, bool, type(None)}

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            for value in node.values():
                collect(value)
        elif isinstance(node, (list, tuple)):
            if not plain.issuperset(map(type, node)):
                for value in node:
                    collect(value)
        elif isinstance(node, (float, np.floating)):
            floats.append(node)

    collect(tree)
    rounded = iter(round_significant(np.array(floats, dtype=np.float64), floor=MAGNITUDE_FLOOR).tolist())

    def rebuild(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: rebuild(value) for key, value in node.items()}
        if isinstance(node, (list, tuple)):
            return list(node) if plain.issuperset(map(type, node)) else [rebuild(value) for value in node]
        if isinstance(node, (float, np.floating)):
            return next(rounded)
        if isinstance(node, np.integer):
            return int(node)
        return node

    return rebuild(tree)


def write_json(path: Path, obj: Any) -> None:
    """`obj` as indented, strict JSON (RFC 8259: no NaN or Infinity, which no other JSON reader takes), floats at fixed
    precision (see the module docstring). A value that is not finite raises ValueError naming the file and its key:
    the config checks refuse what would make one, so reaching it is a bug."""
    tree = _rounded_tree(obj)
    try:
        text = json.dumps(tree, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise ValueError(f"{path}: {_non_finite(tree)} is not a finite number: JSON has no NaN or Infinity") from None
    write_text(path, text + "\n")


def _non_finite(node: Any, key: str = "") -> str | None:
    """The dotted key (list items as [i]) of the first NaN or infinity in nested dicts / lists, else None."""
    if isinstance(node, dict):
        found = (_non_finite(value, f"{key}.{name}" if key else str(name)) for name, value in node.items())
    elif isinstance(node, (list, tuple)):
        found = (_non_finite(value, f"{key}[{i}]") for i, value in enumerate(node))
    else:
        return key or "the value" if isinstance(node, float) and not np.isfinite(node) else None
    return next((hit for hit in found if hit is not None), None)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:  # a handle: np.save would append .npy to a name
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like np.savez, but byte-for-byte reproducible: np.savez stamps each member with the current time. Zip64
    headers only for a member that needs them (2 GiB or more): Python's zipfile writes forced ones differently from one
    patch release to the next (3.11.2 and 3.11.7 gave other bytes, so another dvc.lock), plain ones alike."""
    import zipfile

    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            array = np.asanyarray(array)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            huge = array.nbytes + 2**16 >= zipfile.ZIP64_LIMIT  # 2**16: room for the .npy header
            with archive.open(info, "w", force_zip64=huge) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def replace_dir(target: Path, build: "callable[[Path], None]") -> None:
    """Build a directory in a temporary sibling with `build(tmp_dir)`, then swap it into `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(target.name), dir=target.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        build(tmp)
        if target.exists():
            old = target.with_name(f"{temp_prefix(target.name)}old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def replace_dirs(targets: dict[str, Path], build: "callable[[dict[str, Path]], None]") -> None:
    """`replace_dir` for several directories at once: `build` gets {name: temporary directory}; each is swapped into
    its target once every one is built."""
    built: dict[str, Path] = {}
    names = list(targets)

    def nest(i: int) -> None:
        if i == len(names):
            build(built)
            return
        replace_dir(targets[names[i]], lambda tmp: (built.__setitem__(names[i], tmp), nest(i + 1)))

    nest(0)


def link(src: Path, dst: Path) -> None:
    """`dst` as a hard link to `src` (a copy across file systems, or without hard links)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def publish(
    entry: Path, files: Iterable[tuple[Path, str]], dirs: Iterable[str] = (), blobs: dict[str, bytes] | None = None
) -> None:
    """Store `files` ((file, its path in the entry) pairs, linked), the empty folders `dirs` and the small files
    `blobs` (path in the entry -> bytes) as the cache entry `entry`: atomic (a temp dir renamed); when another job
    published the same entry first, its entry stays."""
    tmp = entry.with_name(f".tmp-{entry.name}-{uuid.uuid4().hex[:8]}")
    for rel in dirs:
        (tmp / rel).mkdir(parents=True, exist_ok=True)
    for rel, data in (blobs or {}).items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(data)
    for file, rel in files:
        link(file, tmp / rel)
    tmp.mkdir(parents=True, exist_ok=True)
    entry.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, entry)
    except OSError:  # published meanwhile by another job of the sweep
        shutil.rmtree(tmp, ignore_errors=True)


# write_columns formats this many rows at a time: its memory stays small for tables of millions of cells
ROWS_AT_ONCE = 65536


def write_columns(path: Path, columns: dict[str, Any]) -> None:
    """Equal-length columns (lists or 1-D arrays) as a CSV with a header row; floats at fixed precision
    (see the module docstring), ints as ints, None as 'None', strings as they are (without commas).

    A column of floats (a float array, or a list of floats and None) is rounded in one array operation and each of
    its distinct values is formatted once (repr), ROWS_AT_ONCE rows at a time: a long table (the sweep's curves of
    10,000 sentences: millions of cells) takes seconds and little memory."""
    header = list(columns)
    cells = [_column(columns[name]) for name in header]
    count = len(cells[0] if isinstance(cells[0], list) else cells[0][0]) if cells else 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as out:
        out.write(",".join(header) + "\n")
        for a in range(0, count, ROWS_AT_ONCE):
            block = [_cells(column, a, a + ROWS_AT_ONCE) for column in cells]
            out.write("".join(",".join(row) + "\n" for row in zip(*block)))


def _column(values: Any) -> tuple[np.ndarray, np.ndarray | None] | list[str]:
    """A column ready to format: (float64 values at fixed precision, None mask or None) for floats, else its cells
    as strings (ints as ints, numpy ints too; anything else by repr)."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return round_significant(values.astype(np.float64), floor=MAGNITUDE_FLOOR), None
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return [str(v) for v in values.tolist()]
    values = list(values)
    missing = [v is None for v in values]
    if all(isinstance(v, (float, np.floating)) or none for v, none in zip(values, missing)) and not all(missing):
        floats = np.array([np.nan if none else v for v, none in zip(values, missing)], dtype=np.float64)
        return round_significant(floats, floor=MAGNITUDE_FLOOR), np.array(missing) if any(missing) else None
    return [v if isinstance(v, str) else repr(v) for v in _rounded_tree(values)]


def _cells(column: tuple[np.ndarray, np.ndarray | None] | list[str], start: int, stop: int) -> list[str]:
    """The column's cells of rows start..stop-1 as strings: floats by repr, each distinct value (bits: -0.0 is not
    0.0) formatted once."""
    if isinstance(column, list):
        return column[start:stop]
    floats, missing = column[0][start:stop], column[1]
    distinct, index = np.unique(floats.view(np.int64), return_inverse=True)
    text = np.array([repr(v) for v in distinct.view(np.float64).tolist()], dtype=object)[index.reshape(-1)]
    if missing is not None:
        text[missing[start:stop]] = "None"
    return text.tolist()


def read_columns(path: Path, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """A numeric CSV with a header row (or its columns `names` only) as {column: (rows,) float64}; empty or 'None'
    cells are NaN."""
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
        picked = [header.index(name) for name in names] if names else range(len(header))
        rows = [line.strip().split(",") for line in handle]
    rows = [[float(row[i]) if row[i] not in ("", "None") else np.nan for i in picked] for row in rows]
    table = np.array(rows, dtype=np.float64).reshape(len(rows), len(picked))
    return {header[i]: table[:, j] for j, i in enumerate(picked)}


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
