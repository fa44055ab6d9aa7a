"""Fast, exact ingest of GloVe text: `word v1 ... v_dim` per line, single spaces, no header, UTF-8.

    read_glove_text(path, dim) -> GloveText(vectors (rows, dim) float32, words, sha256, bytes)

How it is fast: one counting pass sizes the output exactly, then the file is read in 4 MiB blocks,
each split at line ends into one part per thread, and every part is parsed by a compiled (numba,
`nogil`) loop that writes floats straight into the output rows and copies the words into one byte
buffer, decoded once at the end. The SHA-256 of the file is computed in another thread meanwhile.
Peak memory: the output matrix, the words, and a few blocks.

How it stays exact: the compiled loop only accepts the plain decimal grammar
`[+-]digits[.digits][(e|E)[+-]digits]` with a mantissa below 2**53 (15 significant digits) and a
decimal exponent within +-22, whose value `m / 10**k` (or `m * 10**k`) in float64 is then correctly
rounded: the same double `float()` gives. It rounds that to float32, as `np.asarray(fields,
dtype='float32')` does (its grammar cannot express a value beyond float32's range, so its results are always
finite). Any line it does not accept (odd numbers such as `nan` or 17 digits, a field
count error, a stray `\r`) goes to `parse_line`, the plain Python reference, which either parses it
with `float()` or raises the PipelineError naming the line. Without numba every line goes through
`parse_line` (same results, slowly).
"""

from __future__ import annotations

import hashlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.base.errors import PipelineError

log = logging.getLogger("pipeline")

BLOCK = 4 << 20  # bytes read at a time (then split between threads); more buys no speed
COUNT_BLOCK = 4 << 20  # bytes per read of the counting pass
MAX_LINE_BYTES = 64 << 20  # a longer line is refused (not GloVe: e.g. a zip bomb's NULs) before memory runs out
BOM = b"\xef\xbb\xbf"
_BAD_NUMBER_CHARS = frozenset(b"_ \t\n\r\x0b\x0c")  # float() would accept them; GloVe fields never hold them


@dataclass
class GloveText:
    """What `read_glove_text` returns. vectors: (rows, dim) float32, row i belongs to words[i]."""

    vectors: np.ndarray
    words: list[str]
    sha256: str | None
    bytes: int
    fast_lines: int  # lines parsed by the compiled loop (the rest went through parse_line)


# ---------------------------------------------------------------- the reference (one line at a time)


def parse_line(line: bytes, dim: int, origin: str, number: int) -> tuple[str, np.ndarray]:
    """Parse one GloVe line (without its "\\n"; a final "\\r" is dropped) -> (word, (dim,) float32).

    The reference semantics: fields split on single spaces, exactly `dim` numbers, each parsed by
    `float()` then rounded to float32, which must be finite (no nan, inf, or overflow such as 1e400 or 1e39).
    Raises PipelineError naming `origin` and line `number`.
    """
    if line.endswith(b"\r"):
        line = line[:-1]
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineError(
            f"{origin} line {number} is not UTF-8 ({exc.reason} at column {exc.start + 1}): "
            "GloVe files are UTF-8; convert the file (e.g. iconv -t UTF-8) or replace it."
        ) from None
    fields = line.split(b" ")
    if len(fields) != dim + 1:
        raise PipelineError(
            f"{origin} line {number}: expected a word and {dim} numbers separated by single "
            f"spaces, found {len(fields) - 1} numbers. Fix: check glove.dim (= {dim}) against the "
            "file, or replace the corrupt file."
        )
    word = fields[0].decode("utf-8")
    if not word:
        raise PipelineError(
            f"{origin} line {number} starts with a space (empty word): each line must be "
            "`word v1 ... vN`. Fix: replace the corrupt file."
        )
    values = np.empty(dim, dtype=np.float32)
    for j, field in enumerate(fields[1:]):
        if not field:
            raise PipelineError(
                f"{origin} line {number}: field {j + 1} is empty (two spaces in a row, or a space at the end of "
                "the line). Fix: replace the corrupt file."
            )
        try:
            if _BAD_NUMBER_CHARS.intersection(field) or not field.isascii():
                raise ValueError
            with np.errstate(over="ignore"):
                values[j] = float(field)
        except ValueError:
            raise PipelineError(
                f"{origin} line {number}: field {j + 1} is not a number. Fix: replace the corrupt file."
            ) from None
        if not np.isfinite(values[j]):
            raise PipelineError(
                f"{origin} line {number}: field {j + 1} is not a finite float32 (NaN, infinity, or beyond "
                "+-3.4e38): a vector must be finite. Fix: replace the corrupt file."
            )
    return word, values


