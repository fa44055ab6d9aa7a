"""pipeline.base.snapshot.preserved: a failed block leaves files and folders exactly as they were."""

from __future__ import annotations

import os

import pytest

from pipeline.base import snapshot
from pipeline.base.snapshot import preserved


def test_failure_restores_rewritten_removed_and_new_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot, "LINK_ABOVE", 100)  # the "large" file below is hard-linked
    small, large, folder, absent = tmp_path / "dvc.lock", tmp_path / "big.npy", tmp_path / "out", tmp_path / "new.json"
    small.write_text("lock v1\n")
    large.write_bytes(b"x" * 1000)
    folder.mkdir()
    (folder / "a.png").write_bytes(b"a")
    os.utime(small, (1_000_000, 1_000_000))
    with pytest.raises(RuntimeError):
        with preserved([small, large, folder, absent], tmp_path / "scratch"):
            with open(small, "w") as handle:  # rewritten in place, as DVC writes dvc.lock
                handle.write("lock v2\n")
            large.unlink()  # replaced, as a stage writes (temp file + rename)
            large.write_bytes(b"y" * 10)
            (folder / "a.png").unlink()
            (folder / "b.png").write_bytes(b"b")  # a file of another run
            absent.write_text("{}")
            raise RuntimeError("stage failed")
    assert small.read_text() == "lock v1\n" and small.stat().st_mtime == 1_000_000
    assert large.read_bytes() == b"x" * 1000
    assert sorted(p.name for p in folder.iterdir()) == ["a.png"] and (folder / "a.png").read_bytes() == b"a"
    assert not absent.exists() and not (tmp_path / "scratch").exists()


def test_success_keeps_the_new_state(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("old\n")
    with preserved([path], tmp_path / "scratch"):
        path.write_text("new\n")
    assert path.read_text() == "new\n" and not (tmp_path / "scratch").exists()
