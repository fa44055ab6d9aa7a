"""Stage report: reports/report.html, one self-contained page with the narrative, figures, numbers and explorer
(pipeline.outputs.report).

Reads params: metrics.groups, encoding, figures.name and figures.max_sentences (the sentences with sections of
their own; the figures it names as not drawn); files: data/sweep/ (projections), metrics.json, the ratio-sweep CSVs,
the figures.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.base.paths import Layout

log = logging.getLogger("pipeline")


def run(params: dict, layout: Layout, root: Path) -> Path:
    import numpy as np

    from pipeline.base.files import read_columns, read_json, write_text
    from pipeline.outputs.figure_plan import shown_sentences
    from pipeline.outputs.report import build_report

    meta = read_json(layout.projections_meta)
    shown = shown_sentences(len(meta["sentences"]), params["figures"]["max_sentences"])
    columns = [read_columns(layout.ratio_sweep_csv(s)) for s in range(shown)]
    with np.load(layout.projections) as arrays:
        page = build_report(
            params,
            read_json(layout.metrics),
            meta,
            arrays,
            columns,
            layout.figures_dir,
            relative=read_json(layout.relative_metrics),
        )
    write_text(layout.report_html, page)
    log.info("report: %s (%d kB)", layout.report_html, len(page) // 1024)
    return layout.report_html


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("report", run)
