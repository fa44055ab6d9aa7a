"""HTTP downloads that survive real networks: mirrors, retries, resume, checksums, atomic rename.

    download(urls, target, sha256, policy) -> {"url", "bytes", "sha256", "cached", "resumed_from"}

- The body is streamed to `<target>.part` beside the target, with a progress bar (bytes, rate, ETA)
  when stderr is a terminal and the CI variable is not set.
- Connect and read timeouts; transient failures (timeouts, a connection lost or reset, a body cut short,
  HTTP 408/425/429/5xx) are retried with exponential backoff, each retry resuming with an HTTP
  Range request. A server that ignores Range (answers 200) is read again from byte 0. A host name that does not
  resolve or a connection refused is not retried (offline, it would only repeat): the next mirror is tried.
- Bytes are never spliced from two versions of a file. A partial file resumes only when something
  proves it is the same file: the pinned SHA-256 (checked at the end), or the strong ETag or
  Last-Modified of the answer that started it, recorded in `<target>.part.json` and sent back as
  `If-Range`, with the server answering 206 (a server whose file changed sends it whole, 200). A
  partial with neither (no pin, a server without validators, or no record) is deleted and the file
  is read from byte 0.
- The SHA-256 is checked before the rename into place; a mismatch deletes the file and says so (a
  resumed file gets one fresh try first, since the old partial may be the culprit).
- Mirrors are tried in order, one log line for each that fails (its last failure); when all fail, one short
  PipelineError says so, then `hint`.
- A cached file is used again: a pinned one when its SHA-256 matches (no request); an unpinned one after a
  conditional request with the ETag / Last-Modified of the answer that brought it (the `.part.json` record,
  kept as `<target>.json`): 304 reuses it, 200 downloads the new file. Without a record (a server without
  validators), or when the server cannot be reached, the cached copy is reused and one log line says so.
- Proxies (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) and CA bundles (REQUESTS_CA_BUNDLE) come from the
  environment, as for pip. Two processes downloading into one folder take turns (a file lock).
"""

from __future__ import annotations

import email.utils
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from pipeline.base.errors import PipelineError
from pipeline.base.files import sha256_file, write_text
from pipeline.base.secrets import redact

log = logging.getLogger("pipeline")

CHUNK = 1 << 16  # what a dropped connection can cost: bytes of an unfinished read are lost
TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}
USER_AGENT = "pe-pipeline (python-requests)"


@dataclass(frozen=True)
class DownloadPolicy:
    """How hard to try. Backoff before retry n (n = 1, 2, ...) is backoff * 2**(n-1), at most max_backoff."""

    connect_timeout: float = 15.0  # seconds to open the connection
    read_timeout: float = 60.0  # seconds without a byte before the connection counts as dead
    retries: int = 5  # retries per URL after failures that made no progress
    backoff: float = 0.25
    max_backoff: float = 60.0
    progress: bool | None = None  # None: a bar when stderr is a terminal and CI is not set
    reserve_bytes: int = 16 << 20  # free space to leave on the disk

    @classmethod
    def from_config(cls, cfg) -> "DownloadPolicy":
        """From glove.download (the schema's DownloadConfig, whose rules have checked every value)."""
        return cls(cfg.connect_timeout, cfg.read_timeout, cfg.retries, cfg.backoff)


