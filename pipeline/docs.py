"""`python -m pipeline.docs`: write the generated blocks of the pages in docs/ (the stage table, the metric list).

    python -m pipeline.docs            # rewrite every generated block of docs/*.md
    python -m pipeline.docs --check    # exit 1 naming each page whose blocks differ; writes nothing

A generated block lies between `<!-- generated: NAME (python -m pipeline.docs) -->` and `<!-- end generated -->`
in a docs page. Its text comes from the one declaration of its fact: `stages` from STAGES in pipeline/stages/registry.py,
`metrics` from METRIC_DOCS in pipeline/core/metrics.py. tests/test_docs.py fails when a committed page differs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pipeline.base.paths import checkout_root

BLOCK = re.compile(r"(<!-- generated: (\w+) \(python -m pipeline\.docs\) -->\n)(.*?)(<!-- end generated -->)", re.S)


def stage_table() -> str:
    """The stage table: one row per stage of the registry, in DAG order."""
    from pipeline.stages.registry import STAGES

    rows = [f"| `{stage.name}` | {stage.summary} |" for stage in STAGES]
    return "\n".join(["| stage | what it does |", "|---|---|", *rows]) + "\n"


def metric_list() -> str:
    """The sweep's metrics and their one-line meanings, as the report shows them."""
    from pipeline.core.metrics import METRIC_DOCS

    return "".join(f"- `{name}`: {doc}.\n" for name, doc in METRIC_DOCS.items())


GENERATORS = {"stages": stage_table, "metrics": metric_list}


def render(text: str, page: str = "page") -> str:
    """The page's text with every generated block replaced by its generator's output; an unknown name is an error."""

    def fill(match: re.Match) -> str:
        name = match.group(2)
        if name not in GENERATORS:
            raise SystemExit(f"error: {page} names the unknown generated block {name!r}; known: {sorted(GENERATORS)}")
        return match.group(1) + GENERATORS[name]() + match.group(4)

    return BLOCK.sub(fill, text)


def pages(root: Path) -> list[Path]:
    """The docs pages that hold at least one generated block."""
    return [p for p in sorted((root / "docs").rglob("*.md")) if BLOCK.search(p.read_text(encoding="utf-8"))]


def main(argv: list[str] | None = None) -> int:
    from pipeline.dvcyaml import check_flag

    check = check_flag(sys.argv[1:] if argv is None else argv, "python -m pipeline.docs", __doc__)
    root = checkout_root()
    stale = []
    for path in pages(root):
        text = path.read_text(encoding="utf-8")
        new = render(text, str(path.relative_to(root)))
        if new == text:
            continue
        stale.append(path.relative_to(root).as_posix())
        if not check:
            from pipeline.base.files import write_text

            write_text(path, new)
    if check and stale:
        print(
            f"{', '.join(stale)}: generated blocks differ: run `python -m pipeline.docs` and commit.", file=sys.stderr
        )
        return 1
    print(f"{'rewrote ' + ', '.join(stale) if stale else 'docs/: every generated block is up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
