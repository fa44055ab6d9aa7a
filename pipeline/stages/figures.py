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
    import numpy as np

    from pipeline import figures as fig
    from pipeline.files import read_columns, read_json

    cfg = params["figures"]
    dpi, max_size, cmap = cfg["dpi"], cfg["max_heatmap_size"], cfg["cmap"]
    encoded = read_json(layout.encode_dir / "encode.json")
    d, n = encoded["d_model"], encoded["max_len"]
    base = params["encoding"]["base"]
    sinusoidal = encoded.get("kind", "sinusoidal") == "sinusoidal"
    tag = f"max_len={n}, d={d}" + (f", base={base:g}" if sinusoidal else f", seed={params['encoding'].get('seed')}")
    written: list[str] = []
    batch = fig.Batch()

    def path(name: str) -> Path:
        written.append(name)
        return out / name

    # averaged here, so that a worker gets at most max_size x max_size values, whatever max_len is
    pe, pe_cell = fig.block_average(np.load(layout.encode_dir / "pe.npy", mmap_mode="r"), max_size)
    mats = read_json(layout.encode_dir / "matrices.json")  # layout; dot/distance.npy hold block x block means
    batch.add(fig.heatmap, pe, path("pe_heatmap.png"), cell=pe_cell,
                title=f"{mats['encoding'].capitalize()} positional encoding PE(pos, i) ({tag}"
                + (f", {mats['layout']} layout)" if mats["layout"] else ")"),
                xlabel={"interleaved": "encoding dimension i (even: sin, odd: cos)", None: "encoding dimension i",
                        "concatenated": f"encoding dimension i (i < {(d + 1) // 2}: sin, then cos)"}[mats["layout"]],
                ylabel="position pos", cbar="PE value",
                dpi=dpi, max_size=max_size, cmap=cmap, centered=True)
    batch.add(fig.heatmap, np.load(layout.encode_dir / "dot.npy", mmap_mode="r"), path("pe_dot_product.png"),
                title=f"Dot products PE(a) . PE(b) ({tag})\nlargest on the diagonal, d/2 = {d / 2:g}",
                xlabel="position b", ylabel="position a", cbar="PE(a) . PE(b)", dpi=dpi, max_size=max_size,
                cmap=cmap, square=True, centered=True, cell=mats["block"])
    batch.add(fig.heatmap, np.load(layout.encode_dir / "distance.npy", mmap_mode="r"), path("pe_distance.png"),
                title=f"Euclidean distances ||PE(a) - PE(b)|| ({tag})\nzero on the diagonal, growing with |a - b|",
                xlabel="position b", ylabel="position a", cbar="||PE(a) - PE(b)||", dpi=dpi, max_size=max_size,
                cmap=cmap, square=True, cell=mats["block"])

    norms = read_columns(layout.plots_dir / "pe_norms.csv")
    batch.add(fig.norms_plot, norms["position"], norms["norm"], encoded["norm_expected"], path("pe_norms.png"),
                   title=(f"Property 1: every position has the same norm sqrt(d/2) ({tag})" if sinusoidal else
                          f"Norm per position of the learned (random) table, against the sinusoid's sqrt(d/2) ({tag})"),
                   dpi=dpi)
    offsets = read_columns(layout.plots_dir / "offset_distance.csv")
    k, lo, hi, closed = (offsets[c] for c in ("k", "min_over_p", "max_over_p", "closed_form"))
    batch.add(fig.offset_distance_plot, k, lo, hi, closed, path("pe_offset_distance.png"),
                             title=(f"Property 2: ||PE(p) - PE(p+k)|| depends only on k ({tag})" if sinusoidal else
                                    f"||PE(p) - PE(p+k)|| of the learned table: it depends on p ({tag})"), dpi=dpi)

    meta = read_json(layout.sweep_dir / "projections.json")
    arrays = np.load(layout.sweep_dir / "projections.npz")
    for s, sentence in enumerate(meta["sentences"]):
        coords, ratio = arrays[f"s{s}_coords"], arrays[f"s{s}_explained_variance_ratio"]
        for j, pair in enumerate(meta["pairs"]):
            what = "Word embeddings only (W1=1, W2=0)" if pair["baseline"] else f"{pair['title']}: W1 * embedding + W2 * PE"
            title = f"{what}, sentence {s + 1}, d={d}, PCA to 2-D\n" + fig.wrap(f"\"{sentence['text']}\"")
            batch.add(fig.projection, coords[j], sentence["words"], sentence["positions"],
                           path(f"projection_s{s}_{pair['label']}.png"), title=title, explained=ratio[j], dpi=dpi)

    render_comparisons(params, layout, meta, d, path, batch)

    def tutorials() -> list[str]:  # drawn here (they use torch) while the workers draw the rest
        from pipeline.tutorial_figures import render_tutorial_figures

        return render_tutorial_figures(params, out, root=layout.base, tokens=read_json(layout.tokens))

    written += batch.run(cfg["workers"], meanwhile=tutorials)
    return written


