"""Every value that reaches a file is finite and means something: JSON is written strictly, and the config's bounds
(pipeline.config.schema: MAX_MAGNITUDE, the RoPE bounds) are enough for the stages to compute finite numbers at
their edges (issue 33: `relative.rope.scale=1e300` wrote Infinity into reports/relative.json, `sweep.w2=-1e308`
ended in LinAlgError's traceback)."""

from __future__ import annotations

import json
import math

import pytest

from pipeline.base.files import read_json, write_json

from conftest import params_for, run_stages, typed


def _finite(tree) -> bool:
    if isinstance(tree, dict):
        return all(_finite(v) for v in tree.values())
    if isinstance(tree, list):
        return all(_finite(v) for v in tree)
    return not isinstance(tree, float) or math.isfinite(tree)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_write_json_refuses_a_value_json_cannot_hold_naming_its_key(tmp_path, bad):
    path = tmp_path / "out.json"
    path.write_text("{}\n")
    with pytest.raises(ValueError, match=r"out\.json: decay_bound\.ntk\.d\[1\] is not a finite number"):
        write_json(path, {"decay_bound": {"ntk": {"d": [1.0, bad]}}})
    assert path.read_text() == "{}\n"  # the file as it was
    write_json(path, {"a": [1.5, None]})
    assert json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in strict JSON")) == {
        "a": [1.5, None]
    }


def test_the_rope_bounds_give_finite_diagnostics(tmp_path):
    """At the edges the schema allows (scale 1e6, bases up to 1e12, d_head 4, a 1e9-token context), RoPE's and the
    families' numbers are finite: strict JSON writes them."""
    import torch

    from pipeline.base.paths import Layout
    from pipeline.stages.encode import family_properties, relative_diagnostics

    cfg = typed(
        params_for(
            "relative.rope.d_head=4",
            "relative.rope.scale=1e6",
            "relative.rope.base=1e11",
            "relative.rope.larger_base=1e12",
            "relative.scaling.original_context=1000000000",
            "relative.scaling.llama3_factor=1e6",
        )
    )
    layout = Layout(tmp_path)
    relative = relative_diagnostics(cfg.relative, layout, torch.device("cpu"))
    properties = family_properties(cfg.relative, layout)
    assert _finite(relative) and _finite(properties)
    assert _finite(read_json(layout.relative_metrics)) and _finite(read_json(layout.properties_metrics))


@pytest.mark.parametrize(
    "overrides",
    [
        ("sweep.w1=[1e100,-1e100,1e-100,0]", "sweep.w2=[1e-100,1e100,-1e100,1]"),
        ("sweep.ratios.min=1e-100", "sweep.ratios.max=1e100"),
    ],
)
def test_the_weight_bounds_give_finite_metrics(tmp_path, small_store, overrides):
    """Weights and ratios at the magnitudes the schema allows: the sweep's PCA and metrics stay finite (no overflow
    to infinity, no underflow to a cloud of identical points)."""
    layout = run_stages(params_for(*overrides, "figures=none"), tmp_path, small_store, upto="sweep")
    metrics = read_json(layout.metrics)
    assert metrics["crossover"] and _finite(metrics)