# ---------------------------------------------------------------- the compiled loop

POW10 = np.array([10.0**k for k in range(23)])  # exact doubles
_MAX_MANTISSA = (1 << 53) // 10 - 1  # m * 10 + 9 still below 2**53
_DONE, _SLOW, _FULL = 0, 1, 2


def _parse_lines(buf, pos, end, dim, out, row, words, wpos, pow10):  # pragma: no cover - compiled by numba
    """Parse the lines of buf[pos:end] (each ends with "\\n") into out[row:], words into words[wpos:].

    Returns (pos, row, wpos, status): _DONE at `end`; _SLOW with pos at the start of a line this
    loop does not accept; _FULL when out has no row left for the line at pos.
    """
    rows = out.shape[0]
    while pos < end:
        start = pos
        if row >= rows:
            return pos, row, wpos, _FULL
        while buf[pos] != 32 and buf[pos] != 10:  # the word: up to the first space
            pos += 1
        if pos == start or buf[pos] != 32:
            return start, row, wpos, _SLOW
        word_end = pos
        pos += 1
        for j in range(dim):
            negative = False
            c = buf[pos]
            if c == 45:
                negative = True
                pos += 1
            elif c == 43:
                pos += 1
            mantissa = 0
            digits = 0
            dot = -1
            exact = True
            while True:  # digits and at most one ".": one loop, so one hard-to-predict exit per number
                d = np.int64(buf[pos]) - 48
                if 0 <= d <= 9:
                    if mantissa > _MAX_MANTISSA:
                        exact = False
                    mantissa = mantissa * 10 + d
                    digits += 1
                elif d == -2 and dot < 0:
                    dot = digits
                else:
                    break
                pos += 1
            scale = dot - digits if dot >= 0 else 0
            if digits == 0:
                return start, row, wpos, _SLOW
            if buf[pos] == 101 or buf[pos] == 69:
                pos += 1
                exp_negative = False
                if buf[pos] == 45 or buf[pos] == 43:
                    exp_negative = buf[pos] == 45
                    pos += 1
                exponent = 0
                exp_digits = 0
                while True:
                    d = np.int64(buf[pos]) - 48
                    if d < 0 or d > 9:
                        break
                    if exponent < 100000:
                        exponent = exponent * 10 + d
                    exp_digits += 1
                    pos += 1
                if exp_digits == 0:
                    return start, row, wpos, _SLOW
                scale += -exponent if exp_negative else exponent
            if not exact:
                return start, row, wpos, _SLOW
            if mantissa == 0:
                value = 0.0
            elif -22 <= scale < 0:
                value = mantissa / pow10[-scale]  # both exact: one correctly rounded division
            elif 0 <= scale <= 22:
                value = mantissa * pow10[scale]
            else:
                return start, row, wpos, _SLOW
            out[row, j] = np.float32(-value if negative else value)
            if j < dim - 1:
                if buf[pos] != 32:
                    return start, row, wpos, _SLOW
                pos += 1
        if buf[pos] == 13:
            pos += 1
        if buf[pos] != 10:
            return start, row, wpos, _SLOW
        pos += 1
        for k in range(start, word_end):
            words[wpos] = buf[k]
            wpos += 1
        words[wpos] = 10
        wpos += 1
        row += 1
    return pos, row, wpos, _DONE


_compiled = None


def _kernel():
    """The compiled loop (numba, cached on disk), or None without numba. Imported on first use only:
    numba takes a few tenths of a second to import, which the package source never pays."""
    global _compiled
    if _compiled is None:
        try:
            from numba import njit
        except ImportError:  # numba is a dependency; this keeps a broken install usable
            return None
        _compiled = njit(cache=True, nogil=True)(_parse_lines)
    return _compiled


