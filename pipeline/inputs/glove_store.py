"""The project's binary format for word vectors: written once by the glove stage, memory-mapped after.

A store is a folder:
    vectors.npy    float32 (rows, dim), C order: np.load(..., mmap_mode="r") opens it in milliseconds
    vocab.txt      UTF-8, one word per line, row i of vectors.npy is line i
    manifest.json  format, dim, rows, SHA-256 of both files, and where the vectors came from
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from pipeline.base.errors import PipelineError
from pipeline.base.files import read_json, replace_dir, sha256_file, write_json, write_npy, write_text

FORMAT = "pe-glove-store/1"
VECTORS, VOCAB, MANIFEST = "vectors.npy", "vocab.txt", "manifest.json"


def write_store(target: Path, vectors: np.ndarray, words: Sequence[str], origin: dict[str, Any]) -> dict:
    """Write a store atomically (built beside `target`, then swapped in). Returns the manifest.

    vectors: (rows, dim) float32; words: rows distinct strings without newlines.
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or len(words) != vectors.shape[0]:
        raise ValueError(f"vectors {vectors.shape} and {len(words)} words do not match")
    manifest: dict[str, Any] = {}

    def build(tmp: Path) -> None:
        write_npy(tmp / VECTORS, vectors.astype(np.float32, copy=False))
        write_text(tmp / VOCAB, "".join(f"{w}\n" for w in words))
        manifest.update(
            {
                "format": FORMAT,
                "rows": int(vectors.shape[0]),
                "dim": int(vectors.shape[1]),
                "dtype": "float32",
                "vectors_sha256": sha256_file(tmp / VECTORS),
                "vocab_sha256": sha256_file(tmp / VOCAB),
                "origin": origin,
            }
        )
        write_json(tmp / MANIFEST, manifest)

    replace_dir(target, build)
    return manifest


@dataclass
class GloveStore:
    """An opened store. `vectors` is a read-only memory map; nothing is parsed but vocab.txt."""

    path: Path
    manifest: dict
    vectors: np.ndarray

    @classmethod
    def open(cls, path: Path, verify: bool = False) -> "GloveStore":
        """The store at `path`; verify: check both files against the SHA-256s of the manifest first (what a stage
        does before it trusts them). Opened (and verified) once per process while its files keep their size, mtime
        and inode: the jobs of a multirun share one store (docs/benchmarks-measurements.md#sweep-caches); every process
        verifies anew."""
        path = Path(path).resolve()
        try:
            files = (path / VECTORS, path / VOCAB, path / MANIFEST)
            stamp = tuple((s.st_size, s.st_mtime_ns, s.st_ino) for s in map(os.stat, files))
        except OSError:
            stamp = None
        return _open(cls, path, verify, stamp) if stamp is not None else cls._open(path, verify)

    @classmethod
    def _open(cls, path: Path, verify: bool) -> "GloveStore":
        if not (path / MANIFEST).exists():
            raise PipelineError(
                f"no GloVe store at {path} (missing {MANIFEST}): run the glove stage first (`dvc repro glove`)."
            )
        manifest = read_json(path / MANIFEST)
        if manifest.get("format") != FORMAT:
            raise PipelineError(
                f"{path / MANIFEST} has format {manifest.get('format')!r}, expected {FORMAT!r}: "
                "re-create the store with `dvc repro -f glove`."
            )
        vectors = np.load(path / VECTORS, mmap_mode="r")
        if vectors.shape != (manifest["rows"], manifest["dim"]) or vectors.dtype != np.float32:
            raise PipelineError(
                f"{path / VECTORS} holds {vectors.shape} {vectors.dtype}, the manifest says "
                f"({manifest['rows']}, {manifest['dim']}) float32: re-create it with `dvc repro -f glove`."
            )
        if verify:
            for name, key in ((VECTORS, "vectors_sha256"), (VOCAB, "vocab_sha256")):
                if sha256_file(path / name) != manifest[key]:
                    raise PipelineError(
                        f"{path / name} does not match its SHA-256 in {path / MANIFEST} (edited or corrupted on disk, "
                        "or its DVC cache copy is): the vectors cannot be trusted. Fix: `python -m pipeline.repro` "
                        "(it finds and removes a corrupted output or cache copy, then rebuilds the store), or "
                        "`dvc repro -f glove`."
                    )
        return cls(path, manifest, vectors)

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @cached_property
    def words(self) -> list[str]:
        # bytes, then decode: read_text would turn a "\r" inside a word into a line break
        return (self.path / VOCAB).read_bytes().decode("utf-8").split("\n")[:-1]

    @cached_property
    def index(self) -> dict[str, int]:
        return {word: row for row, word in enumerate(self.words)}

    def lookup(self, words: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """Vectors for `words`: (len(words), dim) float32 with zero rows for words not in the store, and those words."""
        out = np.zeros((len(words), self.dim), dtype=np.float32)
        missing = []
        for i, word in enumerate(words):
            row = self.index.get(word)
            if row is None:
                missing.append(word)
            else:
                out[i] = self.vectors[row]
        return out, missing


@functools.lru_cache(maxsize=4)
def _open(cls, path: Path, verify: bool, stamp: tuple) -> GloveStore:
    return cls._open(path, verify)


def embedding_matrix(word_index: dict[str, int], store: GloveStore) -> tuple[np.ndarray, list[str]]:
    """(len(word_index) + 1, dim) float32: row i is the vector of the word with index i (a Keras word index:
    indices 1..V); row 0 (padding) and the rows of words the store lacks are zero. Also returns those words,
    in index order."""
    by_index = sorted(word_index.items(), key=lambda item: item[1])
    vectors, missing = store.lookup([word for word, _ in by_index])
    matrix = np.zeros((len(by_index) + 1, store.dim), dtype=np.float32)
    matrix[[index for _, index in by_index]] = vectors
    return matrix, missing


def check_sentences_covered(
    texts: Sequence[str], words: Sequence[Sequence[str]], missing: Sequence[str], source: str
) -> None:
    """Refuse a sentence none of whose words has a vector: its embeddings would all be zero."""
    missing_set = set(missing)
    for i, sentence in enumerate(words):
        if all(word in missing_set for word in sentence):
            raise PipelineError(  # the sentence is not quoted: errors never show what an input file holds
                f"every word of sentence {i} (counted from 0; {len(sentence)} word(s)) is missing "
                f"from the GloVe vocabulary ({source}): its embedding would be all zeros. Fix the text (GloVe 6B is "
                "lower-case) or choose another glove source."
            )
