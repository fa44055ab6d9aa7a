"""A self-contained HTML report: the notebook's narrative with the figures, the numbers, and an explorer.

The page opens from disk with no server and no network: figures are embedded as data URIs, the
explorer is an inline SVG driven by a few lines of JavaScript. Opening it with `#selftest` moves the
slider programmatically and writes the outcome into the page title (used by the browser test).
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from pipeline.metrics import METRIC_DOCS


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></figure>'


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def aligned_frames(frames: np.ndarray) -> np.ndarray:
    """(m, n, 2) projections along the ratio grid -> centred, unit-RMS, each rotated/reflected onto the
    previous one (orthogonal Procrustes) so that the explorer moves words smoothly instead of flipping."""
    out = np.empty_like(frames, dtype=np.float64)
    previous = None
    for i, frame in enumerate(frames):
        x = frame - frame.mean(axis=0)
        x = x / (np.sqrt((x ** 2).sum(axis=1).mean()) or 1.0)
        if previous is not None:
            u, _, vt = np.linalg.svd(x.T @ previous)
            x = x @ (u @ vt)
        out[i] = previous = x
    return out


def explorer_data(meta: dict, arrays, groups: Sequence[Sequence[str]], column: dict[str, np.ndarray]) -> dict:
    """What the slider needs: per sentence the aligned frames, words, positions, group colours and metrics."""
    from matplotlib.colors import to_hex

    from pipeline.figures import group_colours

    sentences = []
    for s, sentence in enumerate(meta["sentences"]):
        frames = aligned_frames(arrays[f"s{s}_grid_coords"])
        colours, _ = group_colours(sentence["words"], groups)
        sentences.append({
            "text": sentence["text"],
            "words": sentence["words"],
            "positions": sentence["positions"],
            "colours": [to_hex(c) for c in colours],
            "frames": np.round(frames, 4).tolist(),
            "knn_semantic": np.round(column[f"s{s}_knn_semantic_hd"], 4).tolist(),
            "knn_positional": np.round(column[f"s{s}_knn_positional_hd"], 4).tolist(),
            "disparity": np.round(column[f"s{s}_pca_disparity"], 4).tolist(),
        })
    return {"ratios": [float(r) for r in meta["ratios"]], "sentences": sentences}


def metric_tables(metrics: dict, meta: dict) -> str:
    parts = []
    for s, sentence in enumerate(meta["sentences"]):
        rows = metrics["sweep"][f"s{s}"]
        keys = list(next(iter(rows.values())))
        head = "".join(f'<th title="{html.escape(METRIC_DOCS.get(k.rsplit("_", 1)[0], METRIC_DOCS.get(k, "")))}">'
                       f"{html.escape(k)}</th>" for k in keys)
        body = "".join(
            f"<tr><th>{html.escape(pair['title'] if not pair['baseline'] else 'embeddings only (W1=1, W2=0)')}</th>"
            + "".join(f"<td>{_fmt(rows[pair['label']][k])}</td>" for k in keys) + "</tr>"
            for pair in meta["pairs"])
        parts.append(f"<h3>Sentence {s + 1}: <q>{html.escape(sentence['text'])}</q></h3>"
                     f'<div class="scroll"><table><tr><th>weights</th>{head}</tr>{body}</table></div>')
    return "".join(parts)


def build_report(params: dict, metrics: dict, meta: dict, arrays, column: dict[str, np.ndarray],
                 figures_dir: Path) -> str:
    """The report as one HTML string."""
    enc = metrics["encoding"]
    d, n = enc["d_model"], enc["max_len"]
    fig = lambda name, alt: _img(figures_dir / name, alt) if (figures_dir / name).exists() else ""  # noqa: E731
    sentences = meta["sentences"]
    crossover_rows = "".join(
        f"<tr><th>sentence {s + 1}</th><td>{_fmt(metrics['crossover'][f's{s}']['r_star'])}</td>"
        f"<td>{_fmt(metrics['transformer_scaling'][f's{s}']['knn_semantic_hd'])}</td>"
        f"<td>{_fmt(metrics['transformer_scaling'][f's{s}']['knn_positional_hd'])}</td>"
        f"<td>{'meaning' if metrics['transformer_scaling'][f's{s}']['semantic_dominates'] else 'position'}</td></tr>"
        for s in range(len(sentences)))
    probes = "".join(f"<li>||PE({k[1:]})|| = {v:.7f}</li>" for k, v in enc.get("norm", {}).items())
    probes += "".join(f"<li>||PE({k.split('_')[0][1:]}) - PE({k.split('_')[1][1:]})|| = {v:.7f}</li>"
                      for k, v in enc.get("distance", {}).items())
    docs = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in METRIC_DOCS.items())
    pair_figures = "".join(
        fig(f"projection_s{s}_{pair['label']}.png", f"{pair['title']}, sentence {s + 1}")
        for pair in meta["pairs"] for s in range(len(sentences)))
    data = json.dumps(explorer_data(meta, arrays, params["metrics"]["groups"], column), separators=(",", ":"))
    params_yaml = html.escape(json.dumps(params, indent=1))
    return TEMPLATE.format(
        d=d, n=n, base=f"{params['encoding']['base']:g}", glove=html.escape(params["glove"]["name"]),
        norm_expected=f"{enc['norm_expected']:.7f}", norm_dev=f"{enc['norm_max_abs_dev']:.2e}",
        spread=f"{enc['offset_distance_max_spread']:.2e}", probes=probes,
        oov=metrics["embedding"]["oov_count"],
        fig_pe=fig("pe_heatmap.png", "positional encoding matrix"),
        fig_norms=fig("pe_norms.png", "norm per position"),
        fig_offsets=fig("pe_offset_distance.png", "distance against offset"),
        fig_dot=fig("pe_dot_product.png", "dot products"), fig_dist=fig("pe_distance.png", "distances"),
        fig_panels="".join(fig(f"panels_s{s}.png", f"all weight pairs, sentence {s + 1}") for s in range(len(sentences))),
        fig_ratios="".join(fig(f"ratio_sweep_s{s}.png", f"metrics against r, sentence {s + 1}") for s in range(len(sentences))),
        pair_figures=pair_figures,
        fig_tutorials="".join(_img(path, path.stem.replace("_", " "))
                              for path in sorted(figures_dir.glob("tutorial*.png"))), crossover_rows=crossover_rows, r_scaling=f"{metrics['transformer_scaling']['r']:.4g}",
        tables=metric_tables(metrics, meta), docs=docs, data=data, params=params_yaml,
        options="".join(f'<option value="{s}">sentence {s + 1}: {html.escape(x["text"][:60])}</option>'
                        for s, x in enumerate(sentences)),
        last=len(meta["ratios"]) - 1,
    )


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Positional encoding meets word embeddings (d={d})</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }}
img {{ max-width: 100%; }} figure {{ margin: 1em 0; }}
table {{ border-collapse: collapse; font-size: 0.85em; }} td, th {{ border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }}
th {{ background: #f4f4f4; }} .scroll {{ overflow-x: auto; }}
#explorer svg {{ border: 1px solid #ccc; background: #fff; }} code, pre {{ background: #f6f6f6; }}
.controls {{ display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }}
#slider {{ width: 420px; }}
body.explorer-only > *:not(#explorer):not(script) {{ display: none; }}
</style></head><body>
<h1>Positional encoding meets word embeddings</h1>
<p>GloVe <b>{glove}</b> (d = {d}); sinusoidal encoding over {n} positions, base {base}. This page is generated by the
pipeline's <code>report</code> stage from <code>reports/metrics.json</code> and the figures; it needs no network.</p>

<h2>1. The positional encoding matrix</h2>
<p>PE(pos, 2i) = sin(pos / base<sup>2i/d</sup>), PE(pos, 2i+1) = cos(pos / base<sup>2i/d</sup>): every position gets a
unique vector, low dimensions oscillate fast, high dimensions slowly.</p>
{fig_pe}

<h2>2. Two properties, measured</h2>
<p><b>Every vector has the same norm sqrt(d/2) = {norm_expected}</b>: the largest deviation over all positions is
{norm_dev}. <b>The distance between two positions depends only on their separation k</b>: over every position p and
every offset k, the spread of ||PE(p) - PE(p+k)|| is at most {spread}.</p>
<ul>{probes}</ul>
{fig_norms}{fig_offsets}

<h2>3. Comparing positions: dot products and distances</h2>
<p>The dot-product matrix peaks on the diagonal; the distance matrix is zero there and grows with |a - b|. Both depend
only on a - b.</p>
{fig_dot}{fig_dist}

<h2>4. Word embeddings plus positional encodings</h2>
<p>Each sentence's words are embedded (OOV words: {oov}), the encoding of their position is added with weights
W1 and W2, and the result is projected to 2-D with PCA. Below, every weight pair side by side on one shared basis,
coloured by semantic group and numbered by position.</p>
{fig_panels}
<details><summary>Every projection on its own PCA basis (the notebook's figures)</summary>{pair_figures}</details>

<h2>5. When does position overtake meaning?</h2>
<p>All metrics depend only on r = W2 / W1. The crossover r* is where the k nearest neighbours of each word start to be
its neighbours in position rather than in meaning. The Transformer paper scales embeddings by sqrt(d), i.e. r =
{r_scaling}.</p>
<table><tr><th></th><th>r*</th><th>semantic k-NN overlap at r = {r_scaling}</th><th>positional k-NN overlap at r = {r_scaling}</th><th>dominant at the paper's scaling</th></tr>{crossover_rows}</table>
{fig_ratios}

<h2>6. Explore</h2>
<div id="explorer">
<div class="controls">
<label>sentence <select id="sentence">{options}</select></label>
<label>r = W2/W1 <input id="slider" type="range" min="0" max="{last}" step="1" value="0"></label>
<span id="readout"></span>
</div>
<svg id="plot" width="640" height="480" viewBox="-1.6 -1.3 3.2 2.6" role="img" aria-label="projected words"></svg>
</div>

<h2>7. Metric tables</h2>
{tables}
<h3>What each metric means</h3>
<ul>{docs}</ul>
<p>Suffix <code>_hd</code>: computed in the d-dimensional space; <code>_2d</code>: in the 2-D projection.</p>

<h2>8. The tutorials' examples</h2>
<p>From the tutorials beside the notebook: random (trainable, seeded) vs fixed sinusoidal position embeddings of
tutorial 001, the random embedding plus PE of tutorial 002, and the padding and look-ahead masks and PE columns of
tutorial 004 (<code>encoding=learned</code> runs the whole sweep with a learned table instead of the sinusoid).</p>
{fig_tutorials}

<h2>9. Configuration</h2>
<details><summary>params</summary><pre>{params}</pre></details>
<pre id="console-errors" hidden></pre>

<script>
(function () {{
  var errors = document.getElementById("console-errors");
  function record(message) {{ errors.hidden = false; errors.textContent += message + "\\n"; }}
  window.addEventListener("error", function (e) {{ record("error: " + (e.message || e.target && e.target.src)); }}, true);
  var originalError = console.error;
  console.error = function () {{ record("console.error: " + Array.prototype.join.call(arguments, " ")); originalError.apply(console, arguments); }};

  var DATA = {data};
  var svgNS = "http://www.w3.org/2000/svg";
  var plot = document.getElementById("plot"), slider = document.getElementById("slider");
  var select = document.getElementById("sentence"), readout = document.getElementById("readout");

  function draw() {{
    var s = DATA.sentences[+select.value], i = +slider.value, frame = s.frames[i];
    while (plot.firstChild) plot.removeChild(plot.firstChild);
    for (var j = 0; j + 1 < frame.length; j++) {{
      var line = document.createElementNS(svgNS, "line");
      line.setAttribute("x1", frame[j][0]); line.setAttribute("y1", -frame[j][1]);
      line.setAttribute("x2", frame[j + 1][0]); line.setAttribute("y2", -frame[j + 1][1]);
      line.setAttribute("stroke", "#bbb"); line.setAttribute("stroke-width", "0.008");
      plot.appendChild(line);
    }}
    frame.forEach(function (p, j) {{
      var dot = document.createElementNS(svgNS, "circle");
      dot.setAttribute("cx", p[0]); dot.setAttribute("cy", -p[1]); dot.setAttribute("r", "0.035");
      dot.setAttribute("fill", s.colours[j]); dot.setAttribute("class", "word");
      plot.appendChild(dot);
      var label = document.createElementNS(svgNS, "text");
      label.setAttribute("x", p[0] + 0.045); label.setAttribute("y", -p[1] - 0.03);
      label.setAttribute("font-size", "0.09"); label.textContent = s.words[j] + " (" + s.positions[j] + ")";
      plot.appendChild(label);
    }});
    readout.textContent = "r = " + DATA.ratios[i].toPrecision(3) + "  |  semantic k-NN " + s.knn_semantic[i] +
      "  positional k-NN " + s.knn_positional[i] + "  disparity " + s.disparity[i];
  }}
  slider.addEventListener("input", draw);
  select.addEventListener("change", draw);
  draw();

  if (location.hash === "#selftest") {{
    var before = Array.prototype.map.call(plot.querySelectorAll("circle.word"), function (c) {{ return c.getAttribute("cx") + "," + c.getAttribute("cy"); }}).join(";");
    slider.value = slider.max;
    slider.dispatchEvent(new Event("input"));
    var after = Array.prototype.map.call(plot.querySelectorAll("circle.word"), function (c) {{ return c.getAttribute("cx") + "," + c.getAttribute("cy"); }}).join(";");
    var moved = before !== after && plot.querySelectorAll("circle.word").length === DATA.sentences[0].words.length;
    document.title = (moved && errors.hidden ? "selftest:ok" : "selftest:fail") + " " + readout.textContent;
    document.body.classList.add("explorer-only");  // what a screenshot of the self-test shows
  }}
}})();
</script>
</body></html>
"""