def _no_kernel(buf, pos, end, dim, out, row, words, wpos, pow10):
    """Stand-in without numba: hand every line to the reference parser."""
    if pos >= end:
        return pos, row, wpos, _DONE
    return pos, row, wpos, (_FULL if row >= out.shape[0] else _SLOW)


# ---------------------------------------------------------------- file level


def count_lines(path: Path) -> tuple[int, int, bool]:
    """(lines, bytes, starts_with_bom) of a file: lines = "\\n" count, plus one for a last line without it."""
    lines, size, last, first = 0, 0, b"\n", b""
    with open(path, "rb") as handle:
        while block := handle.read(COUNT_BLOCK):
            lines += int(np.count_nonzero(np.frombuffer(block, dtype=np.uint8) == 10))
            size += len(block)
            first = first or block[:3]
            last = block[-1:]
    return lines + (last != b"\n"), size, first == BOM


def _sha256(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):  # hashlib releases the GIL on large blocks
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


class _Part:
    """One thread's share of a block: its bytes, first row, and the words it found."""

    def __init__(self, buf: np.ndarray, begin: int, end: int, row: int):
        self.buf, self.begin, self.end, self.row = buf, begin, end, row
        self.words = b""


def _parse_part(part: _Part, dim: int, out: np.ndarray, origin: str, kernel) -> int:
    """Parse part.buf[begin:end] into out starting at part.row; returns the number of lines parsed by the kernel."""
    buf, pos, row, fast = part.buf, part.begin, part.row, 0
    words = np.empty(part.end - part.begin + 1, dtype=np.uint8)  # a word and its "\n" are never longer than its line
    wpos = 0
    while True:
        new_pos, new_row, wpos, status = kernel(buf, pos, part.end, dim, out, row, words, wpos, POW10)
        fast += new_row - row
        pos, row = new_pos, new_row
        if status == _DONE:
            break
        if status == _FULL or row >= out.shape[0]:
            raise PipelineError(
                f"{origin} grew while it was read (more lines than counted): read it again once nothing writes to it."
            )
        line_end = _next_newline(buf, pos, part.end)
        word, out[row] = parse_line(buf[pos:line_end].tobytes(), dim, origin, row + 1)
        encoded = word.encode("utf-8") + b"\n"
        words[wpos : wpos + len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)
        wpos += len(encoded)
        pos, row = line_end + 1, row + 1
    part.words = words[:wpos].tobytes()
    part.row = row
    return fast


def read_glove_text(
    path: Path,
    dim: int,
    origin: str | None = None,
    *,
    sha256: bool = True,
    threads: int | None = None,
    fast: bool = True,
) -> GloveText:
    """Read a GloVe text file into a (rows, dim) float32 matrix and its words, checking every line.

    sha256: also hash the file (in a parallel thread). threads: parsing threads (default: CPU count,
    at most 8). fast=False: use only the reference parser (for tests and comparisons).
    Raises PipelineError naming the line for a malformed line, a non-UTF-8 word, or duplicate words.
    """
    path = Path(path)
    origin = origin or str(path)
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    kernel = (_kernel() if fast else None) or _no_kernel
    if fast and kernel is _no_kernel:
        log.warning("numba is not installed: parsing %s with the slow reference parser", origin)
    threads = max(1, threads or min(os.cpu_count() or 1, 8))

    with ThreadPoolExecutor(max_workers=threads + 1) as pool:
        hashing = pool.submit(_sha256, path) if sha256 else None
        rows, size, bom = count_lines(path)
        out = np.empty((rows, dim), dtype=np.float32)
        pieces, fast_lines, row = [], 0, 0
        with open(path, "rb") as handle:
            if bom:
                handle.seek(len(BOM))
            buf = np.empty(BLOCK + 1, dtype=np.uint8)  # +1: room for a "\n" after a last line without one
            carry = 0
            while True:
                got = handle.readinto(memoryview(buf)[carry : len(buf) - 1])
                filled = carry + got
                if got == 0:  # end of file: the rest is the last line
                    if filled and buf[filled - 1] != 10:
                        buf[filled] = 10
                        filled += 1
                    cut = filled
                else:
                    cut = _last_newline(buf, filled) + 1
                    if cut == 0:  # one line longer than the buffer: grow it
                        if len(buf) > MAX_LINE_BYTES:
                            raise PipelineError(
                                f"{origin} line {row + 1} is longer than {MAX_LINE_BYTES >> 20} MiB "
                                "(a 300-d GloVe line is about 3 kB): this is not GloVe text. Fix: "
                                "point the glove config at a GloVe text file."
                            )
                        buf = np.concatenate([buf, np.empty(len(buf), dtype=np.uint8)])
                        carry = filled
                        continue
                if cut:
                    parts = _split(buf, cut, row, threads)
                    fast_lines += sum(pool.map(lambda p: _parse_part(p, dim, out, origin, kernel), parts))
                    pieces.extend(p.words for p in parts)
                    row = parts[-1].row
                if got == 0:
                    break
                buf[: filled - cut] = buf[cut:filled].copy()
                carry = filled - cut
        digest, hashed = hashing.result() if hashing else (None, size)
    if row != rows or hashed != size:
        raise PipelineError(
            f"{origin} changed while it was read ({rows} lines counted, {row} parsed): read it "
            "again once nothing writes to it."
        )
    if rows == 0:
        raise PipelineError(f"{origin} holds no vectors: point the glove config at a GloVe text file.")
    words = _decode_words(b"".join(pieces), origin)
    check_unique(words, origin)
    return GloveText(out, words, digest, size, fast_lines)


