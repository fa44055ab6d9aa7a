"""Every relative link of README.md and docs/ reaches a file of the checkout, and every anchor a heading of its page,
slugged as GitHub slugs headings: the text as rendered (no backticks, emphasis or link targets), lower-cased,
punctuation dropped, spaces turned into '-', a repeated heading suffixed -1, -2, ..."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from conftest import REPO

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code spans blanked."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, re.sub(r"`[^`]*`", "``", line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"[`*]|(?<!\w)_|_(?!\w)", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    text = path.read_text(encoding="utf-8")
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    return [(n, m.group(1)) for n, line in prose_lines(path.read_text(encoding="utf-8")) for m in LINK.finditer(line)]


def test_slug_follows_githubs_rules():
    assert slug("Figures (`reports/figures/`)") == "figures-reportsfigures"
    assert slug("Metrics (`reports/metrics.json`, `reports/headline.json`)") == (
        "metrics-reportsmetricsjson-reportsheadlinejson"
    )
    assert slug("Relative positions: RoPE and ALiBi") == "relative-positions-rope-and-alibi"
    assert slug("The GPU check (`python -m benchmarks.gpu`)") == "the-gpu-check-python--m-benchmarksgpu"
    assert slug("snake_case and **bold**") == "snake_case-and-bold"


def test_anchors_number_repeated_headings(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A\n## Notes\n```\n## Not a heading\n```\n## Notes\n", encoding="utf-8")
    assert anchors(page) == {"a", "notes", "notes-1"}


def test_there_are_links_to_check():
    assert len(markdown_files()) >= 2
    assert sum(len(links(p)) for p in markdown_files()) >= 20


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_and_anchors_resolve(page):
    broken = []
    for number, target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... : not a file of the checkout
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(file_part)).resolve() if file_part else page
        where = f"{page.relative_to(REPO)}:{number}: {target}"
        if not dest.exists() or REPO.resolve() not in [dest, *dest.parents]:
            broken.append(f"{where}: no such file in the checkout")
        elif anchor and (dest.suffix != ".md" or dest.is_dir() or unquote(anchor) not in anchors(dest)):
            broken.append(f"{where}: no heading with that anchor in {dest.relative_to(REPO.resolve())}")
    assert not broken, "broken links:\n" + "\n".join(broken)