class _Transient(Exception):
    """Worth retrying. progressed: bytes were written before the failure."""

    def __init__(self, message: str, progressed: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.progressed, self.retry_after = progressed, retry_after


class _Permanent(Exception):
    """This URL will not work (404, bad scheme, ...): go to the next mirror. mismatch: it served a file whose
    SHA-256 is not the pinned one (not a network problem)."""

    def __init__(self, message: str, mismatch: bool = False, logged: bool = False):
        super().__init__(message)
        self.mismatch, self.logged = mismatch, logged  # logged: this URL's failure already has its one log line


MISMATCH_HINT = (
    "Fix: the server sent a file other than the pinned one (a new release, or a wrong or tampered "
    "mirror): check the URL, or update the pinned SHA-256 if the new file is the one you want."
)


def download(
    urls: Sequence[str],
    target: Path,
    sha256: str | None = None,
    policy: DownloadPolicy = DownloadPolicy(),
    hint: str = "",
    mismatch_hint: str = MISMATCH_HINT,
) -> dict:
    """Fetch `target` from the first of `urls` that works; return where it came from.

    An existing `target` whose SHA-256 matches is used as it is; without `sha256`, after `revalidate` says the
    server's file is unchanged (or cannot say).
    Raises PipelineError when every URL fails: one line (each URL's failure is logged as it happens), then
    `hint` (how to proceed), or `mismatch_hint` when every URL answered with a file of the wrong SHA-256.

    Longer than 60 lines because its docstring states the whole retry contract; the body is the loop over URLs and
    attempts.
    """
    import requests

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    meta = target.with_name(target.name + ".part.json")
    record = target.with_name(target.name + ".json")  # the validator of the completed file (unpinned only)
    urls = [u for u in urls if u]
    if not urls:
        raise PipelineError(f"no URL to download {target.name} from: set glove.url (and glove.mirrors).")
    tried: list[str] = []
    mismatches: list[bool] = []
    with _locked(target.parent), requests.Session() as session:
        session.headers["User-Agent"] = USER_AGENT
        if target.exists():
            if sha256 is None:
                reuse = revalidate(session, target, record, urls, policy)
            else:
                digest = sha256_file(target)
                reuse = digest == sha256
                if not reuse:
                    log.warning("%s has SHA-256 %s, expected %s: downloading it again", target, digest, sha256)
                    target.unlink()
            if reuse:
                return {
                    "url": None,
                    "bytes": target.stat().st_size,
                    "sha256": sha256 or sha256_file(target),
                    "cached": True,
                    "resumed_from": 0,
                }
        for url in urls:
            try:
                size, digest, resumed = _from_url(session, url, part, meta, sha256, policy)
            except _Permanent as exc:
                tried.append(redact(exc))
                mismatches.append(exc.mismatch)
                if not exc.logged:
                    log.warning("download of %s failed: %s", redact(url), redact(exc))
                continue
            os.replace(part, target)
            if sha256 is None and meta.exists():  # what the next run's conditional request sends
                os.replace(meta, record)
            else:
                meta.unlink(missing_ok=True)
                record.unlink(missing_ok=True)
            return {"url": url, "bytes": size, "sha256": digest, "cached": False, "resumed_from": resumed}
    if part.exists() and not (sha256 or meta.exists()):  # nothing could prove a later run resumes the same file
        part.unlink()
    kept = (
        f" The {part.stat().st_size:,} bytes received so far are kept in {part} and the next run resumes "
        "from there (if the server's file is unchanged)."
        if part.exists()
        else ""
    )
    if all(mismatches):  # the network worked: the files differ from the pin
        hint = mismatch_hint
    # each URL's failure has had its log line: the message stays one short line (what was tried is above it)
    why = tried[0] if len(set(tried)) == 1 else "each logged above"
    where = f"{len(tried)} URLs" if len(tried) > 1 else redact(urls[0])
    name = urls[0].split("?")[0].rstrip("/").rsplit("/", 1)[-1] or target.name  # the file's name, not the cache's
    raise PipelineError(f"could not download {name} from {where} ({why}). {hint}{kept}")


def discard(target: Path) -> None:
    """Delete a cached download and its record (a file that turned out damaged: the next run fetches it anew)."""
    target.unlink(missing_ok=True)
    target.with_name(target.name + ".json").unlink(missing_ok=True)


def revalidate(session, target: Path, record: Path, urls: Sequence[str], policy: DownloadPolicy) -> bool:
    """Whether the unpinned cached `target` may be used again; one log line says why.

    The server that sent it is asked whether its file changed, with the ETag (If-None-Match) or Last-Modified date
    (If-Modified-Since) recorded in `record`: 304 (or the same validator) -> reuse; 200 -> False (download it again).
    No record (the server sent no validator), or no answer (offline, an HTTP error) -> reuse, said as such.
    """
    import requests

    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = {}
    url, validator = recorded.get("url"), recorded.get("validator")
    force = "to download it again, delete it and run again, e.g. `python -m pipeline.repro -- -f glove`"
    if url not in urls or not validator:
        log.info(
            "reusing the cached copy %s of %s unverified: no ETag or Last-Modified from the server was recorded "
            "to check it against (%s)",
            target,
            redact(urls[0]),
            force,
        )
        return True
    header = "If-None-Match" if validator.startswith('"') else "If-Modified-Since"
    try:
        response = session.get(
            url,
            stream=True,
            headers={header: validator, "Accept-Encoding": "identity"},
            allow_redirects=True,
            timeout=(policy.connect_timeout, policy.read_timeout),
        )
    except requests.exceptions.RequestException as exc:
        reason = _describe(exc, policy)
    else:
        with response:  # closed unread: a changed file is downloaded by the resumable path
            status = response.status_code
            if status == 304 or (status == 200 and _validator(response.headers) == validator):
                log.info(
                    "%s is unchanged on the server (HTTP %d): reusing the cached copy %s", redact(url), status, target
                )
                return True
            if status == 200:
                log.info("%s has changed on the server: downloading it again into %s", redact(url), target)
                return False
            reason = f"HTTP {status} {response.reason}"
    log.warning(
        "could not check whether %s changed (%s): reusing the cached copy %s (%s)", redact(url), reason, target, force
    )
    return True


def _from_url(
    session, url: str, part: Path, meta: Path, sha256: str | None, policy: DownloadPolicy
) -> tuple[int, str, int]:
    """Download one URL into `part` with retries; (bytes, sha256, resumed_from). Raises _Permanent."""
    failures, fresh_retry_used, warned = 0, False, False
    while True:
        try:
            size, digest, resumed = _transfer(session, url, part, meta, policy, pinned=bool(sha256))
        except _Transient as exc:
            failures = 0 if exc.progressed else failures + 1
            if failures > policy.retries:
                raise _Permanent(f"{exc} (gave up after {policy.retries + 1} attempts)", logged=warned) from None
            delay = min(policy.max_backoff, policy.backoff * 2 ** max(failures - 1, 0))
            if exc.retry_after is not None:
                delay = max(delay, min(exc.retry_after, policy.max_backoff))
            # one line per URL (offline, every mirror would print each of its retries); the rest at debug level,
            # and the final error lists every URL with its last failure
            level = logging.DEBUG if warned else logging.WARNING
            log.log(level, "download of %s: %s; retrying (up to %d times)", redact(url), redact(exc), policy.retries)
            warned = True
            time.sleep(delay)
            continue
        if sha256 and digest != sha256:
            part.unlink(missing_ok=True)
            meta.unlink(missing_ok=True)
            if resumed and not fresh_retry_used:  # the partial from before may be stale: one try from zero
                fresh_retry_used = True
                log.warning(
                    "download of %s resumed at byte %d has the wrong SHA-256: downloading it from the start",
                    redact(url),
                    resumed,
                )
                continue
            raise _Permanent(
                f"SHA-256 mismatch: got {digest}, expected {sha256}; the downloaded file was deleted", mismatch=True
            )
        return size, digest, resumed


def _transfer(
    session, url: str, part: Path, meta: Path, policy: DownloadPolicy, pinned: bool = False
) -> tuple[int, str, int]:
    """One HTTP request: resume `part` if it provably holds the start of the same file, else start it afresh.
    pinned: a SHA-256 will check the result (a wrong splice is then caught and retried from zero).
    Returns (bytes, sha256, resumed_from)."""
    offset, validator = _resumable(url, part, meta, pinned)
    response = _request(session, url, offset, validator, policy)
    with response:
        status = response.status_code
        if status == 416 and offset:
            total = _content_range_total(response.headers.get("Content-Range", ""))
            if total == offset:  # the partial file is already complete
                return offset, sha256_file(part), offset
            part.unlink(missing_ok=True)
            raise _Transient(f"HTTP 416: the server refused to resume at byte {offset}; restarting from byte 0")
        if status in TRANSIENT_STATUS:
            raise _Transient(f"HTTP {status} {response.reason}", retry_after=_retry_after(response))
        if status not in (200, 206):
            raise _Permanent(f"HTTP {status} {response.reason}")
        offset, total, remaining = _accepted_range(response, url, part, meta, offset, validator)
        # A server that compresses despite "Accept-Encoding: identity" sends bytes whose offsets and length
        # are not those of the file: nothing to compare the size with, and nothing to resume.
        encoded = response.headers.get("Content-Encoding", "identity").lower() not in ("identity", "")
        if encoded:
            total = remaining = None
        _check_space(part.parent, remaining, policy.reserve_bytes)
        if not offset:
            _write_validator(meta, url, {} if encoded else response.headers)
        written, digest = _stream(response, part, offset, total, encoded, policy)
    size = offset + written
    if total is not None and size != total:
        raise _Transient(f"the connection closed after {size:,} of {total:,} bytes", progressed=written > 0)
    return size, digest, offset


def _resumable(url: str, part: Path, meta: Path, pinned: bool) -> tuple[int, str | None]:
    """(the byte to resume at, the recorded ETag / Last-Modified): 0 when `part` is absent or of unknown version
    (then deleted)."""
    offset = part.stat().st_size if part.exists() else 0
    validator = _read_validator(meta, url)
    if offset and not (validator or pinned):
        log.info(
            "%s: %s holds %s bytes of unknown version (no ETag/Last-Modified recorded, no SHA-256 pinned): "
            "downloading from byte 0",
            redact(url),
            part.name,
            f"{offset:,}",
        )
        part.unlink()
        meta.unlink(missing_ok=True)
        offset = 0
    return offset, validator


def _request(session, url: str, offset: int, validator: str | None, policy: DownloadPolicy):
    """The streaming GET (a range from `offset`, if any); a failure to connect as _Permanent or _Transient."""
    import requests

    headers = {"Accept-Encoding": "identity"}  # byte ranges and sizes refer to the file as stored
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    try:
        return session.get(
            url,
            stream=True,
            headers=headers,
            allow_redirects=True,
            timeout=(policy.connect_timeout, policy.read_timeout),
        )
    except (
        requests.exceptions.InvalidURL,
        requests.exceptions.InvalidSchema,
        requests.exceptions.MissingSchema,
    ) as exc:
        raise _Permanent(f"invalid URL ({exc})") from None
    except requests.exceptions.SSLError as exc:
        raise _Permanent(
            f"TLS error ({_short(exc)}); behind a proxy with its own certificate authority, set "
            "REQUESTS_CA_BUNDLE to its certificate file"
        ) from None
    except requests.exceptions.ProxyError as exc:
        raise _Transient(f"proxy error ({_short(exc)}); check HTTPS_PROXY / HTTP_PROXY") from None
    except requests.exceptions.RequestException as exc:
        if _unreachable(exc):  # DNS or a refused connection: a retry would only repeat it
            raise _Permanent(_describe(exc, policy)) from None
        raise _Transient(_describe(exc, policy)) from None


def _accepted_range(
    response, url: str, part: Path, meta: Path, offset: int, validator: str | None
) -> tuple[int, int | None, int | None]:
    """(offset, total size, bytes to come) of a 200 or 206 answer; a 206 of another start or version is refused
    (the partial file deleted), a 200 restarts from byte 0."""
    length = response.headers.get("Content-Length")
    remaining = int(length) if length and length.isdigit() else None
    if response.status_code == 206:
        start, total = _content_range(response.headers.get("Content-Range", ""))
        if start != offset:
            part.unlink(missing_ok=True)
            raise _Transient(f"the server resumed at byte {start}, not {offset}; restarting from byte 0")
        if validator and _validator(response.headers) not in (None, validator):  # If-Range ignored
            part.unlink(missing_ok=True)
            meta.unlink(missing_ok=True)
            raise _Transient(
                "the server sent a range of another version of the file (it ignored If-Range); restarting from byte 0"
            )
        return offset, total, remaining
    if offset:
        log.info("%s ignored the range request: downloading it from byte 0", redact(url))
    return 0, remaining, remaining


def _stream(response, part: Path, offset: int, total: int | None, encoded: bool, policy: DownloadPolicy):
    """Append the body to `part` (written afresh when offset is 0); (bytes written, SHA-256 of the whole file)."""
    import requests

    digest = hashlib.sha256()
    if offset:
        with open(part, "rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
    written = 0
    chunks = response.iter_content(CHUNK)
    with open(part, "ab" if offset else "wb") as out, _progress(total, offset, part.name[:-5], policy) as bar:
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except (requests.exceptions.RequestException, OSError) as exc:
                if encoded:
                    part.unlink(missing_ok=True)
                raise _Transient(
                    f"connection lost after {offset + written:,} bytes: {_describe(exc, policy)}",
                    progressed=written > 0 and not encoded,
                ) from None
            _write(out, chunk, part)
            digest.update(chunk)
            written += len(chunk)
            bar.update(len(chunk))
    return written, digest.hexdigest()


def _write(out, chunk: bytes, part: Path) -> None:
    try:
        out.write(chunk)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise PipelineError(
                f"the disk holding {part} is full: free some space and run again (the download "
                "resumes from where it stopped)."
            ) from None
        raise


def _check_space(folder: Path, needed: int | None, reserve: int) -> None:
    """Refuse to start writing `needed` bytes into `folder` when the disk lacks them."""
    if needed is None:
        return
    free = shutil.disk_usage(folder).free
    if free < needed + reserve:
        raise PipelineError(
            f"not enough free disk space in {folder}: {human(needed)} to write, {human(free)} free. "
            "Fix: free some space, or download the file elsewhere and point the config at it "
            "(glove.zip=... or glove.path=...)."
        )


def human(size: int) -> str:
    """1234567 -> '1.2 MB' (decimal units, as download pages quote sizes)."""
    value = float(size)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} bytes"  # unreachable


def _short(exc: Exception) -> str:
    return redact(" ".join(str(exc).split()))[:300]


def _unreachable(exc: Exception) -> bool:
    """The host name does not resolve or the host refuses the connection (offline, a typo, nothing listening)."""
    import urllib3.exceptions as u3

    return any(isinstance(c, (u3.NameResolutionError, ConnectionRefusedError)) for c in _causes(exc))


def _causes(exc: BaseException) -> list[BaseException]:
    """exc and what it wraps: requests wraps urllib3's errors, which wrap the socket's, often 2-3 deep."""
    chain, seen = [exc], exc
    while seen is not None and len(chain) < 8:  # the cause is often 2-3 wrappers deep
        seen = (
            getattr(seen, "reason", None)
            or seen.__cause__
            or seen.__context__
            or (seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None)
        )
        if seen is not None:
            chain.append(seen)
    return chain


def _describe(exc: Exception, policy: DownloadPolicy) -> str:
    """A network error in a few words: requests wraps urllib3's, whose names say what happened."""
    import requests
    import urllib3.exceptions as u3

    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return f"no connection within {policy.connect_timeout:g} s (connect timeout)"
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return f"no data for {policy.read_timeout:g} s (read timeout)"
    chain = _causes(exc)

    def found(kind) -> BaseException | None:
        return next((c for c in chain if isinstance(c, kind)), None)

    if (name := found(u3.NameResolutionError)) is not None:
        host = getattr(getattr(name, "conn", None), "host", "")
        return f"cannot resolve the host name {host} (offline, or DNS)".replace("  ", " ")
    if found(ConnectionRefusedError) is not None:
        return "connection refused"
    if found(u3.ReadTimeoutError) is not None:
        return f"no data for {policy.read_timeout:g} s (read timeout)"
    if found(u3.NewConnectionError) is None and found(u3.ConnectTimeoutError) is not None:
        return f"no connection within {policy.connect_timeout:g} s (connect timeout)"
    if (broken := found(u3.ProtocolError)) is not None and "IncompleteRead" in str(broken):
        return "the server closed the connection mid-body"
    if found(ConnectionResetError) is not None:
        return "connection reset by the server"
    return f"{type(exc).__name__} ({_short(exc)})"


def _content_range(value: str) -> tuple[int | None, int | None]:
    """'bytes 100-199/1000' -> (100, 1000); total None when '*'."""
    match = re.fullmatch(r"\s*bytes\s+(\d+)-\d+/(\d+|\*)\s*", value)
    if not match:
        return None, None
    return int(match[1]), (None if match[2] == "*" else int(match[2]))


def _content_range_total(value: str) -> int | None:
    match = re.fullmatch(r"\s*bytes\s+\*/(\d+)\s*", value)
    return int(match[1]) if match else None


def _retry_after(response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _read_validator(meta: Path, url: str) -> str | None:
    """The ETag or Last-Modified recorded when `url` started the partial file, if it did."""
    try:
        recorded = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return recorded.get("validator") if recorded.get("url") == url else None


def _validator(headers) -> str | None:
    """The strong ETag, else the Last-Modified date, of an answer (what If-Range may send back)."""
    etag = headers.get("ETag")
    if etag and not etag.startswith("W/"):  # a weak ETag cannot guard a byte range
        return etag
    return headers.get("Last-Modified") or None


def _write_validator(meta: Path, url: str, headers) -> None:
    validator = _validator(headers)
    if validator:
        write_text(meta, json.dumps({"url": url, "validator": validator}))
    else:
        meta.unlink(missing_ok=True)


def progress_enabled(policy: DownloadPolicy) -> bool:
    if policy.progress is not None:
        return policy.progress
    return sys.stderr.isatty() and not os.environ.get("CI")


@contextmanager
def _progress(total: int | None, initial: int, name: str, policy: DownloadPolicy) -> Iterator:
    from tqdm import tqdm

    enabled = progress_enabled(policy)
    if not enabled:
        size = human(total) if total else "size unknown"
        if initial:
            log.info("resuming %s at %s of %s", name, human(initial), size)
        else:
            log.info("downloading %s (%s)", name, size)
    with tqdm(
        total=total,
        initial=initial,
        desc=name,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=not enabled,
        file=sys.stderr,
        mininterval=0.5,
        dynamic_ncols=True,
    ) as bar:
        yield bar


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (POSIX); another process downloading there waits for it."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("another process is downloading into %s: waiting for it", folder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
