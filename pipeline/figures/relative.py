"""The figures of RoPE's and ALiBi's diagnostics (reports/figures/relative/), drawn from data/relative/ and
reports/relative.json (stage encode) with the project's honest-figure primitives (pipeline.figures.drawing).

    rope_relative_scores.png  the scores (R_m q) . (R_n k) over (m, n), and against m - n with the closed form
    rope_decay.png            RoFormer's long-term decay bound against the relative distance, per base scaling
    alibi_bias.png            the (L, L) bias of each head (of the first head count)
    alibi_penalty.png         the penalty -m_h k against the distance k, one panel per head count
(the families' figures: pipeline.figures.families).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from pipeline.figures.drawing import colour_scale, integer_ticks, log10_values, log_axis, save
from pipeline.figures.labels import wrap


FIGURES = ("rope_relative_scores.png", "rope_decay.png", "alibi_bias.png", "alibi_penalty.png")
MAX_BIAS_PANELS = 8  # heads drawn in alibi_bias.png (evenly spread over the heads when there are more)


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz file, read into memory (the file is closed)."""
    with np.load(path) as arrays:
        return {key: arrays[key] for key in arrays.files}


def variant_names(decay: dict, scale: float) -> dict[str, str]:
    """Legend text of each base-scaling variant of reports/relative.json's rope.decay_bound."""
    return {
        "base": f"base {decay['base']['base']:g}",
        "larger_base": f"larger base {decay['larger_base']['base']:g}",
        "ntk": f"NTK-aware, s = {scale:g}: base {decay['ntk']['base']:.6g}",
        "pi": f"position interpolation, s = {scale:g}: positions / {scale:g}",
    }


def queue_relative_figures(layout, cfg: Any, path, batch) -> None:
    """Queue the four figures on `batch` (pipeline.figures.batch.Batch), the longest to draw first; cfg: the
    `figures` config; path(name): where a figure goes (and records its name)."""
    from pipeline.base.files import read_json

    summary = read_json(layout.relative_metrics)
    rope, alibi = summary["rope"], summary["alibi"]
    colours = {"cmap": cfg.cmap, "sequential": cfg.sequential_cmap, "dpi": cfg.dpi}
    r, a = load_arrays(layout.rope_arrays), load_arrays(layout.alibi_arrays)
    checks = rope["relative_only"][rope["layout"]]
    tag = f"{rope['layout']}, d = {rope['d_head']}, base {rope['base']:g}"
    first = alibi["heads"][next(iter(alibi["heads"]))]
    count = len(first["slopes"])
    batch.add(
        alibi_bias,
        a[f"bias_h{count}"],
        first["slope_exponents"],
        path("alibi_bias.png"),
        causal=alibi["causal"],
        sequential=cfg.sequential_cmap,
        dpi=cfg.dpi,
    )
    batch.add(
        rope_scores,
        r["scores"],
        r["offsets"],
        r["closed_form"],
        r["spread_float64"],
        r["spread_float32"],
        path("rope_relative_scores.png"),
        tag=tag,
        float32_spread=checks["float32_max_spread"],
        **colours,
    )
    names = variant_names(rope["decay_bound"], rope["scale"])
    batch.add(
        rope_decay,
        r["distance"],
        {names[key]: r[f"bound_{key}"] for key in names},
        path("rope_decay.png"),
        d_head=rope["d_head"],
        at_rest=rope["decay_bound_at_rest"],
        dpi=cfg.dpi,
    )
    batch.add(
        alibi_penalty,
        a["distance"],
        {len(h["slopes"]): a[f"penalty_h{len(h['slopes'])}"] for h in alibi["heads"].values()},
        path("alibi_penalty.png"),
        sequential=cfg.sequential_cmap,
        dpi=cfg.dpi,
    )


