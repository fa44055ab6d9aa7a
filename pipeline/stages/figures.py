"""Stage figures: every figure of the notebook, labelled, plus the two PE property plots (reports/figures/)."""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.paths import Layout

log = logging.getLogger("pipeline")


def run(params: dict, layout: Layout, root: Path) -> list[str]:
    """Render into a fresh folder swapped in at the end, so that no figure of an older config lingers."""
    from pipeline.files import replace_dir

    names: list[str] = []
    replace_dir(layout.figures_dir, lambda tmp: names.extend(render(params, layout, tmp)))
    log.info("figures: %d PNG files in %s", len(names), layout.figures_dir)
    return names


def render(params: dict, layout: Layout, out: Path) -> list[str]:
    import csv

    import numpy as np

    from pipeline import figures as fig
    from pipeline.files import read_json

    cfg = params["figures"]
    dpi, max_size, cmap = cfg["dpi"], cfg["max_heatmap_size"], cfg["cmap"]
    encoded = read_json(layout.encode_dir / "encode.json")
    d, n = encoded["d_model"], encoded["max_len"]
    base = params["encoding"]["base"]
    tag = f"max_len={n}, d={d}, base={base:g}"
    written: list[str] = []

    def path(name: str) -> Path:
        written.append(name)
        return out / name

    pe = np.load(layout.encode_dir / "pe.npy", mmap_mode="r")
    fig.heatmap(pe, path("pe_heatmap.png"), title=f"Sinusoidal positional encoding PE(pos, i) ({tag})",
                xlabel="encoding dimension i (even: sin, odd: cos)", ylabel="position pos", cbar="PE value",
                dpi=dpi, max_size=max_size, cmap=cmap, centered=True)
    fig.heatmap(np.load(layout.encode_dir / "dot.npy", mmap_mode="r"), path("pe_dot_product.png"),
                title=f"Dot products PE(a) . PE(b) ({tag})\nlargest on the diagonal, d/2 = {d / 2:g}",
                xlabel="position b", ylabel="position a", cbar="PE(a) . PE(b)", dpi=dpi, max_size=max_size,
                cmap=cmap, square=True, centered=True)
    fig.heatmap(np.load(layout.encode_dir / "distance.npy", mmap_mode="r"), path("pe_distance.png"),
                title=f"Euclidean distances ||PE(a) - PE(b)|| ({tag})\nzero on the diagonal, growing with |a - b|",
                xlabel="position b", ylabel="position a", cbar="||PE(a) - PE(b)||", dpi=dpi, max_size=max_size,
                cmap=cmap, square=True)

    with open(layout.plots_dir / "pe_norms.csv") as handle:
        rows = list(csv.DictReader(handle))
    fig.norms_plot(np.array([float(r["norm"]) for r in rows]), encoded["norm_expected"], path("pe_norms.png"),
                   title=f"Property 1: every position has the same norm sqrt(d/2) ({tag})", dpi=dpi)
    with open(layout.plots_dir / "offset_distance.csv") as handle:
        rows = list(csv.DictReader(handle))
    k, lo, hi, closed = (np.array([float(r[c]) for r in rows]) for c in ("k", "min_over_p", "max_over_p", "closed_form"))
    fig.offset_distance_plot(k, lo, hi, closed, path("pe_offset_distance.png"),
                             title=f"Property 2: ||PE(p) - PE(p+k)|| depends only on k ({tag})", dpi=dpi)

    meta = read_json(layout.sweep_dir / "projections.json")
    arrays = np.load(layout.sweep_dir / "projections.npz")
    for s, sentence in enumerate(meta["sentences"]):
        coords, ratio = arrays[f"s{s}_coords"], arrays[f"s{s}_explained_variance_ratio"]
        for j, pair in enumerate(meta["pairs"]):
            what = "Word embeddings only (W1=1, W2=0)" if pair["baseline"] else f"{pair['title']}: W1 * embedding + W2 * PE"
            title = f"{what}, sentence {s + 1}, d={d}, PCA to 2-D\n" + fig.wrap(f"\"{sentence['text']}\"")
            fig.projection(coords[j], sentence["words"], sentence["positions"],
                           path(f"projection_s{s}_{pair['label']}.png"), title=title, explained=ratio[j], dpi=dpi)
    return written


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("figures", run)
