"""A self-contained HTML report: the notebook's narrative with the figures, the numbers, and an explorer.

The page (templates/report.html.j2, Jinja2) opens from disk with no server and no network: figures are
embedded as data URIs, the explorer is an inline SVG driven by a few lines of JavaScript. Opening it with
`#selftest` moves the slider programmatically and writes the outcome into the page title (used by the
browser test). Its text follows the encoding: a sinusoid's constant norms and offset-only distances are
claimed for `encoding=sinusoidal` only, never for a learned (random) table.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from pipeline.core.metrics import METRIC_DOCS


# Files beside this module that it reads; pipeline.dvcyaml lists them as code deps of the stages importing it.
PACKAGE_DATA = ("templates/report.html.j2",)
TEMPLATES = (Path(__file__).parent / PACKAGE_DATA[0]).parent
TEMPLATE = Path(PACKAGE_DATA[0]).name


def fmt(value: Any) -> str:
    """A number as the tables show it (4 significant digits); None (undefined metric) as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def best_rotation(m: np.ndarray) -> np.ndarray:
    """The orthogonal 2 x 2 Q (a rotation, or a reflection when det m < 0) nearest to m (2, 2): the polar factor
    U V^T of its SVD, in closed form (no LAPACK: the same bits on every machine). With s = sign(det m) and
    cof(m) = [[d, -c], [-b, a]], m + s cof(m) = (s1 + s2) Q for m = [[a, b], [c, d]]; identity for m = 0."""
    (a, b), (c, d) = m
    s = -1.0 if a * d - b * c < 0 else 1.0
    q = np.array([[a + s * d, b - s * c], [c - s * b, d + s * a]])
    norm = np.sqrt((q * q).sum() / 2.0)  # (s1 + s2)
    return q / norm if norm > 0 else np.eye(2)


def aligned_frames(frames: np.ndarray) -> np.ndarray:
    """(m, n, 2) projections along the ratio grid -> centred, unit-RMS, each rotated/reflected onto the
    previous one (orthogonal Procrustes, best_rotation) so that the explorer moves words smoothly instead of
    flipping."""
    out = np.empty_like(frames, dtype=np.float64)
    previous = None
    for i, frame in enumerate(frames):
        x = frame - frame.mean(axis=0)
        x = x / (np.sqrt((x * x).sum(axis=1).mean()) or 1.0)
        if previous is not None:
            m = np.array([[(x[:, r] * previous[:, c]).sum() for c in range(2)] for r in range(2)])  # x^T previous
            q = best_rotation(m)
            x = x[:, :1] * q[0] + x[:, 1:] * q[1]  # x @ q
        out[i] = previous = x
    return out


# RoPE's and ALiBi's figures (pipeline.figures.relative.FIGURES; restated: that module imports matplotlib),
# the families' (pipeline.figures.families) and the crossover study's (pipeline.figures.study)
RELATIVE_FIGURES = ("rope_relative_scores.png", "rope_decay.png", "alibi_bias.png", "alibi_penalty.png")
FAMILY_FIGURES = ("pe_properties.png", "rope_scalings.png", "minilm_probing.png")
STUDY_FIGURE = "crossover_study.png"

# Embedded images (base64 bytes) stay under this, so that the page stays under 5 MB for any number of sentences:
# figures are scaled down to fit (`embedded_figures`), not left out
IMAGE_BUDGET = 4_200_000
# How a figure is made smaller, step by step: a 256-colour palette (matplotlib's figures hold few colours: about a
# third of the bytes, the same pixels to the eye), then that at 3/4 and at 1/2 of the width and height
SHRINK_STEPS = (None, 1.0, 0.75, 0.5)


def figure_path(layout, name: str) -> Path:
    """Where the figure `name` (e.g. pe_heatmap.png) is: in the folder of the stage that draws it (names are unique
    across layout.figure_dirs); the figures stage's when none has it."""
    for folder in layout.figure_dirs:
        if (folder / name).exists():
            return folder / name
    return layout.sweep_figures_dir / name


