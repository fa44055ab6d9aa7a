"""What is on disk is what dvc.lock says: DVC's cache objects and the workspace's outputs, checked by content.

DVC names a cache object by the MD5 of its bytes but never reads it again before it checks it out, and re-hashes a
workspace output only when its size or mtime changed. A byte changed by hand (root writes through DVC's read-only
bit), by a tool writing in place or by a failing disk then passes as "up to date", and a corrupt object comes back
out of the cache as the recorded output. `check`, run by pipeline.repro before `dvc repro`:

- every object under .dvc/cache/files/md5/ must hash to its name (a directory's `.dir` listing too); one that does
  not is removed, so that DVC runs the stage that made it again instead of checking it out;
- every output file dvc.lock records (each file of a directory output, by its `.dir` listing) must hash to the MD5
  recorded; one holding bytes the cache has no object of (edited or corrupted) is removed, so that DVC checks the
  recorded one out of its cache or, lacking it, runs its stage again. A file holding another cached version (a
  `git checkout` without `dvc checkout`) is DVC's to replace, as it always does.

A file is hashed again only when its inode, size or mtime changed since it was last hashed (the record
.dvc/tmp/pe-hashes.json; a cache object also when its ctime did, which nobody can set back: an object written in place
with its mtime reset is seen too; a workspace output's ctime also moves when the run's journal hard-links it), so an
unchanged workspace costs a stat per file. Only the project's own cache (.dvc/cache) is checked; entries of dvc.lock
hashed the DVC 2 way (no `hash: md5`) are left to DVC.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class _Hashes:
    """MD5s of files, kept by (inode, size, mtime, ctime) in the record between runs."""

    root: Path
    known: dict[str, list] = field(default_factory=dict)
    seen: dict[str, list] = field(default_factory=dict)

    def md5(self, path: Path, ctime: bool = False) -> str:
        """The MD5 of `path`, hashed again unless its inode, size, mtime (and with `ctime`, its ctime) are those
        recorded with it."""
        stat = path.stat()
        key = [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns if ctime else 0]
        name = path.relative_to(self.root).as_posix()
        entry = self.known.get(name)
        digest = entry[4] if entry is not None and entry[:4] == key else md5_file(path)
        self.seen[name] = [*key, digest]
        return digest


@dataclass
class Finding:
    """A file that is not what its name or dvc.lock says, and what was done about it."""

    path: str  # relative to the project
    message: str


def check(root: Path) -> list[Finding]:
    """Check the project's DVC cache objects and the outputs dvc.lock records, and remove each one found corrupt
    (module docstring). Returns what was found, in the order checked."""
    from pipeline.base.files import write_text

    record = root / RECORD
    try:
        known = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    hashes = _Hashes(root, known if isinstance(known, dict) else {})
    found: list[Finding] = []
    intact = _check_cache(root, hashes, found)
    _check_outputs(root, hashes, intact, found)
    if record.parent.is_dir():
        write_text(record, json.dumps(hashes.seen))
    return found


def _check_cache(root: Path, hashes: _Hashes, found: list[Finding]) -> set[str]:
    """The names (md5, md5.dir) of the cache objects whose bytes hash to their name; the others removed."""
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
            actual = hashes.md5(path, ctime=True)
            if actual == name.removesuffix(".dir"):
                intact.add(name)
                continue
            rel = path.relative_to(root).as_posix()
            found.append(
                Finding(
                    rel,
                    f"the DVC cache object {rel} is corrupt (its bytes hash to {actual}, not to its name): removed, "
                    "so that DVC recomputes what it held",
                )
            )
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


def _check_outputs(root: Path, hashes: _Hashes, intact: set[str], found: list[Finding]) -> None:
    cache = root / CACHE_FILES
    for stage, out, md5 in _locked_outputs(root):
        if md5.endswith(".dir"):
            if md5 not in intact:
                continue  # not in this cache (or removed just now): DVC runs the stage again
            listing = json.loads((cache / md5[:2] / md5[2:]).read_bytes())
            files = [(Path(out) / item["relpath"], item["md5"]) for item in listing]
        else:
            files = [(Path(out), md5)]
        for rel, expected in files:
            path = root / rel
            if not path.is_file() or path.is_symlink():
                continue  # missing, or DVC's own link: DVC restores or re-runs
            actual = hashes.md5(path)
            if actual == expected or actual in intact:
                continue  # as recorded, or another version DVC has cached and replaces itself
            then = (
                "DVC checks the recorded one out of its cache"
                if expected in intact
                else f"DVC runs stage {stage} again (its cache has no copy of the recorded one)"
            )
            found.append(
                Finding(
                    rel.as_posix(),
                    f"{rel.as_posix()} is not the output dvc.lock records for stage {stage} (its bytes hash to "
                    f"{actual}, not {expected}; no version DVC has cached: edited or corrupted): removed, so that "
                    f"{then}",
                )
            )
            path.unlink()
            hashes.seen.pop(rel.as_posix(), None)
