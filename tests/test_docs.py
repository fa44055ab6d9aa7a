"""The generated blocks of docs/ (the stage table, the metric list) are what `python -m pipeline.docs` writes from
their one declaration, and the command's --check tells a stale page from a current one without writing."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO


def test_committed_pages_are_the_generators_output():
    from pipeline import docs

    pages = docs.pages(REPO)
    names = {m.group(2) for p in pages for m in docs.BLOCK.finditer(p.read_text(encoding="utf-8"))}
    assert names == set(docs.GENERATORS), f"every generator fills a block of some docs page; found {names}"
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert docs.render(text) == text, f"{page.relative_to(REPO)} differs: run `python -m pipeline.docs`"


def test_blocks_live_on_their_pages():
    from pipeline import docs

    for page, name in (("pipeline.md", "stages"), ("science.md", "metrics")):
        text = (REPO / "docs" / page).read_text(encoding="utf-8")
        assert any(m.group(2) == name for m in docs.BLOCK.finditer(text)), f"docs/{page} lacks the {name} block"


def test_render_fills_a_block_and_refuses_an_unknown_one():
    from pipeline import docs
    from pipeline.core.metrics import METRIC_DOCS

    empty = "# T\n\n<!-- generated: metrics (python -m pipeline.docs) -->\nstale\n<!-- end generated -->\ntail\n"
    filled = docs.render(empty)
    assert filled.startswith("# T\n\n<!-- generated: metrics") and filled.endswith("<!-- end generated -->\ntail\n")
    assert "stale" not in filled and all(f"- `{name}`: " in filled for name in METRIC_DOCS)
    assert docs.render(filled) == filled
    with pytest.raises(SystemExit, match="unknown generated block 'nope'"):
        docs.render(empty.replace("metrics", "nope"), "x.md")


def test_check_names_a_stale_page_and_writes_nothing(tmp_path):
    from conftest import run

    (tmp_path / "docs").mkdir()
    stale = "<!-- generated: stages (python -m pipeline.docs) -->\nold\n<!-- end generated -->\n"
    page = tmp_path / "docs" / "p.md"
    page.write_text(stale, encoding="utf-8")
    result = run(
        [sys.executable, "-m", "pipeline.docs", "--check"],
        tmp_path,
        check=False,
        PYTHONPATH=str(REPO),
        PE_PROJECT_ROOT=str(tmp_path),
    )
    assert result.returncode == 1 and "docs/p.md" in result.stderr and page.read_text(encoding="utf-8") == stale
    assert (
        run(
            [sys.executable, "-m", "pipeline.docs"], tmp_path, PYTHONPATH=str(REPO), PE_PROJECT_ROOT=str(tmp_path)
        ).returncode
        == 0
    )
    assert "| `tokenize` |" in page.read_text(encoding="utf-8")
    result = run(
        [sys.executable, "-m", "pipeline.docs", "--check"],
        tmp_path,
        PYTHONPATH=str(REPO),
        PE_PROJECT_ROOT=str(tmp_path),
    )
    assert result.returncode == 0
