"""What is on disk is what dvc.lock says: DVC's cache objects and the workspace's outputs, checked by content.

DVC names a cache object by the MD5 of its bytes but never reads it again before it checks it out, and re-hashes a
workspace output only when its inode, size or mtime changed: bytes changed by hand (root writes through DVC's
read-only bit), by a tool writing in place or by a failing disk pass as "up to date", and a corrupt object comes back
out of the cache as the recorded output. `check`, run by pipeline.repro before `dvc repro`:

- every object under .dvc/cache/files/md5/ must hash to its name (a directory's `.dir` listing too); one that does
  not is removed, so that DVC runs the stage that made it again instead of checking it out;
- every output file dvc.lock records (each file of a directory output, by its `.dir` listing) must hash to the MD5
  recorded; one holding bytes the cache has no object of (edited or corrupted) is removed, so that DVC checks the
  recorded one out of its cache or, lacking it, runs its stage again. A file holding another cached version (a
  `git checkout` without `dvc checkout`) is DVC's to replace, as it always does.

A file is hashed again only when its inode, size, mtime or ctime (which nobody can set back) changed since it was
last hashed (the record .dvc/tmp/pe-hashes.json), so an unchanged workspace costs a stat per file. The run's journal
hard-links the files above LINK_ABOVE, which moves their ctime: `settle`, after a run finished, records it. With
`repair=False` (`python -m pipeline.verify`) every file is hashed and nothing removed. Only the project's own cache
(.dvc/cache) is checked; entries of dvc.lock hashed the DVC 2 way (no `hash: md5`) are left to DVC.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from pipeline.base.snapshot import LINK_ABOVE

CACHE = Path(".dvc") / "cache"
CACHE_FILES = CACHE / "files" / "md5"  # DVC 3's objects: <2 hex digits>/<30 more>[.dir]
RECORD = Path(".dvc") / "tmp" / "pe-hashes.json"
_OBJECT = re.compile(r"[0-9a-f]{30}(\.dir)?")


def cache_folders(root: Path) -> tuple[Path, ...]:
    """The project's DVC cache folders that a run only adds files to: objects and the run cache."""
    return (root / CACHE / "files", root / CACHE / "runs")


def md5_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _key(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


class _Hashes:
    """MD5s of files, kept by (inode, size, mtime, ctime) in the record between runs (none: every file hashed)."""

    def __init__(self, root: Path, record: bool) -> None:
        self.root, self.known, self.seen = root, _load(root) if record else {}, {}

    def md5(self, path: Path) -> str:
        key, name = _key(path), path.relative_to(self.root).as_posix()
        entry = self.known.get(name)
        digest = entry[4] if entry is not None and entry[:4] == key else md5_file(path)
        self.seen[name] = [*key, digest]
        return digest


def _load(root: Path) -> dict:
    try:
        known = json.loads((root / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _save(root: Path, seen: dict) -> None:
    from pipeline.base.files import write_text

    try:
        write_text(root / RECORD, json.dumps(seen))
    except OSError:  # no .dvc/tmp, a full disk: the next check hashes these files again
        pass


def settle(root: Path) -> None:
    """After a finished run: a recorded file above LINK_ABOVE bytes whose inode, size and mtime are those hashed keeps
    its hash with the ctime it has now (the journal's hard link moved it)."""
    seen = _load(root)
    for name, entry in seen.items():
        key = _key(root / name) if (root / name).exists() else []
        if key[:3] == entry[:3] and key[1] > LINK_ABOVE:
            entry[3] = key[3]
    _save(root, seen)


Finding = tuple[str, str]  # a file that is not what its name or dvc.lock says; what removing it makes DVC do


def check(root: Path, repair: bool = True) -> list[Finding]:
    """Check the project's DVC cache objects and the outputs dvc.lock records, and (`repair`) remove each one found
    corrupt (module docstring). Returns what was found, in the order checked."""
    hashes, found = _Hashes(root, record=repair), []
    intact = _check_cache(root, hashes, found, repair)
    _check_outputs(root, hashes, intact, found, repair)
    if repair:
        _save(root, hashes.seen)
    return found


def _check_cache(root: Path, hashes: _Hashes, found: list[Finding], repair: bool) -> set[str]:
    """The names (md5, md5.dir) of the cache objects whose bytes hash to their name; the others (`repair`) removed."""
    intact: set[str] = set()
    cache = root / CACHE_FILES
    if not cache.is_dir():
        return intact
    for prefix in sorted(os.scandir(cache), key=lambda e: e.name):
        if len(prefix.name) != 2 or not prefix.is_dir(follow_symlinks=False):
            continue
        for entry in sorted(os.scandir(prefix.path), key=lambda e: e.name):
            if not _OBJECT.fullmatch(entry.name) or not entry.is_file(follow_symlinks=False):
                continue  # DVC's own temporaries, a killed copy's leftovers
            name = prefix.name + entry.name
            path = Path(entry.path)
            actual = hashes.md5(path)
            if actual == name.removesuffix(".dir"):
                intact.add(name)
                continue
            rel = path.relative_to(root).as_posix()
            problem = f"the DVC cache object {rel} is corrupt (its bytes hash to {actual}, not to its name)"
            found.append((problem, "DVC recomputes what it held"))
            if repair:
                path.unlink(missing_ok=True)
                hashes.seen.pop(rel, None)
    return intact


def _locked_outputs(root: Path) -> list[tuple[str, str, str]]:
    """(stage, output path, md5 or md5.dir) of each output dvc.lock records with DVC 3's plain MD5."""
    import yaml

    try:
        lock = yaml.load(
            (root / "dvc.lock").read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return []  # no lock yet, or one DVC itself refuses with its own message
    stages = lock.get("stages") if isinstance(lock, dict) else None
    outputs = []
    for stage, info in (stages or {}).items():
        for out in (info or {}).get("outs") or []:
            if isinstance(out, dict) and out.get("hash") == "md5" and isinstance(out.get("md5"), str):
                outputs.append((stage, str(out["path"]), out["md5"]))
    return outputs


def _check_outputs(root: Path, hashes: _Hashes, intact: set[str], found: list[Finding], repair: bool) -> None:
    cache = root / CACHE_FILES
    for stage, out, md5 in _locked_outputs(root):
        if md5.endswith(".dir"):
            if md5 not in intact:
                continue  # not in this cache (or corrupt): DVC runs the stage again
            listing = json.loads((cache / md5[:2] / md5[2:]).read_bytes())
            files = [(Path(out) / item["relpath"], item["md5"]) for item in listing]
        else:
            files = [(Path(out), md5)]
        for rel, expected in files:
            path = root / rel
            if not path.is_file() or path.is_symlink():
                continue  # missing, or DVC's own link: DVC restores or re-runs
            actual = hashes.md5(path)
            if actual == expected or (repair and actual in intact):
                continue  # as recorded, or another version DVC has cached and replaces itself
            kind = "a version DVC has cached" if actual in intact else "no version DVC has cached: edited or corrupted"
            problem = (
                f"{rel.as_posix()} is not the output dvc.lock records for stage {stage} (its bytes hash to {actual}, "
                f"not {expected}; {kind})"
            )
            then = (
                "DVC checks the recorded one out of its cache"
                if expected in intact
                else f"DVC runs stage {stage} again (its cache has no copy of the recorded one)"
            )
            found.append((problem, then))
            if repair:
                path.unlink()
                hashes.seen.pop(rel.as_posix(), None)
