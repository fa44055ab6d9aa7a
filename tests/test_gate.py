"""The CI gate fails on drift beyond tolerance and passes otherwise, naming metric, old, new, tolerance."""

from __future__ import annotations

import copy
import json
import re
import sys

import pytest

from conftest import REPO, run
from pipeline.gate import EXACT, Rule, compare, load_rules, rule_for

BASELINE = json.loads((REPO / "reports/metrics.json").read_text())
RULES = load_rules(REPO / ".ci/tolerances.yaml")


def test_unchanged_metrics_pass():
    assert compare(BASELINE, copy.deepcopy(BASELINE), RULES) == []


def test_perturbed_metric_fails_naming_it():
    current = copy.deepcopy(BASELINE)
    old = current["sweep"]["s1"]["w1_1-w2_10"]["pca_disparity"]
    current["sweep"]["s1"]["w1_1-w2_10"]["pca_disparity"] = old + 0.01
    problems = compare(BASELINE, current, RULES)
    assert len(problems) == 1
    line = problems[0]
    assert line.startswith("sweep.s1.w1_1-w2_10.pca_disparity:") and repr(old) in line
    assert repr(old + 0.01) in line and "abs 1e-06" in line and "rel 1e-05" in line


def test_change_within_tolerance_passes():
    current = copy.deepcopy(BASELINE)
    current["sweep"]["s0"]["w1_1-w2_1"]["pca_disparity"] *= 1 + 1e-7
    current["encoding"]["norm_max_abs_dev"] += 1e-8
    assert compare(BASELINE, current, RULES) == []


def test_exact_crossover_is_gated_at_ten_times_its_bisection_tolerance():
    current = copy.deepcopy(BASELINE)
    current["crossover"]["s0"]["r_star"] *= 1 + 2e-9  # a bracket's width: noise
    current["crossover"]["s0"]["switch_points"]["0"]["r"] *= 1 + 2e-9
    assert compare(BASELINE, current, RULES) == []
    current["crossover"]["s0"]["r_star"] *= 1 + 1e-7  # a real move of the switch
    current["crossover"]["s1"]["switch_points"]["0"]["to"] = "meaning"
    current["crossover"]["s1"]["switch_points"]["1"] = {"r": 50.0, "to": "position"}  # one more crossing
    problems = "\n".join(compare(BASELINE, current, RULES))
    assert "crossover.s0.r_star:" in problems and "rel 1e-08" in problems
    assert "crossover.s1.switch_points.0.to: 'position' -> 'meaning'" in problems
    assert "crossover.s1.switch_points.1.r: new metric" in problems


def test_count_metrics_must_not_move():
    current = copy.deepcopy(BASELINE)
    current["embedding"]["oov_count"] += 1
    assert any(p.startswith("embedding.oov_count:") for p in compare(BASELINE, current, RULES))


def test_missing_new_and_null_metrics_fail():
    current = copy.deepcopy(BASELINE)
    del current["encoding"]["norm_max_abs_dev"]
    current["encoding"]["brand_new"] = 1.0
    current["crossover"]["s0"]["r_star"] = None
    problems = "\n".join(compare(BASELINE, current, RULES))
    assert "encoding.norm_max_abs_dev: in the baseline" in problems
    assert "encoding.brand_new: new metric" in problems
    assert "crossover.s0.r_star:" in problems


def test_first_matching_rule_applies_and_unmatched_is_exact():
    rules = [Rule("a.*", 0.5, 0, "loose"), Rule("a.b", 0, 0, "never reached")]
    assert rule_for("a.b", rules).reason == "loose"
    assert rule_for("z", rules) is EXACT
    assert compare({"z": 1.0}, {"z": 1.0 + 1e-15}, rules)