def rope_scores(
    scores: np.ndarray,
    offsets: np.ndarray,
    closed: np.ndarray,
    spread64: np.ndarray,
    spread32: np.ndarray,
    path: Path,
    *,
    tag: str,
    float32_spread: float,
    cmap: str,
    sequential: str,
    dpi: int,
) -> None:
    """scores (n, n) over query position m (rows) and key position n (columns); offsets, closed, spread64,
    spread32: (2n - 1,) per m - n: the closed form and the spread over m of the scores (float64, float32).

    Longer than 60 lines because it draws one figure top to bottom, a sequence of matplotlib calls."""
    import matplotlib.pyplot as plt

    n = scores.shape[0]
    figure, (left, right) = plt.subplots(
        1, 2, figsize=(15, 6.4), layout="constrained", gridspec_kw={"width_ratios": [1, 1.25]}
    )
    image = left.imshow(
        scores,
        origin="lower",
        extent=(0, n, 0, n),
        interpolation="nearest",
        **colour_scale(scores, cmap, sequential),
    )
    figure.colorbar(image, ax=left, label="score (R_m q) . (R_n k)")
    left.set(
        xlabel="key position n",
        ylabel="query position m",
        title=wrap("Scores of one random q and k rotated to every position: constant along each diagonal m - n", 60),
    )
    integer_ticks(left.xaxis, left.yaxis)

    index = offsets + (n - 1)  # offset -> diagonal
    m = np.arange(n)
    rows, cols = np.meshgrid(m, m, indexing="ij")
    diag = (rows - cols + n - 1).ravel()
    lo = np.full(2 * n - 1, np.inf)
    hi = np.full(2 * n - 1, -np.inf)
    np.minimum.at(lo, diag, scores.ravel())
    np.maximum.at(hi, diag, scores.ravel())
    right.fill_between(
        offsets,
        lo[index],
        hi[index],
        color="tab:blue",
        alpha=0.4,
        label="min..max over m of the scores with this m - n",
    )
    right.plot(
        offsets, closed, color="black", linewidth=0.9, label="closed form Re sum_i q_i conj(k_i) exp(i (m - n) theta_i)"
    )
    right.set(
        xlabel="offset k = m - n (query position minus key position)",
        ylabel="score",
        title=wrap(
            f"Largest spread over m: {float(spread64.max()):.2g} rotating in float64 (at 12 "
            f"significant digits), {float32_spread:.2g} in float32",
            70,
        ),
    )
    integer_ticks(right.xaxis)
    right.grid(True, alpha=0.3)
    right.legend(loc="lower left", fontsize=9)
    figure.suptitle(f"RoPE ({tag}): q . R(m - n) k depends only on m - n")
    save(figure, path, dpi)


def rope_decay(
    distance: np.ndarray, curves: dict[str, np.ndarray], path: Path, *, d_head: int, at_rest: float, dpi: int
) -> None:
    """RoFormer's relative upper bound (1/(d/2)) sum_j |S_j| against the distance (K,), one curve per variant;
    left: distances up to 256 (the paper's figure 2), right: its envelope over every distance (the largest bound at
    this distance or beyond, which the oscillations never exceed again), log axis."""
    import matplotlib.pyplot as plt

    figure, (near, far) = plt.subplots(1, 2, figsize=(15, 6), layout="constrained")
    styles = ["-", "--", "-.", ":"]
    short = distance <= min(256, int(distance[-1]))
    positive = distance >= 1
    log_distance = log10_values(distance[positive])
    for i, (label, bound) in enumerate(curves.items()):
        near.plot(distance[short], bound[short], linestyle=styles[i % 4], linewidth=1.2, label=label)
        envelope = np.maximum.accumulate(bound[::-1])[::-1]
        far.plot(log_distance, envelope[positive], linestyle=styles[i % 4], linewidth=1.4, label=label)
    ylabel = "relative upper bound (1/(d/2)) sum_j |S_j|"
    near.set(
        xlabel="offset k = m - n (relative distance)",
        ylabel=ylabel,
        title=f"Distances 0..{int(distance[short][-1])} (RoFormer's figure 2); at 0 the bound is {at_rest:g}",
    )
    integer_ticks(near.xaxis)
    log_axis(far.xaxis)
    far.set(
        xlabel="offset k = m - n (relative distance, log scale)",
        ylabel="largest bound at distance >= k (envelope)",
        title=f"Distances 1..{int(distance[-1])}: a larger base and the scalings decay later",
    )
    for ax in (near, far):
        ax.grid(True, which="both", alpha=0.25)
    near.legend(loc="upper right", fontsize=9)
    figure.suptitle(
        f"RoPE long-term decay (RoFormer 3.4.3), d = {d_head}: S_j = sum over k < j of exp(i (m - n) theta_k)"
    )
    save(figure, path, dpi)


