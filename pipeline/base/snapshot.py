"""A journal that puts files and folders back exactly as they were when a run does not finish.

    journal = Journal(root / ".dvc" / "tmp" / "repro-journal")
    journal.begin(paths, added=[folder], command="...")   # saves every existing path; nothing is changed yet
    ...                                    # the run changes the paths
    journal.commit()                       # success: the saved copies are dropped
    journal.rollback()                     # failure: every path as it was, then the copies are dropped

The saved copies live in the journal folder (same file system) with `journal.json`, written last: a journal
without it was never complete, so the workspace was not touched yet and the partial copies are just dropped.
Small files are copied, since tools rewrite them in place (DVC writes dvc.lock and params.yaml that way);
large ones (the GloVe vectors, matrices) are hard-linked, which is free and safe because only the pipeline's
stages write them, always to a temporary file renamed over the old one, and DVC deletes an output before
re-running its stage.

Folders a run only adds files to (DVC's cache: objects and run-cache entries) are not copied: `added` records the
files they hold, and a rollback removes every file added since, so that a run that is put back leaves none of what it
made behind (a cached output of a stage that read a file it should not have, say), nor a folder it made there.

`rollback` is idempotent and removes the journal only after every path is back: a rollback that a read-only
folder, a full disk or a kill stops half-way keeps the journal, and a later `rollback` (the next run, or
`python -m pipeline.repro --restore`) finishes it. A path is restored by removing what the run left there and
renaming its copy into place; a copy already renamed is gone from the journal, so no step is done twice.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Iterable

from pipeline.base.files import write_text

MANIFEST = "journal.json"
LINK_ABOVE = 16 << 20  # bytes: larger files are hard-linked, smaller ones copied


def _link_tree(src: Path, dst: Path) -> None:
    """`src` (a file, a link or a folder) saved at `dst`, large files hard-linked. The first error propagates as the
    OSError naming its file (shutil.copytree would gather errors into one shutil.Error that names none)."""
    if src.is_dir() and not src.is_symlink():
        dst.mkdir(parents=True)
        for entry in sorted(os.scandir(src), key=lambda e: e.name):
            _link_tree(Path(entry.path), dst / entry.name)
        shutil.copystat(src, dst)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        _link_or_copy(src, dst)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        if os.path.islink(src) or os.path.getsize(src) <= LINK_ABOVE:
            shutil.copy2(src, dst, follow_symlinks=False)
            return
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError:
            shutil.copy2(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:  # a full disk while writing: say where
            raise OSError(exc.errno, exc.strerror, str(dst)) from exc
        raise


def _entries(folder: Path) -> list[str]:
    """The files and folders under `folder` (recursively), as paths relative to it; none when it does not exist."""
    return [
        os.path.relpath(os.path.join(current, name), folder)
        for current, dirs, names in os.walk(folder)
        for name in [*dirs, *names]
    ]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


class Journal:
    """The saved state of a set of paths in folder `folder` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def pending(self) -> dict | None:
        """The record of a complete journal a run left (it was stopped before its commit or rollback), else None."""
        try:
            return json.loads((self.folder / MANIFEST).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None

    def begin(self, paths: Iterable[Path], added: Iterable[Path] = (), **info) -> None:
        """Save every existing path of `paths` (files or folders; absent ones are recorded as absent), and the names
        of the files in the folders `added` (see the module docstring).

        info: what the record says about the run (e.g. its command), shown when another run finishes its
        rollback. On any error (a full disk) the partial copies are removed and the error propagates: nothing
        of `paths` was changed.
        """
        shutil.rmtree(self.folder, ignore_errors=True)  # an incomplete journal: the workspace was never touched
        self.folder.mkdir(parents=True)
        saved: list[tuple[str, str | None]] = []
        try:
            for i, path in enumerate(Path(p) for p in paths):
                if path.exists() or path.is_symlink():
                    _link_tree(path, self.folder / str(i))
                    saved.append((str(path), str(i)))
                else:
                    saved.append((str(path), None))
            held = {str(folder): sorted(_entries(Path(folder))) for folder in added}
            record = {"pid": os.getpid(), "started": time.time(), **info, "paths": saved, "added": held}
            write_text(self.folder / MANIFEST, json.dumps(record, indent=1))  # atomic: written last, whole
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def commit(self) -> None:
        """The run finished: drop the saved copies."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def rollback(self) -> dict | None:
        """Put every saved path back as it was, then remove the journal; returns its record (None: no journal).

        Raises the OSError that stops it (the journal then stays, and a later rollback goes on from there)."""
        record = self.pending()
        if record is None:
            shutil.rmtree(self.folder, ignore_errors=True)
            return None
        for folder, held in record.get("added", {}).items():
            held = set(held)
            for name in sorted(_entries(Path(folder)), key=lambda n: -n.count(os.sep)):  # a folder after its files
                if name not in held:
                    path = Path(folder) / name
                    if path.is_dir() and not path.is_symlink():
                        path.rmdir()  # DVC takes an empty run-cache folder for an entry, and fails on it
                    else:
                        path.unlink(missing_ok=True)
        for path, name in map(tuple, record["paths"]):
            path, copy = Path(path), self.folder / name if name is not None else None
            if copy is not None and not (copy.exists() or copy.is_symlink()):
                continue  # put back by an earlier, interrupted rollback
            _remove(path)
            if copy is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(copy, path)
        shutil.rmtree(self.folder)
        return record