def test_every_committed_metric_has_a_rule():
    """Every name of every gated file (metrics.json, relative.json, study/crossover.json) has its tolerance rule."""
    from pipeline.base.trees import flatten
    from pipeline.gate import gated_files, prefixed

    names = {}
    for prefix, path in gated_files().items():
        names.update(flatten(prefixed(prefix, json.loads((REPO / path).read_text()))))
    assert {"", "relative", "study"} <= set(gated_files())
    assert len(names) > len(flatten(BASELINE))
    unmatched = [name for name in names if rule_for(name, RULES) is EXACT]
    assert unmatched == []


def test_gate_command_against_git_baseline(checkout):
    """In a clone: unchanged -> exit 0; a perturbed reports/metrics.json -> exit 1 with the metric named."""
    ok = run([sys.executable, "-m", "pipeline.gate"], checkout)
    assert "within tolerance" in ok.stdout
    path = checkout / "reports/metrics.json"
    original = path.read_text()
    metrics = json.loads(original)
    metrics["encoding"]["norm_max_abs_dev"] = 0.5
    path.write_text(json.dumps(metrics))
    failed = run([sys.executable, "-m", "pipeline.gate"], checkout, check=False)
    assert failed.returncode == 1
    assert "FAIL encoding.norm_max_abs_dev:" in failed.stdout and "-> 0.5" in failed.stdout
    path.write_text(original)  # metrics.json as committed; relative.json (gated too) drifts
    relative = checkout / "reports/relative.json"
    rel = json.loads(relative.read_text())
    rel["rope"]["decay_bound"]["base"]["d100"] *= 1.001
    relative.write_text(json.dumps(rel))
    drifted = run([sys.executable, "-m", "pipeline.gate"], checkout, check=False)
    assert drifted.returncode == 1
    assert "FAIL relative.rope.decay_bound.base.d100:" in drifted.stdout
    missing = run([sys.executable, "-m", "pipeline.gate", "--baseline", "no-such-rev"], checkout, check=False)
    assert missing.returncode == 2 and "no baseline" in missing.stderr


def test_gate_counts_the_metrics_of_both_sides(tmp_path, capsys):
    """Drift is counted over the metric names of baseline and current together (not "3 of 2 metrics")."""
    from pipeline.gate import main

    baseline, current = tmp_path / "baseline.json", tmp_path / "current.json"
    baseline.write_text(json.dumps({"encoding": {"a": 1.0, "b": 2.0, "c": 3.0}}))
    current.write_text(json.dumps({"encoding": {"a": 1.0, "d": 4.0}}))
    assert main(["--baseline", str(baseline), "--current", str(current)]) == 1
    out = capsys.readouterr().out
    assert "gate: 3 of 4 metrics drifted" in out
    assert out.count("  FAIL encoding.") == 3
    assert main(["--baseline", str(baseline), "--current", str(baseline)]) == 0
    assert "gate: all 3 metrics within tolerance" in capsys.readouterr().out


