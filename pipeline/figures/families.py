"""The figures of every position-encoding family side by side (reports/figures/relative/), drawn from
reports/properties.json and data/families/ (stage relative, pipeline.core.families):

    pe_properties.png   every family x the literature's properties (Wang et al. 2021, Chen et al. 2023) at one d and
                        one temperature rule; cells that hold by construction hatched, undefined ones blank
    rope_scalings.png   per RoPE scaling: RoFormer's bound, the exact expected score with k = q and the spread of
                        independent q, k (Barbero et al.), and each pair's wavelength
    minilm_probing.png  all-MiniLM-L6-v2 (with the optional extra `.[models]`): its trained table's proximity, layer
                        0's attention under identical word probing, and the properties of every head
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.figures.drawing import colour_scale, integer_ticks, log10_values, log_axis, save
from pipeline.figures.labels import wrap

PROPERTY_NAMES = {  # column titles
    "wang_monotonicity": "Wang\nmonotonicity",
    "wang_translation_invariance": "Wang\ntransl. invariance",
    "wang_symmetry": "Wang\nsymmetry",
    "chen_locality": "Chen\nlocality",
    "chen_symmetry": "Chen\nsymmetry",
}


def queue_property_figures(layout, cfg, path, batch) -> None:
    """Queue rope_scalings.png, pe_properties.png and (when its data is there) minilm_probing.png on `batch`
    (pipeline.figures.batch.Batch); cfg: the `figures` config; path(name): where a figure goes."""
    from pipeline.base.files import read_json
    from pipeline.figures.relative import load_arrays

    summary = read_json(layout.properties_metrics)
    batch.add(
        rope_scalings,
        load_arrays(layout.scaling_arrays),
        summary["rope_scalings"],
        path("rope_scalings.png"),
        dpi=cfg.dpi,
    )
    batch.add(
        properties_heatmap,
        summary["families"],
        path("pe_properties.png"),
        positions=summary["positions"],
        d=summary["d"],
        sequential=cfg.sequential_cmap,
        dpi=cfg.dpi,
    )
    if "minilm" in summary:
        batch.add(
            minilm_probing,
            load_arrays(layout.minilm_arrays),
            summary["minilm"],
            [summary["families"]["minilm_l6_layer0"], summary["families"]["minilm_l6_learned"]],
            path("minilm_probing.png"),
            cmap=cfg.cmap,
            sequential=cfg.sequential_cmap,
            dpi=cfg.dpi,
        )


def readable_on(image, value: float) -> str:
    """Black on a light cell of `image` (an AxesImage; and on a blank, undefined one), white on a dark one: by the
    luminance of the cell's colour, whatever the colour map."""
    if np.isnan(value):
        return "black"
    r, g, b, _ = image.cmap(image.norm(value))
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def cell_text(cell: dict) -> str:
    """A cell of reports/properties.json as written on the heatmap."""
    if cell["value"] is None:
        return "undefined"
    if cell.get("by_construction"):
        return f"{cell['value']:.3g} (by constr.)"
    spread = cell.get("standard_error", cell.get("std"))  # over samples: the mean's; over heads: the heads'
    return f"{cell['value']:.3f}" + ("" if spread is None else f" \u00b1 {spread:.3f}")


def row_label(row: dict, d: int) -> str:
    """The family's label, with its d where that is not the table's."""
    return row["label"] if row["d"] in (None, d) else f"{row['label']} (d = {row['d']})"


