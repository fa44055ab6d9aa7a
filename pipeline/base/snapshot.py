"""Put files and folders back exactly as they were when an operation fails.

`preserved(paths, scratch)` saves every existing path into a scratch folder on the same file system
before the block, and on any failure removes what the block left at those paths and moves the saved
ones back: same bytes and modification times. Small files are copied, since tools rewrite them in
place (DVC writes dvc.lock and params.yaml that way); large ones (the GloVe vectors, matrices) are
hard-linked, which is free and safe because only the pipeline's stages write them, always to a
temporary file renamed over the old one, and DVC deletes an output before re-running its stage.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator


def _link_tree(src: Path, dst: Path) -> None:
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dst, copy_function=_link_or_copy, symlinks=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        _link_or_copy(src, dst)


LINK_ABOVE = 16 << 20  # bytes: larger files are hard-linked, smaller ones copied


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    if os.path.islink(src) or os.path.getsize(src) <= LINK_ABOVE:
        shutil.copy2(src, dst, follow_symlinks=False)
        return
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextmanager
def preserved(paths: Iterable[Path], scratch: Path) -> Iterator[None]:
    """Restore `paths` (files or folders, existing or not) to their state before the block if it raises.

    scratch: an empty or absent folder on the same file system (it is removed afterwards).
    """
    paths = [Path(p) for p in paths]
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    saved: dict[Path, Path | None] = {}
    try:
        for i, path in enumerate(paths):
            if path.exists() or path.is_symlink():
                saved[path] = scratch / str(i)
                _link_tree(path, saved[path])
            else:
                saved[path] = None
        try:
            yield
        except BaseException:
            for path, copy in saved.items():
                _remove(path)
                if copy is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(copy, path)
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