def test_many_drifted_metrics_print_the_first_few_and_how_to_see_all(tmp_path, capsys):
    """A changed config moves hundreds of metrics (sweep.w2=3: 182): the count, the first SHOWN, and the flag that
    lists them all; --all prints every one."""
    from pipeline.gate import SHOWN, main

    baseline, current = tmp_path / "baseline.json", tmp_path / "current.json"
    baseline.write_text(json.dumps({"encoding": {f"m{i:03d}": 1.0 for i in range(182)}}))
    current.write_text(json.dumps({"encoding": {f"m{i:03d}": 2.0 for i in range(182)}}))
    assert main(["--baseline", str(baseline), "--current", str(current)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"gate: 182 of 182 metrics drifted from the baseline ({baseline}):"
    assert [line.split(":")[0] for line in out[1:-1]] == [f"  FAIL encoding.m{i:03d}" for i in range(SHOWN)]
    assert out[-1] == f"  ... and {182 - SHOWN} more: `python -m pipeline.gate --all` lists every one"
    assert main(["--baseline", str(baseline), "--current", str(current), "--all"]) == 1
    assert capsys.readouterr().out.count("  FAIL ") == 182


def test_help_names_the_command_to_type(capsys):
    from pipeline.gate import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith("usage: python -m pipeline.gate ")


def test_length_statistics_are_gated_at_three_times_their_seed_spread():
    """A statistic over seeds (experiments/length/results/summary.json) may move by 3 x its bucket's std in the
    baseline, and by at least 0.02 where the seeds agreed (std 0); its settings must not move."""
    bucket = {"mean": 0.5, "std": 0.1, "min": 0.4, "max": 0.6}
    agreed = {"mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0}
    baseline = {"length": {"tasks": {"copy": {"alibi": {"token_accuracy": {"21-40": bucket, "1-20": agreed}}}}}}
    baseline["length"]["experiment"] = {"steps": 2000}

    def moved(path: tuple[str, ...], value) -> list[str]:
        current = copy.deepcopy(baseline)
        node = current["length"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return compare(baseline, current, RULES)

    mean = ("tasks", "copy", "alibi", "token_accuracy", "21-40", "mean")
    assert moved(mean, 0.79) == []  # 0.29 < 3 x 0.1
    problems = moved(mean, 0.81)
    assert len(problems) == 1 and "spread 3 x std 0.1" in problems[0]
    assert moved(("tasks", "copy", "alibi", "token_accuracy", "21-40", "max"), 0.85) == []
    assert moved(("tasks", "copy", "alibi", "token_accuracy", "1-20", "mean"), 0.985) == []
    assert len(moved(("tasks", "copy", "alibi", "token_accuracy", "1-20", "mean"), 0.97)) == 1  # beyond 0.02
    assert len(moved(("experiment", "steps"), 1000)) == 1


@pytest.mark.parametrize(
    "text, says",
    [
        ("rules: 5\n", "holds `rules: 5`, not a list of rules"),  # was TypeError's traceback
        ("rules: [5]\n", r"rule 1 \(5\) is not a tolerance rule"),
        ("rules:\n  - {match: 'a.*', abs: x, reason: r}\n", "rule 1 .* is not a tolerance rule"),
        ("rules:\n  - {match: 'a.*', abs: -1, reason: r}\n", "rule 1 .* is not a tolerance rule"),
        ("rules:\n  - {match: 'a.*', abs: 1}\n", "rule 1 .* is not a tolerance rule"),
        ("[unclosed\n", "is not valid YAML"),
        ("just text\n", "holds no `rules:`, not a list of rules"),
    ],
)
def test_a_malformed_tolerances_file_is_one_message_naming_the_rule(tmp_path, capsys, text, says):
    """--tolerances of the wrong shape: exit 2, one `gate: error:` line naming the file and the rule, the fix."""
    from pipeline.gate import main

    metrics, tolerances = tmp_path / "m.json", tmp_path / "tolerances.yaml"
    metrics.write_text(json.dumps({"a": {"b": 1.0}}))
    tolerances.write_text(text)
    assert main(["--baseline", str(metrics), "--current", str(metrics), "--tolerances", str(tolerances)]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"^gate: error: {re.escape(str(tolerances))}.*{says}.*Fix: `rules:` is a list", err), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_documented_way_to_read_every_metric_prints_one_per_line():
    """`dvc metrics show reports/metrics.json` prints a column per metric (one line of thousands of characters); the
    docs name `dvc metrics diff HEAD --all --targets reports/metrics.json`: a metric per line, narrow."""
    command = "dvc metrics diff HEAD --all --targets reports/metrics.json"
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    texts = [" ".join(page.read_text(encoding="utf-8").split()) for page in pages]
    assert any(command in text for text in texts)
    assert not any("dvc metrics show reports/metrics.json" in text for text in texts)
    out = run([sys.executable, "-m", *command.split()], REPO).stdout.splitlines()
    assert len(out) > 100 and max(map(len, out)) < 160, max(map(len, out))
