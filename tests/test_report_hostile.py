"""Hostile text is inert in the report: sentences with HTML/JS, quotes, control characters and right-to-left
overrides are data in the page (checked in headless Chromium: no script of theirs runs, the DOM holds them literally),
and a Content-Security-Policy forbids any network fetch."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from browser import chromium, needs_chromium
from conftest import params_for, run_stages

pytestmark = pytest.mark.slow  # the stages up to the report, every figure drawn

# One token each (the texts are split on spaces; tokenizer.filters="" keeps every character).
HOSTILE = [
    "</script><script>document.title=1337</script>",
    '"><img\u00a0src=x\u00a0onerror=document.title=666>',
    "'\"`${document.title=42}`",
    "<!--<script>",
    "\u2028\u2029line\u2028separators",
    "ctrl\x01\x07\x1b[31m",
    "\u202eevil\u202c",
    "&amp;&lt;",
    "$x^2$",  # mathtext in a figure title or label would render it, or (next word) refuse it
    "$\\frac{1}{$",
]


def hostile_params() -> dict:
    params = params_for("figures.workers=1")
    params["tokenizer"]["filters"] = ""
    params["texts"]["sentences"] = ["king queen " + " ".join(HOSTILE) + " man woman", "dog wolf red green"]
    return params


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory, small_store) -> Path:
    out = tmp_path_factory.mktemp("hostile")
    layout = run_stages(hostile_params(), out, small_store, upto="figures")
    return layout.report_html


def test_hostile_words_reach_the_page_only_as_escaped_data(hostile_report):
    page = hostile_report.read_text(encoding="utf-8")
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 1 and "document.title=1337" in scripts[0]  # inside the one data block, escaped:
    assert "\\u003c/script\\u003e\\u003cscript\\u003edocument.title=1337" in scripts[0]
    assert "<img\u00a0src=x" not in page and "\u2028" not in scripts[0]
    assert page.count("<script>") == 1


def test_hostile_words_survive_as_text_in_json_and_figures(hostile_report):
    """tokens.json and projections.json hold every word literally; the figures were drawn (mathtext off: "$x^2$"
    is text) and their PNG metadata carries no sentence text."""
    import json

    from pipeline.base.paths import Layout

    layout = Layout(hostile_report.parent.parent)
    tokens = json.loads(layout.tokens.read_text(encoding="utf-8"))
    words = set(tokens["word_index"])
    assert {word.lower() for word in HOSTILE} <= words
    meta = json.loads(layout.projections_meta.read_text(encoding="utf-8"))
    assert any(word.lower() in meta["sentences"][0]["words"] for word in HOSTILE)
    pngs = sorted(layout.sweep_figures_dir.glob("panels_s0.png")) + sorted(
        layout.sweep_figures_dir.glob("projection_s0_*.png")
    )
    assert pngs and all(path.stat().st_size > 1000 for path in pngs)


def test_hostile_words_survive_as_text_in_mlflow(hostile_report, private_mlflow_store):
    """Logged to a real MLflow store, the sentences come back from the run's params exactly as written, and the
    logged report keeps them as escaped data (one script block)."""
    import json

    from mlflow.tracking import MlflowClient

    from conftest import REPO
    from pipeline.base.paths import Layout
    from pipeline.outputs.tracking import log_result
    from pipeline.stages.registry import logged_outputs

    layout = Layout(hostile_report.parent.parent)
    params = hostile_params()
    record = log_result(params, layout, REPO, artifacts=logged_outputs())
    client = MlflowClient(private_mlflow_store)
    logged = client.get_run(record["run_id"]).data.params
    assert json.loads(logged["texts.sentences"]) == params["texts"]["sentences"]  # every character, as written
    page = Path(client.download_artifacts(record["run_id"], "report.html", str(layout.base / "dl"))).read_text()
    # MLflow's copy adds one script of ours (figure links); the hostile words stay escaped data, never markup
    assert "</script><script>document.title=1337" not in page and "<img\u00a0src=x" not in page
    assert "\\u003c/script\\u003e\\u003cscript\\u003edocument.title=1337" in page


def test_content_security_policy_forbids_network_fetches(hostile_report):
    page = hostile_report.read_text(encoding="utf-8")
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert csp and page.index(csp.group(0)) < page.index("<script>")
    rules = dict(rule.strip().split(" ", 1) for rule in csp.group(1).split(";"))
    assert rules["default-src"] == "'none'" and rules["base-uri"] == "'none'" and rules["form-action"] == "'none'"
    assert "http" not in csp.group(1) and "*" not in csp.group(1)


@needs_chromium
def test_hostile_words_are_inert_in_chromium(hostile_report, tmp_path):
    """The page's own self-test passes (its script ran, unbroken), no injected script changed the title, no injected
    element exists, and the explorer's labels hold every hostile word literally."""
    dom = chromium("--dump-dom", f"{hostile_report.as_uri()}#selftest", tmp=tmp_path).stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title.startswith("selftest:ok"), title
    assert "1337" not in title and "666" not in title and "42" not in title.split("r = ")[0]
    errors = re.search(r'<pre id="console-errors"([^>]*)>(.*?)</pre>', dom, re.S)
    assert "hidden" in errors.group(1) and errors.group(2).strip() == "", errors.group(2)
    assert not re.search(r"<img[^>]*src=\"x\"", dom) and dom.count("<script>") == 1
    labels = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", dom, re.S)]
    for word in HOSTILE:
        token = word.lower()
        assert any(label.startswith(token + " (") for label in labels), (word, labels)