def tutorial_figures(layout) -> list[str]:
    """The tutorials' figures there are, by name: the examples (the encode stage's) and the masks of the texts (the
    figures stage's)."""
    folders = (layout.tutorial_figures_dir, layout.sweep_figures_dir)
    return sorted(p.name for folder in folders for p in folder.glob("tutorial*.png"))


def shrunk_png(path: Path, step: int, cache: Path | None = None) -> bytes:
    """The PNG at `path` made smaller by SHRINK_STEPS[step] (0: as it is). Deterministic: the palette from Pillow's
    fast octree without dithering, the scaling by Lanczos, the PNG written without timestamps: the same bytes from
    the same file on every run. cache: a figure cache folder (pipeline.figures.cache) that keeps each result by the
    file's bytes, the step and the code: a figure that an edit did not change is shrunk once, for speed
    (docs/benchmarks.md#the-pipeline)."""
    import hashlib
    import tempfile

    from PIL import Image

    from pipeline.figures import cache as figure_cache

    scale = SHRINK_STEPS[step]
    if scale is None:
        return path.read_bytes()
    code = f"{step}\0{figure_cache.fingerprint()}\0".encode() + Path(__file__).read_bytes()
    entry = cache / f"shrunk-{hashlib.sha256(code + path.read_bytes()).hexdigest()[:32]}" if cache else None
    with tempfile.TemporaryDirectory() as tmp:
        out = {"shrunk.png": Path(tmp) / "shrunk.png"}
        if entry is None or not figure_cache.restore(entry, out)[0]:
            with Image.open(path) as image:
                image = image.convert("RGB")
                if scale != 1.0:
                    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
                    image = image.resize(size, Image.Resampling.LANCZOS)
                palette = image.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
            palette.save(out["shrunk.png"], "PNG")
            if entry is not None:
                figure_cache.store(entry, out, None)
        return out["shrunk.png"].read_bytes()


