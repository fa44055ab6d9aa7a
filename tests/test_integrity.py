"""What DVC and the pipeline say is what is on disk (issue 33): a byte flipped in an output or in a DVC cache object is
found and named by `python -m pipeline.repro` and the output is checked out again or recomputed, never reported up to
date; a stage run by a plain `dvc repro` refuses GloVe vectors that do not match their manifest; a run that is put
back leaves no new object in the DVC cache.

Every probe runs the real commands in one copy of the project that has run once (DVC's default cache type, copies),
and checks the result by content: each file's MD5 against dvc.lock, `dvc status`, `git status` (slow); the check
itself (pipeline.base.integrity) first, on a cache and a dvc.lock written here.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import yaml

from conftest import copy_project, run

PY = sys.executable


@pytest.fixture(scope="module")
def project(ran_project, tmp_path_factory) -> Path:
    root = copy_project(ran_project[0], tmp_path_factory.mktemp("integrity") / "project")
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "ran", "--allow-empty"], root)
    return root


@pytest.fixture
def clean(project):
    yield project
    run(["git", "reset", "-q", "--hard"], project)
    run([PY, "-m", "dvc", "checkout", "-q", "--force"], project, check=False)


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def locked(root: Path) -> dict[str, str]:
    """{path: md5} of every output file dvc.lock records (the files of a cached directory output by its .dir listing;
    a directory kept in git, reports/study, has none: git status checks it)."""
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    files = {}
    for stage in lock["stages"].values():
        for out in stage.get("outs", []):
            if out["md5"].endswith(".dir") and not cache_object(root, out["md5"]).exists():
                continue
            if out["md5"].endswith(".dir"):
                listing = json.loads(cache_object(root, out["md5"]).read_text())
                files.update({f"{out['path']}/{item['relpath']}": item["md5"] for item in listing})
            else:
                files[out["path"]] = out["md5"]
    return files


def cache_object(root: Path, name: str) -> Path:
    return root / ".dvc" / "cache" / "files" / "md5" / name[:2] / name[2:]


def flip(path: Path, at: int = 1000) -> None:
    """One byte changed in place, as root writes through DVC's read-only bit."""
    path.chmod(0o644)
    with open(path, "r+b") as handle:
        handle.seek(min(at, path.stat().st_size - 1))
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0x40]))


def repro(root: Path, *args: str, check: bool = True):
    return run([PY, "-m", "pipeline.repro", *args], root, check=check)


def consistent(root: Path) -> None:
    """Every recorded output holds the recorded bytes, DVC agrees, and git sees nothing changed."""
    assert {path: md5(root / path) for path in locked(root)} == locked(root)
    status = run([PY, "-m", "dvc", "status", "--json"], root).stdout
    assert json.loads(status) == {}, status
    assert run(["git", "status", "--porcelain"], root).stdout == ""


def test_the_check_removes_what_neither_its_name_nor_dvc_lock_says_and_keeps_the_rest(tmp_path):
    """pipeline.base.integrity.check on a cache and a dvc.lock written here: an intact project gives no finding and
    a record of the hashes; a corrupt cache object and an output edited in place are named and removed; a file
    holding another version DVC has cached is left to DVC; an edited file whose recorded version the cache lacks is
    removed, naming the stage that runs again."""
    from pipeline.base import integrity

    def cached(content: bytes, suffix: str = "") -> str:
        name = hashlib.md5(content).hexdigest() + suffix
        cache_object(tmp_path, name).parent.mkdir(parents=True, exist_ok=True)
        cache_object(tmp_path, name).write_bytes(content)
        return name

    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    (tmp_path / "d").mkdir()
    out, inner = tmp_path / "out.txt", tmp_path / "d" / "a.bin"
    out.write_bytes(b"recorded")
    inner.write_bytes(b"in a folder")
    listing = json.dumps([{"relpath": "a.bin", "md5": cached(b"in a folder")}]).encode()
    outs = [
        {"path": "out.txt", "hash": "md5", "md5": cached(b"recorded")},
        {"path": "d", "hash": "md5", "md5": cached(listing, ".dir")},
    ]
    older, spare = cached(b"an older version"), cached(b"a spare")
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"s": {"outs": outs}}}))
    assert integrity.check(tmp_path) == [] and (tmp_path / integrity.RECORD).is_file()

    out.write_bytes(b"RECORDED")  # edited in place
    flip(cache_object(tmp_path, spare), at=0)
    [(corrupt, _), (edited, then)] = integrity.check(tmp_path)  # (what is wrong, what removing it makes DVC do)
    assert (
        f"the DVC cache object {cache_object(tmp_path, spare).relative_to(tmp_path).as_posix()} is corrupt" in corrupt
    )
    assert not cache_object(tmp_path, spare).exists()
    assert "out.txt" in edited and "DVC checks the recorded one out of its cache" in then
    assert not out.exists()

    out.write_bytes(b"an older version")  # a version DVC has cached: DVC replaces it
    cache_object(tmp_path, hashlib.md5(b"in a folder").hexdigest()).unlink()
    inner.write_bytes(b"edited")
    [(changed, then)] = integrity.check(tmp_path)
    assert "d/a.bin" in changed and "DVC runs stage s again" in then
    assert out.exists() and not inner.exists() and cache_object(tmp_path, older).exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "output",
    [
        "data/glove/vectors.npy",  # a file of a directory output: the GloVe store
        "data/sweep/embeddings.npy",
        "data/encode/profiles.npz",  # a bad CRC inside the zip
        "reports/report.html",  # a cached file output
        "reports/metrics.json",  # a git-tracked output (cache: false)
    ],
)
def test_a_byte_flipped_in_an_output_is_named_and_replaced(clean, output):
    """Before: `dvc repro` took the edited file for its cached output (hard links: both were one file) and every later
    check said up to date over a corrupt vector. After: named, then checked out again or recomputed."""
    root = clean
    flip(root / output)
    result = repro(root)
    assert f"repro: {output} is not the output dvc.lock records" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    consistent(root)