def properties_heatmap(families: dict, path: Path, *, positions: int, d: int, sequential: str, dpi: int) -> None:
    """families: key -> row of reports/properties.json; one row per family, one column per property. A measured
    score is coloured; one that holds by construction is hatched grey (it says nothing about the family beyond its
    definition); an undefined one is blank."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    names = list(PROPERTY_NAMES)
    rows = list(families.values())
    measured = np.array(
        [
            [np.nan if r[n]["value"] is None or r[n].get("by_construction") else r[n]["value"] for n in names]
            for r in rows
        ]
    )
    figure, ax = plt.subplots(figsize=(13, 0.42 * len(rows) + 3.2), layout="constrained")
    cmap = plt.get_cmap(sequential).with_extremes(bad="white")
    low = min(0.0, float(np.nanmin(measured))) if np.isfinite(measured).any() else 0.0
    image = ax.imshow(measured, cmap=cmap, vmin=low, vmax=1.0, aspect="auto")
    for (i, j), value in np.ndenumerate(measured):
        cell = rows[i][names[j]]
        if cell.get("by_construction"):
            ax.add_patch(
                Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.88", edgecolor="0.6", hatch="///", linewidth=0)
            )
        ax.text(j, i, cell_text(cell), ha="center", va="center", fontsize=8.5, color=readable_on(image, value))
    ax.set_xticks(range(len(names)), [PROPERTY_NAMES[n] for n in names])
    ax.set_yticks(range(len(rows)), [row_label(r, d) for r in rows])
    figure.colorbar(image, ax=ax, label="measured score (1: the property holds exactly)", shrink=0.8)
    ax.set_title(
        wrap(
            f"Every family over N = {positions} positions at d = {d}: Wang et al. (2021) on the proximity P, Chen et "
            f"al. (2023) on the prior A = softmax(P / sqrt(d)) (ALiBi, MiniLM layer 0: softmax of their logits). "
            "Hatched: 1 by the family's definition; undefined: blank; \u00b1: standard error over seeded pairs",
            110,
        ),
        fontsize=10,
    )
    save(figure, path, dpi)


def rope_scalings(arrays: dict, summary: dict, path: Path, *, dpi: int) -> None:
    """Left: RoFormer's decay bound per scaling; middle: the exact expected score with k = q and the spread +-
    a^2 sqrt(d) of the score of independent Gaussian q, k (mean 0: no decay in expectation, Barbero et al.); right:
    each pair's wavelength against the original and the extended context.

    Longer than 60 lines because it draws one figure of three panels top to bottom."""
    import matplotlib.pyplot as plt

    keys = [k for k in summary if isinstance(summary[k], dict)]
    d = summary["d"]
    distance = arrays["distance"].astype(np.float64)
    figure, (bound, score, wave) = plt.subplots(1, 3, figsize=(20, 6.2), layout="constrained")
    positive = distance >= 1
    log_distance = log10_values(distance[positive])
    spreads: dict[float, list[str]] = {}  # independent q, k: +- a^2 sqrt(d), shared by every scaling of one a
    for i, key in enumerate(keys):
        colour = f"C{i}"
        bound.plot(log_distance, arrays[f"{key}_bound"][positive], color=colour, label=key)
        score.plot(log_distance, arrays[f"{key}_self"][positive], color=colour, label=f"{key}: k = q")
        spreads.setdefault(float(summary[key]["independent_std"]), []).append(key)
        wavelength = arrays[f"{key}_wavelength"]
        wave.plot(np.arange(len(wavelength)), log10_values(wavelength), color=colour, label=key)
    for j, (std, names) in enumerate(sorted(spreads.items())):  # one band per distinct spread, not one per scaling
        shade = str(0.55 - 0.2 * (j % 2))
        score.axhspan(-std, std, color=shade, alpha=0.12, linewidth=0, zorder=0)
        for edge in (std, -std):
            score.axhline(edge, color=shade, linestyle=":", linewidth=0.9, zorder=0)
        shared = "every scaling" if len(names) == len(keys) else ", ".join(names)
        score.plot([], [], color=shade, linestyle=":", label=f"independent q, k: +-{std:.3g} ({shared})")
    for value, label in ((summary["original_context"], "original context"), (summary["extended_context"], "extended")):
        wave.axhline(log10_values(value), color="black", linestyle="--", linewidth=0.8)
        wave.text(0, log10_values(value), f" {label} {value:g}", va="bottom", fontsize=9)
    for ax in (bound, score):
        log_axis(ax.xaxis)
    log_axis(wave.yaxis)
    bound.set(
        xlabel="distance m - n (log)",
        ylabel="relative upper bound (1/(d/2)) sum_j |S_j|",
        title="RoFormer's decay bound (a worst case)",
    )
    score.set(
        xlabel="distance m - n (log)",
        ylabel="score a^2 q . R(m - n) k",
        title=wrap(
            "k = q: exact expectation 2 a^2 sum_i cos(delta theta_i) (solid); independent q, k: mean 0 +- a^2 sqrt(d) "
            "(the shaded band, one per attention factor a), no decay (Barbero et al.)",
            75,
        ),
    )
    long = summary.get("longrope", {})
    wave.set(
        xlabel="pair i",
        ylabel="wavelength 2 pi / theta_i (positions, log)",
        title=wrap(
            "Pairs below a line complete a rotation within that context"
            + (
                f" (longrope: its model's {long['original_context']:,} -> {long['extended_context']:,})" if long else ""
            ),
            60,
        ),
    )
    for ax in (bound, score, wave):
        ax.grid(True, which="both", alpha=0.25)
    bound.legend(fontsize=8)
    wave.legend(fontsize=8)
    score.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=2)  # below: the curves fill it
    figure.suptitle(f"RoPE scalings, d = {d}: bound, exact expectation and wavelengths")
    save(figure, path, dpi)


def minilm_probing(
    arrays: dict, summary: dict, rows: list, path: Path, *, cmap: str, sequential: str, dpi: int
) -> None:
    """arrays: data/families/minilm.npz (table_proximity (N, N), head_attention (H, N, N)); summary: reports/
    properties.json's `minilm`; rows: its family rows minilm_l6_layer0 (the heads' mean) and minilm_l6_learned. Left:
    the trained table's T T^T; middle: layer 0's attention under identical word probing, the mean over heads; right:
    every head's properties, their mean and the table's (a score that holds by construction: "by constr.").

    Longer than 60 lines because it draws one figure top to bottom, a sequence of matplotlib calls."""
    import matplotlib.pyplot as plt

    table, attention = arrays["table_proximity"], arrays["head_attention"]
    n = table.shape[0]
    figure, (left, middle, right) = plt.subplots(
        1, 3, figsize=(20, 7), layout="constrained", gridspec_kw={"width_ratios": [1, 1, 1.15]}
    )
    # position 0 ([CLS]'s slot in training) has a norm several times the others': the colour scale spans the other
    # positions' products, and position 0's own, above it, is written in the title
    rest = table[1:, 1:]
    scale = colour_scale(rest, cmap, sequential)
    shown = left.imshow(np.clip(table, scale["vmin"], scale["vmax"]), origin="upper", interpolation="nearest", **scale)
    figure.colorbar(shown, ax=left, label="T(i) . T(j) (clipped to positions >= 1)", shrink=0.8)
    left.set(
        xlabel="key position j",
        ylabel="query position i",
        title=wrap(f"Trained position table T T^T, N = {n}; |T(0)|^2 = {table[0, 0]:.3g}, off the scale", 55),
    )
    mean = attention.mean(axis=0)
    shown = middle.imshow(mean, origin="upper", interpolation="nearest", cmap=sequential)
    figure.colorbar(shown, ax=middle, label="attention weight", shrink=0.8)
    middle.set(
        xlabel="key position j",
        ylabel="query position i",
        title=wrap(f"Layer 0, one word at every position: attention, mean of {len(attention)} heads", 50),
    )
    for ax in (left, middle):
        integer_ticks(ax.xaxis, ax.yaxis)
    names = list(PROPERTY_NAMES)
    heads = summary["per_head"]
    labels = [*heads, "mean of heads", "table"]

    def measured(row: dict) -> list[float]:
        return [np.nan if row[n]["value"] is None or row[n].get("by_construction") else row[n]["value"] for n in names]

    values = np.array([[heads[h][n] for n in names] for h in heads] + [measured(rows[0]), measured(rows[1])])
    scale = plt.get_cmap(sequential).with_extremes(bad="white")
    grid = right.imshow(values, cmap=scale, vmin=min(-1.0, float(np.nanmin(values))), vmax=1.0, aspect="auto")
    for (i, j), v in np.ndenumerate(values):
        text = "by constr." if np.isnan(v) else f"{v:.2f}"
        right.text(j, i, text, ha="center", va="center", fontsize=8, color=readable_on(grid, v))
    right.set_xticks(range(len(names)), [PROPERTY_NAMES[n] for n in names], fontsize=8)
    right.set_yticks(range(len(labels)), labels)
    right.axhline(len(heads) - 0.5, color="black", linewidth=1)
    figure.colorbar(grid, ax=right, label="score", shrink=0.8)
    right.set_title(wrap(f"Per head: {len(summary['probe']['words'])} words probed", 50))
    figure.suptitle(
        wrap(
            f"{summary['model']} ({summary['package']}): trained positions and identical word probing (Wang et "
            "al. 2021)",
            120,
        )
    )
    save(figure, path, dpi)