def _split(buf: np.ndarray, cut: int, row: int, threads: int) -> list[_Part]:
    """Split buf[:cut] (whole lines) into up to `threads` parts at line ends, each knowing its first row."""
    bounds = [0]
    for k in range(1, threads):
        newline = _next_newline(buf, max(bounds[-1], cut * k // threads), cut)
        if newline < 0:
            break
        bounds.append(newline + 1)
    bounds.append(cut)
    parts = []
    for begin, end in zip(bounds, bounds[1:]):
        if end > begin:
            parts.append(_Part(buf, begin, end, row))
            if end < cut:  # the next part's first row (the last part's end row comes from the parser)
                row += int(np.count_nonzero(buf[begin:end] == 10))
    return parts


def _next_newline(buf: np.ndarray, pos: int, end: int) -> int:
    """Index of the first "\\n" in buf[pos:end], or -1; looks at a few KiB first (lines are short)."""
    window = 4096
    while pos < end:
        hits = np.flatnonzero(buf[pos : min(end, pos + window)] == 10)
        if len(hits):
            return pos + int(hits[0])
        pos, window = pos + window, window * 4
    return -1


def _last_newline(buf: np.ndarray, end: int) -> int:
    """Index of the last "\\n" in buf[:end], or -1."""
    window = 4096
    while end > 0:
        start = max(0, end - window)
        hits = np.flatnonzero(buf[start:end] == 10)
        if len(hits):
            return start + int(hits[-1])
        end, window = start, window * 4
    return -1


def _decode_words(data: bytes, origin: str) -> list[str]:
    try:
        return data.decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError as exc:
        number = data.count(b"\n", 0, exc.start) + 1
        raise PipelineError(
            f"{origin} line {number} is not UTF-8 ({exc.reason} in the word): GloVe files are "
            "UTF-8; convert the file (e.g. iconv -t UTF-8) or replace it."
        ) from None


def check_unique(words: list[str], origin: str) -> None:
    """Raise a PipelineError listing repeated words (with their line numbers) if any word occurs twice."""
    if len(set(words)) == len(words):
        return
    first: dict[str, int] = {}
    repeats: list[tuple[str, int, int]] = []
    for number, word in enumerate(words, start=1):
        if word in first:
            repeats.append((word, first[word], number))
        else:
            first[word] = number
    shown = ", ".join(f"lines {a} and {b}" for _, a, b in repeats[:5])  # errors never quote what a file holds
    raise PipelineError(
        f"{origin} repeats {len(repeats)} word(s): {shown}{' ...' if len(repeats) > 5 else ''}. "
        "A word must have one vector. Fix: deduplicate the file (keep the first occurrence)."
    )