def embedded_figures(layout, shown: int, pair_labels: Sequence[str], budget: int = IMAGE_BUDGET) -> dict[str, str]:
    """The figures the page embeds, {name: data URI}: every figure there is (the encoding's and the summary, the
    tutorials', per shown sentence its panels and ratio sweep, RoPE's, ALiBi's and the families', the crossover
    study's, the notebook's single projections), each at full size while all fit in `budget` (base64 bytes), else
    the largest made smaller first (`shrunk_png`, SHRINK_STEPS) until they fit. Only when every one is at its
    smallest and they still do not fit are the last in this order left out (the page says so)."""
    import base64

    per_sentence = [f"{kind}_s{s}.png" for s in range(shown) for kind in ("panels", "ratio_sweep")]
    projections = [f"projection_s{s}_{label}.png" for s in range(shown) for label in pair_labels]
    order = [
        "pe_heatmap.png",
        "pe_norms.png",
        "pe_offset_distance.png",
        "pe_dot_product.png",
        "pe_distance.png",
        "crossover_all_sentences.png",
        *tutorial_figures(layout),
        *per_sentence,
        *RELATIVE_FIGURES,
        *FAMILY_FIGURES,
        STUDY_FIGURE,
        *projections,
    ]
    paths = {name: figure_path(layout, name) for name in dict.fromkeys(order)}
    data = {name: path.read_bytes() for name, path in paths.items() if path.exists()}
    steps = dict.fromkeys(data, 0)

    def used() -> int:
        return sum(4 * -(-len(png) // 3) for png in data.values())

    while data and used() > budget:
        shrinkable = [name for name in data if steps[name] < len(SHRINK_STEPS) - 1]
        if not shrinkable:
            data.pop(next(name for name in reversed(order) if name in data))  # the least important goes
            continue
        name = max(shrinkable, key=lambda n: (len(data[n]), -order.index(n)))  # the largest first
        steps[name] += 1
        data[name] = shrunk_png(paths[name], steps[name], layout.figure_cache)
    return {name: "data:image/png;base64," + base64.b64encode(png).decode("ascii") for name, png in data.items()}


def explorer_data(
    meta: dict, arrays, groups: Sequence[Sequence[str]], columns: Sequence[dict[str, np.ndarray]]
) -> dict:
    """What the slider needs: per shown sentence the aligned frames, words, positions, group colours and metrics.

    columns: per shown sentence its ratio-sweep table (reports/plots/ratio_sweep.csv's rows of it, as {column: (m,)})."""
    from pipeline.figures.labels import group_colours, short_text

    sentences = []
    for s, (sentence, column) in enumerate(zip(meta["sentences"], columns)):
        frames = aligned_frames(arrays[f"s{s}_grid_coords"])
        colours, _ = group_colours(sentence["words"], groups)
        sentences.append(
            {
                "text": short_text(sentence["words"]),
                "words": sentence["words"],
                "positions": sentence["positions"],
                "colours": colours,
                "frames": np.round(frames, 4).tolist(),
                "knn_semantic": np.round(column["knn_semantic_hd"], 4).tolist(),
                "knn_positional": np.round(column["knn_positional_hd"], 4).tolist(),
                "disparity": np.round(column["pca_disparity"], 4).tolist(),
            }
        )
    return {"ratios": [float(r) for r in meta["ratios"]], "sentences": sentences}


def metric_doc(key: str) -> str:
    """The METRIC_DOCS entry of a metric key with or without its _hd / _2d suffix."""
    return METRIC_DOCS.get(key.rsplit("_", 1)[0], METRIC_DOCS.get(key, ""))


def encoding_facts(cfg: Any, enc: dict) -> dict:
    """What the page says about the encoding: its kind, and for a learned table the typical row norm of its draw
    (U(-s, s): s sqrt(d/3); N(0, s^2): s sqrt(d), root mean square)."""
    d = enc["d_model"]
    facts = {"sinusoidal": cfg.name == "sinusoidal", "cfg": cfg}
    if not facts["sinusoidal"]:
        facts["typical_norm"] = cfg.scale * math.sqrt(d / 3 if cfg.init == "uniform" else d)
        facts["typical_norm_formula"] = "scale · sqrt(d/3)" if cfg.init == "uniform" else "scale · sqrt(d)"
    return facts


def shown_config(params: Any, meta: dict) -> str:
    """The settings the page depends on, as JSON: the encoding, the semantic groups, the weight pairs and the ratio
    grid (the rest of the configuration is in params.yaml and in the MLflow run's params)."""
    ratios = meta["ratios"]
    shown = {
        "encoding": dataclasses.asdict(params.encoding),
        "metrics": {"groups": params.metrics.groups},
        "sweep": {
            "pairs": [pair["title"] for pair in meta["pairs"]],
            "ratios": {"min": ratios[0], "max": ratios[-1], "points": len(ratios)},
        },
    }
    return json.dumps(shown, indent=1)


# How the report names RoPE's base-scaling variants (keys of relative.json's rope.decay_bound).
RELATIVE_VARIANTS = {
    "base": "base",
    "larger_base": "a larger base",
    "ntk": "NTK-aware scaling",
    "pi": "position interpolation",
}


# What each property of reports/properties.json means (pipeline.core.pe_properties), one line each for the report.
PROPERTY_DOCS = {
    "wang_monotonicity": "Wang et al. monotonicity: rank correlation of the proximity with minus the distance, per row "
    "and side (1: it falls strictly as positions move apart)",
    "wang_translation_invariance": "Wang et al. translation invariance: the share of the proximity's variance that "
    "the offset i - j explains (1: a function of i - j only)",
    "wang_symmetry": "Wang et al. symmetry: the symmetric part's share of the centred proximity's energy (1: i with j "
    "as j with i)",
    "chen_locality": "Chen et al. locality: mean over rows of sum_j A[i, j] 2^-|i - j| of the attention prior "
    "(1: all weight on the query's own position; about 0.046 at N = 64: uniform)",
    "chen_symmetry": "Chen et al. symmetry: 1 - the mean of |A[i, i-k] - A[i, i+k]|, min-max scaled per row as the "
    "authors' code does (1: keys before and after the query weigh the same; it counts asymmetric offsets relative to "
    "each row's worst, not how asymmetric a row is)",
}


def cell_text(cell: dict) -> str:
    """A cell of reports/properties.json as the report's table shows it."""
    if cell["value"] is None:
        return "undefined"
    text = fmt(cell["value"])
    spread = cell.get("standard_error", cell.get("std"))  # over samples: the mean's; over heads: the heads' sd
    if spread is not None:
        text += f" \u00b1 {fmt(spread)}"
    return text + (" (by construction)" if cell.get("by_construction") else "")


@functools.cache
def _environment():
    """One Jinja environment per process: it compiles the template once (a multirun renders a report per job)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt
    env.filters["cell"] = cell_text
    # |tojson escapes <, >, & and ' (a sentence cannot close the script), and script_json U+2028/2029 (line ends in
    # older JavaScript); compact, in the order given
    env.policies["json.dumps_function"] = script_json
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "separators": (",", ":")}
    return env


def script_json(obj: Any, **kwargs: Any) -> str:
    """JSON for a <script> block: Jinja's |tojson then replaces <, >, & and ' with \\u003c etc.; this adds
    U+2028 and U+2029, so that no sentence text can end the script or a JavaScript string."""
    return json.dumps(obj, **kwargs).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def build_report(
    params: Any,
    metrics: dict,
    meta: dict,
    arrays,
    columns: Sequence[dict[str, np.ndarray]],
    layout,
    relative: dict | None = None,
    properties: dict | None = None,
    study: dict | None = None,
) -> str:
    """The report as one HTML string.

    params: reads encoding, metrics.groups, figures.name, tokenizer.glove_splits and texts.file only; metrics: reports/metrics.json; meta, arrays:
    data/sweep's projections.json and projections.npz; columns: the ratio-sweep tables of the sentences shown (the first
    figures.max_sentences; the page stays small for any number of sentences); layout: the Layout whose figures (its
    figures_dir's stage folders) the page shows; relative: reports/relative.json (RoPE and ALiBi; None leaves their
    section out); properties: reports/properties.json (every family's property scores; None leaves its section out);
    study: reports/study/crossover.json (r* of many random sentences per GloVe dimension; None leaves it out).

    Longer than 60 lines because it gathers every section of the report's template context in one place.
    """
    from markupsafe import Markup

    from pipeline.figures.labels import short_text

    embedded = embedded_figures(layout, len(columns), [pair["label"] for pair in meta["pairs"]])
    figure_set = params.figures.name

    def figure(name: str, alt: str) -> Markup:
        path = figure_path(layout, name)
        if not path.exists():  # not in this run's figure set (figures.name)
            return Markup("<p><i>{}: {} not drawn (figures={})</i></p>").format(alt, name, figure_set)
        if name not in embedded:
            return Markup("<p><i>{}: {} (not embedded, to keep this page under 5 MB)</i></p>").format(
                alt, path.relative_to(layout.base).as_posix()
            )
        # data-figure: the file it shows (an MLflow run's copy of the page links that artifact instead)
        return Markup('<figure><img alt="{}" data-figure="{}" src="{}"></figure>').format(alt, name, embedded[name])

    sentences = [{**sentence, "title": short_text(sentence["words"])} for sentence in meta["sentences"][: len(columns)]]
    pair_keys = list(next(iter(metrics["sweep"]["s0"].values()))) if sentences else []
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            enc=metrics["encoding"],
            oov={**metrics["embedding"], "words": meta["oov_words"], "glove_splits": params.tokenizer.glove_splits},
            glove=meta["glove"],
            encoding=encoding_facts(params.encoding, metrics["encoding"]),
            metrics=metrics,
            meta=meta,
            sentences=sentences,
            total=len(meta["sentences"]),
            pair_keys=pair_keys,
            metric_doc=metric_doc,
            docs=METRIC_DOCS,
            figure=figure,
            tutorials=tutorial_figures(layout),
            data=explorer_data(meta, arrays, params.metrics.groups, columns),
            config=shown_config(params, meta),
            last=len(meta["ratios"]) - 1,
            relative=relative,
            variants=RELATIVE_VARIANTS,
            properties=properties,
            property_docs=PROPERTY_DOCS,
            study=study,
            texts_file=params.texts.file,
        )
    )
