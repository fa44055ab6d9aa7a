"""Stage report: reports/report.html, one self-contained page with the narrative, figures, numbers and explorer."""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.paths import Layout

log = logging.getLogger("pipeline")


def run(params: dict, layout: Layout, root: Path) -> Path:
    import numpy as np

    from pipeline.files import read_columns, read_json, write_text
    from pipeline.report import build_report

    meta = read_json(layout.sweep_dir / "projections.json")
    with np.load(layout.sweep_dir / "projections.npz") as arrays:
        page = build_report(params, read_json(layout.metrics), meta, dict(arrays),
                            read_columns(layout.plots_dir / "ratio_sweep.csv"), layout.figures_dir)
    target = layout.reports / "report.html"
    write_text(target, page)
    log.info("report: %s (%d kB)", target, len(page) // 1024)
    return target


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("report", run)