def alibi_bias(
    bias: np.ndarray, exponents: Sequence[str], path: Path, *, causal: bool, sequential: str, dpi: int
) -> None:
    """bias (heads, L, L): query position i (rows) by key position j (columns), one panel per head (at most
    MAX_BIAS_PANELS, evenly spread), on one colour scale; masked (-inf) entries are left blank."""
    import matplotlib.pyplot as plt

    heads, L = bias.shape[0], bias.shape[1]
    shown = sorted(set(np.linspace(0, heads - 1, min(heads, MAX_BIAS_PANELS)).round().astype(int).tolist()))
    columns = min(4, len(shown))
    rows = -(-len(shown) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(3.6 * columns + 1.2, 3.4 * rows + 1.0), layout="constrained", squeeze=False
    )
    values = np.where(np.isfinite(bias[shown]), bias[shown], np.nan)
    scale = colour_scale(values, sequential, sequential, centred=False)
    cmap = plt.get_cmap(scale.pop("cmap")).with_extremes(bad="white")
    for ax, h in zip(axes.flat, shown):
        image = ax.imshow(
            values[shown.index(h)],
            origin="upper",
            extent=(-0.5, L - 0.5, L - 0.5, -0.5),
            interpolation="nearest",
            cmap=cmap,
            **scale,
        )
        ax.set_title(f"head {h + 1}: m = 2^({exponents[h]})", fontsize=10)
        ax.set(xlabel="key position j", ylabel="query position i")
        integer_ticks(ax.xaxis, ax.yaxis)
    for ax in axes.flat[len(shown) :]:
        ax.set_visible(False)
    figure.colorbar(image, ax=axes, label="bias added to the score q_i . k_j", shrink=0.8)
    what = "-m (i - j) for j <= i, future keys masked (blank)" if causal else "-m |i - j|"
    figure.suptitle(wrap(f"ALiBi bias of {heads} heads ({len(shown)} shown), L = {L}: {what}", 90))
    save(figure, path, dpi)


def alibi_penalty(
    distance: np.ndarray, penalties: dict[int, np.ndarray], path: Path, *, sequential: str, dpi: int
) -> None:
    """penalties: heads -> (heads, K) -m_h k for distances (K,); one panel per head count, heads coloured in
    order."""
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    figure, axes = plt.subplots(
        1, len(penalties), figsize=(7 * len(penalties) + 1, 5.5), layout="constrained", squeeze=False
    )
    cmap = plt.get_cmap(sequential)
    for ax, (heads, penalty) in zip(axes.flat, penalties.items()):
        norm = Normalize(1, max(heads, 2))
        for h in range(heads):
            ax.plot(distance, penalty[h], color=cmap(norm(h + 1)), linewidth=1.3)
        ax.set(
            xlabel="offset k = i - j (distance from query to key)",
            ylabel="bias -m_h k added to the score",
            title=wrap(
                f"{heads} heads: slopes m_h from {-penalty[:, 1].min():.4g} down to "
                f"{-penalty[:, 1].max():.4g} per position",
                60,
            ),
        )
        integer_ticks(ax.xaxis)
        ax.grid(True, alpha=0.3)
        bar = figure.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="head h")
        integer_ticks(bar.ax.yaxis)
    figure.suptitle("ALiBi: a penalty linear in the distance, one slope per head (geometric slopes)")
    save(figure, path, dpi)
