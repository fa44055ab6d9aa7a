"""Atomic writes and hashing: a crash leaves either the old file or the new one, never half of one."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(target: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it onto `target` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes it private; give it the usual permissions
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:  # a handle: np.save would append .npy to a name
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like np.savez, but byte-for-byte reproducible: np.savez stamps each member with the current time."""
    import zipfile

    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def replace_dir(target: Path, build: "callable[[Path], None]") -> None:
    """Build a directory in a temporary sibling with `build(tmp_dir)`, then swap it into `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        build(tmp)
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_columns(path: Path, columns: dict[str, list]) -> None:
    """Equal-length columns as a CSV with a header row; values written with repr (exact floats)."""
    header = list(columns)
    rows = zip(*(columns[name] for name in header))
    write_text(path, ",".join(header) + "\n" + "".join(",".join(repr(v) for v in row) + "\n" for row in rows))


def read_columns(path: Path) -> dict[str, np.ndarray]:
    """A numeric CSV with a header row as {column: (rows,) float64}; empty or 'None' cells are NaN."""
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
        rows = [[float(v) if v not in ("", "None") else np.nan for v in line.strip().split(",")] for line in handle]
    table = np.array(rows, dtype=np.float64).reshape(len(rows), len(header))
    return {name: table[:, i] for i, name in enumerate(header)}


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
