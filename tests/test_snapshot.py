"""pipeline.base.snapshot.Journal: a rollback leaves files and folders exactly as they were, and survives its own
interruption (it is finished by the next rollback, never loses the saved copies)."""

from __future__ import annotations

import errno
import os

import pytest

from pipeline.base import snapshot
from pipeline.base.snapshot import Journal


def workspace(tmp_path):
    small, large, folder, absent = tmp_path / "dvc.lock", tmp_path / "big.npy", tmp_path / "out", tmp_path / "new.json"
    small.write_text("lock v1\n")
    large.write_bytes(b"x" * 1000)
    folder.mkdir()
    (folder / "a.png").write_bytes(b"a")
    os.utime(small, (1_000_000, 1_000_000))
    return small, large, folder, absent


def change(small, large, folder, absent):
    with open(small, "w") as handle:  # rewritten in place, as DVC writes dvc.lock
        handle.write("lock v2\n")
    large.unlink()  # replaced, as a stage writes (temp file + rename)
    large.write_bytes(b"y" * 10)
    (folder / "a.png").unlink()
    (folder / "b.png").write_bytes(b"b")  # a file of another run
    absent.write_text("{}")


def assert_as_before(small, large, folder, absent):
    assert small.read_text() == "lock v1\n" and small.stat().st_mtime == 1_000_000
    assert large.read_bytes() == b"x" * 1000
    assert sorted(p.name for p in folder.iterdir()) == ["a.png"] and (folder / "a.png").read_bytes() == b"a"
    assert not absent.exists()


def test_rollback_restores_rewritten_removed_and_new_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot, "LINK_ABOVE", 100)  # the "large" file below is hard-linked
    paths = workspace(tmp_path)
    journal = Journal(tmp_path / "journal")
    journal.begin(paths, command="test")
    change(*paths)
    record = journal.rollback()
    assert record["command"] == "test" and record["pid"] == os.getpid()
    assert_as_before(*paths)
    assert not journal.folder.exists() and journal.pending() is None


def test_commit_keeps_the_new_state(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("old\n")
    journal = Journal(tmp_path / "journal")
    journal.begin([path])
    path.write_text("new\n")
    journal.commit()
    assert path.read_text() == "new\n" and not journal.folder.exists()
    assert journal.rollback() is None and path.read_text() == "new\n"


def test_a_rollback_stopped_half_way_keeps_the_journal_and_the_next_one_finishes(tmp_path, monkeypatch):
    paths = workspace(tmp_path)
    journal = Journal(tmp_path / "journal")
    journal.begin(paths)
    change(*paths)
    replace, calls = os.replace, []

    def full_after_one(src, dst):
        calls.append(src)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return replace(src, dst)

    monkeypatch.setattr(snapshot.os, "replace", full_after_one)
    with pytest.raises(OSError):
        journal.rollback()
    assert journal.pending() is not None  # the saved copies are kept
    monkeypatch.setattr(snapshot.os, "replace", replace)
    journal.rollback()
    assert_as_before(*paths)
    assert not journal.folder.exists()


def test_a_failed_begin_leaves_no_journal_and_touches_nothing(tmp_path, monkeypatch):
    paths = workspace(tmp_path)

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(snapshot, "_link_or_copy", full_disk)
    journal = Journal(tmp_path / "journal")
    with pytest.raises(OSError):
        journal.begin(paths)
    assert not journal.folder.exists() and journal.rollback() is None
    assert_as_before(*paths)


def test_an_incomplete_journal_is_dropped_not_rolled_back(tmp_path):
    """A kill while saving: no manifest, so the workspace was never touched and nothing is put back."""
    path = tmp_path / "params.yaml"
    path.write_text("current\n")
    journal = Journal(tmp_path / "journal")
    (journal.folder / "0").mkdir(parents=True)
    assert journal.rollback() is None and path.read_text() == "current\n" and not journal.folder.exists()


def test_a_rollback_removes_what_the_run_added_to_a_store_and_only_that(tmp_path):
    """A folder a run only adds to (DVC's cache): files and folders added after `begin` are removed by a rollback,
    those there before stay, and a commit keeps the new ones."""
    store = tmp_path / "cache"
    (store / "ab").mkdir(parents=True)
    (store / "ab" / "old").write_bytes(b"old")
    journal = Journal(tmp_path / "journal")
    journal.begin([], added=[store])
    (store / "ab" / "new").write_bytes(b"new")
    (store / "runs" / "cd" / "key").mkdir(parents=True)  # an entry's folder: DVC fails on it empty
    (store / "runs" / "cd" / "key" / "value").write_text("outs")
    journal.rollback()
    assert sorted(p.relative_to(store).as_posix() for p in store.rglob("*")) == ["ab", "ab/old"]
    journal.begin([], added=[store])
    (store / "ab" / "new").write_bytes(b"new")
    journal.commit()
    assert (store / "ab" / "new").exists()


def test_a_full_disk_while_saving_names_the_file(tmp_path, monkeypatch):
    """The copy that finds the disk full raises the OSError naming the file it was writing (shutil.copytree gathered
    errors into one shutil.Error naming none, shown as a 20-line traceback)."""
    import shutil

    paths = workspace(tmp_path)

    def full_disk(src, dst, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write that fills the disk raises it

    monkeypatch.setattr(shutil, "copy2", full_disk)
    with pytest.raises(OSError) as err:
        Journal(tmp_path / "journal").begin(paths)
    assert err.value.errno == errno.ENOSPC and err.value.filename.startswith(str(tmp_path / "journal"))
    assert not isinstance(err.value, shutil.Error)