def render_comparisons(params: dict, layout: Layout, meta: dict, d: int, path, batch) -> None:
    """Per sentence: every weight pair side by side on a shared PCA basis, and the metrics against r."""
    import math

    import numpy as np

    from pipeline import figures as fig
    from pipeline.files import read_columns, read_json

    cfg = params["figures"]
    embeddings = np.load(layout.encode_dir / "embeddings.npy").astype(np.float64)
    pe = np.load(layout.encode_dir / "pe.npy", mmap_mode="r")
    tokens = read_json(layout.tokens)
    metrics = read_json(layout.metrics)
    column = read_columns(layout.plots_dir / "ratio_sweep.csv")
    marks = {"Transformer scaling W1=sqrt(d), W2=1": 1 / math.sqrt(d)}
    for pair in meta["pairs"]:
        r = pair["w2"] / pair["w1"] if pair["w1"] > 0 else 0.0
        if r > 0 and all(not math.isclose(r, seen) for seen in marks.values()):
            marks[pair["title"]] = r
    for s, sentence in enumerate(meta["sentences"]):
        e = embeddings[tokens["ids"][s]]
        p = np.asarray(pe[sentence["positions"]], dtype=np.float64)
        xs = [pair["w1"] * e + pair["w2"] * p for pair in meta["pairs"]]
        panels = fig.shared_projection(xs)
        titles = ["embeddings only" if pair["baseline"] else pair["title"] for pair in meta["pairs"]]
        batch.add(fig.projection_panels, panels, titles, sentence["words"], sentence["positions"], params["metrics"]["groups"],
                              path(f"panels_s{s}.png"), arrows=cfg["arrows"], dpi=cfg["dpi"],
                              title=f"Sentence {s + 1}, d={d}: W1 * embedding + W2 * PE on one shared PCA basis\n"
                                    + fig.wrap(f"\"{sentence['text']}\"", 110))
        curves = {
            "k-NN overlap with word embeddings (d-dim)": column[f"s{s}_knn_semantic_hd"],
            "k-NN overlap with positional encodings (d-dim)": column[f"s{s}_knn_positional_hd"],
            "trustworthiness of the 2-D picture": column[f"s{s}_trustworthiness_2d"],
            "rank correlation of distance with |i - j|": column[f"s{s}_positional_rank_corr_hd"],
            "Procrustes disparity vs embeddings-only picture": column[f"s{s}_pca_disparity"],
        }
        batch.add(fig.ratio_curves, column["r"], curves, path(f"ratio_sweep_s{s}.png"), r_star=metrics["crossover"][f"s{s}"]["r_star"],
                         marks=marks, dpi=cfg["dpi"],
                         title=f"Sentence {s + 1}, d={d}: when does position overtake meaning?\n"
                               + fig.wrap(f"\"{sentence['text']}\"", 110))


if __name__ == "__main__":
    from pipeline.stages._cli import stage_main

    stage_main("figures", run)