@pytest.mark.slow
def test_a_byte_flipped_in_a_cache_object_is_named_and_recomputed(clean):
    """The cache object of the GloVe vectors: DVC would check the corrupt bytes out as the recorded output."""
    root = clean
    name = locked(root)["data/glove/vectors.npy"]
    flip(cache_object(root, name))
    result = repro(root)
    assert f"the DVC cache object .dvc/cache/files/md5/{name[:2]}/{name[2:]} is corrupt" in result.stderr
    assert "Running stage 'glove'" in result.stdout
    assert md5(cache_object(root, name)) == name
    consistent(root)


@pytest.mark.slow
def test_a_byte_flipped_in_a_directory_listing_is_named_and_mended_once(clean):
    """A `.dir` object (a directory output's listing): before, every run re-ran the stage and `dvc status` said "not
    in cache" for good; after, it is named, the stage runs once, and the next run runs nothing."""
    root = clean
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    name = next(out["md5"] for out in lock["stages"]["encode"]["outs"] if out["path"] == "data/encode")
    flip(cache_object(root, name), at=10)
    result = repro(root)
    assert f"the DVC cache object .dvc/cache/files/md5/{name[:2]}/{name[2:]} is corrupt" in result.stderr
    assert "Running stage 'encode'" in result.stdout
    consistent(root)
    again = repro(root)
    assert "Running stage" not in again.stdout and "repro:" not in again.stderr


@pytest.mark.slow
def test_a_plain_dvc_repro_refuses_vectors_that_do_not_match_their_manifest(clean):
    """Without pipeline.repro, the stages that read the GloVe store's vectors check its SHA-256 first: corrupt vectors
    both in the workspace and in the cache (as a hard-linked cache had them) stop the sweep stage with one message
    (the encode stage reads the store's dimension only)."""
    root = clean
    vectors = root / "data" / "glove" / "vectors.npy"
    cached = cache_object(root, locked(root)["data/glove/vectors.npy"])
    flip(vectors)
    cached.chmod(0o644)
    cached.write_bytes(vectors.read_bytes())
    result = run([PY, "-m", "dvc", "repro", "-f", "-s", "sweep"], root, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "vectors.npy does not match its SHA-256" in output, output
    assert "Traceback" not in output and "python -m pipeline.repro" in output
    fixed = repro(root)  # the fix the message names: both copies named, the store rebuilt
    assert "is corrupt" in fixed.stderr and "data/glove/vectors.npy is not the output" in fixed.stderr
    assert "Running stage 'glove'" in fixed.stdout
    consistent(root)


@pytest.mark.slow
def test_a_run_that_is_put_back_leaves_no_new_object_in_the_cache(clean):
    """A run whose tokenize stage caches a texts file's words and whose sweep stage then fails: before, the words
    stayed in .dvc/cache (mode 0444) after the rollback; after, the cache holds exactly what it held."""
    root = clean

    def cache_files() -> set[str]:
        """Every file and folder of the DVC cache (DVC takes an empty run-cache folder for an entry)."""
        return {p.relative_to(root).as_posix() for p in (root / ".dvc" / "cache").rglob("*")}

    before = cache_files()
    (root / "data" / "texts" / "private.txt").write_text("zqxvw wvvkqj\n", encoding="utf-8")
    result = repro(root, "texts=file", "texts.file=data/texts/private.txt", check=False)
    assert result.returncode == 2 and "every word of sentence 0" in result.stderr, result.stderr
    assert "zqxvw" not in result.stderr  # the message quotes nothing of the file
    assert cache_files() == before
    (root / "data" / "texts" / "private.txt").unlink()
    consistent(root)
