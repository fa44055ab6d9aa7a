"""`python -m pipeline.gate`: fail when a metric drifts from its committed baseline beyond its tolerance.

    python -m pipeline.gate                       # every gated file vs the version committed at HEAD
    python -m pipeline.gate --baseline main~1     # vs another git revision
    python -m pipeline.gate --baseline old.json   # reports/metrics.json (or --current) vs a file

The gated files are GATED below: reports/metrics.json (names as they are), reports/relative.json (RoPE and ALiBi,
names prefixed `relative.`), reports/study/crossover.json (the crossover study, prefixed `study.`),
reports/properties.json (every position-encoding family's property scores, prefixed `properties.`; its MiniLM-L6
rows and probe come from an optional extra, and a run without it names the extra to install) and the length
experiment's experiments/length/results/summary.json (prefixed `length.`).

Tolerances live in .ci/tolerances.yaml: rules of fnmatch patterns over the flattened metric names
(as `dvc metrics show` prints them), each with `abs`, `rel` and/or `spread` and a one-line reason; the first
matching rule applies, and a metric that no rule matches must not change at all. `spread: K` allows K times the
baseline's own spread of the statistic: its sibling `std` (a.b.mean -> a.b.std), for statistics over seeds of trained
models. A metric present on one side only is a failure too. (`dvc metrics diff` shows differences but always exits
0.) It compares metrics only: `python -m pipeline.verify` checks the data and figures by content.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from pipeline.base.trees import flatten
from pipeline.base.errors import PipelineError
from pipeline.base.paths import Layout

METRICS = Layout(Path(".")).metrics.as_posix()  # as git and DVC name it
# The gated files: name prefix -> Layout attribute (paths as git names them). "" keeps metrics.json's names unprefixed.
SHOWN = 10  # drifted metrics listed by default: a changed config (e.g. sweep.w2=3) moves hundreds of them
GATED = {
    "": "metrics",
    "relative": "relative_metrics",
    "study": "study_summary",
    "properties": "properties_metrics",
    "length": "length_summary",
}


def gated_files() -> dict[str, str]:
    """Name prefix -> path of each gated file, relative to the checkout root, as git names it."""
    layout = Layout(Path("."))
    return {prefix: getattr(layout, attr).as_posix() for prefix, attr in GATED.items()}


def prefixed(prefix: str, tree: dict) -> dict:
    return {prefix: tree} if prefix else tree


TOLERANCES = ".ci/tolerances.yaml"
# Metrics computed only where an optional extra is installed: a part of their name -> the fix when they are missing
OPTIONAL = {"minilm": "its model is not installed: pip install -c constraints.txt -e '.[models]'"}


@dataclass(frozen=True)
class Rule:
    pattern: str
    abs: float
    rel: float
    reason: str
    spread: float = 0.0  # times the baseline's sibling `std`

    def allows(self, old: float, new: float, std: float = 0.0) -> bool:
        return abs(new - old) <= max(self.abs, self.rel * abs(old), self.spread * std)

    def describe(self, std: float = 0.0) -> str:
        spread = f", spread {self.spread:g} x std {std:g}" if self.spread else ""
        return f"abs {self.abs:g}, rel {self.rel:g}{spread} ({self.reason})"


def sibling_std(name: str, tree: dict) -> float:
    """The `std` beside a statistic (a.b.mean -> a.b.std) in a flattened tree, 0 when there is none."""
    value = tree.get(f"{name.rpartition('.')[0]}.std")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


EXACT = Rule("<no rule>", 0.0, 0.0, "no rule in the tolerances file matches: must not change")


RULES_FIX = (
    "Fix: `rules:` is a list of mappings, each with `match` (a glob over metric names), `reason` (text) and `abs`, "
    "`rel` and/or `spread` (numbers >= 0), as in .ci/tolerances.yaml."
)


def load_rules(path: Path) -> list[Rule]:
    """The tolerance rules of the YAML file `path`; anything else than the documented shape is one PipelineError
    naming the file, the rule and the fix."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PipelineError(f"{path} is not valid YAML ({' '.join(str(exc).split())}). {RULES_FIX}") from None
    entries = data.get("rules") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        given = f"`rules: {entries!r}`" if isinstance(data, dict) and "rules" in data else "no `rules:`"
        raise PipelineError(f"{path} holds {given}, not a list of rules. {RULES_FIX}")
    rules = []
    for i, entry in enumerate(entries):
        bounds = [entry.get(key, 0.0) for key in ("abs", "rel", "spread")] if isinstance(entry, dict) else []
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("match"), str)
            and isinstance(entry.get("reason"), str)
            and {"abs", "rel", "spread"} & entry.keys()
            and all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < math.inf for b in bounds)
        )
        if not ok:
            raise PipelineError(f"{path}: rule {i + 1} ({entry!r}) is not a tolerance rule. {RULES_FIX}")
        rules.append(Rule(entry["match"], float(bounds[0]), float(bounds[1]), entry["reason"], float(bounds[2])))
    return rules


def rule_for(name: str, rules: list[Rule]) -> Rule:
    return next((rule for rule in rules if fnmatch.fnmatchcase(name, rule.pattern)), EXACT)


def compare(baseline: dict, current: dict, rules: list[Rule]) -> list[str]:
    """One line per violation: metric, old, new, and the tolerance it broke."""
    old, new = flatten(baseline), flatten(current)
    problems = []
    for name in sorted(old.keys() | new.keys()):
        if name not in new:
            hint = next((f" ({fix})" for part, fix in OPTIONAL.items() if part in name), "")
            problems.append(f"{name}: in the baseline ({old[name]!r}) but no longer computed{hint}")
            continue
        if name not in old:
            problems.append(
                f"{name}: new metric ({new[name]!r}) missing from the baseline: commit the new "
                "metrics file (reports/) if it is intended"
            )
            continue
        a, b = old[name], new[name]
        if a == b:
            continue
        rule = rule_for(name, rules)
        std = sibling_std(name, old) if rule.spread else 0.0
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        if not numeric or not (math.isfinite(a) and math.isfinite(b)) or not rule.allows(float(a), float(b), std):
            diff = f" (|change| {abs(b - a):.3g})" if numeric else ""
            problems.append(f"{name}: {a!r} -> {b!r}{diff} exceeds tolerance {rule.describe(std)}")
    return problems


def parsed(where: Path | str, text: str | None = None) -> dict:
    """The JSON of the file `where` (or of `text`, read from `where`), or a PipelineError naming it."""
    try:  # json's message names no file
        return json.loads(Path(where).read_text(encoding="utf-8") if text is None else text)
    except ValueError as exc:
        raise PipelineError(
            f"{where} is not valid JSON ({exc}). Fix: `python -m pipeline.repro` writes it again (`git checkout` "
            "restores a committed one), or pass another --baseline / --current."
        ) from None


def read_revision(rev: str, path: str, root: Path) -> dict:
    shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True)
    if shown.returncode != 0:
        raise PipelineError(
            f"no baseline {path} at git revision {rev!r} ({shown.stderr.strip()}): pass --baseline REV or a .json file."
        )
    return parsed(f"{path} at git revision {rev}", shown.stdout)


def read_sides(baseline: str, current: str | None, root: Path) -> tuple[dict, dict]:
    """(baseline, current) metric trees. A .json baseline or an explicit --current compares one file (metrics.json
    by default); otherwise every gated file is compared with its version at the git revision `baseline`."""
    as_file = Path(baseline).suffix == ".json" and (root / baseline).exists()
    if current is not None or as_file:
        old = parsed(root / baseline) if as_file else read_revision(baseline, METRICS, root)
        return old, parsed(root / (current or METRICS))
    old, new = {}, {}
    for prefix, path in gated_files().items():
        old.update(prefixed(prefix, read_revision(baseline, path, root)))
        new.update(prefixed(prefix, parsed(root / path)))
    return old, new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.gate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default="HEAD", help="git revision or .json file (default: HEAD)")
    parser.add_argument(
        "--current",
        default=None,
        help=f"a metrics file to compare instead of the gated files (with a .json --baseline: default {METRICS})",
    )
    parser.add_argument("--tolerances", default=TOLERANCES)
    parser.add_argument("--all", action="store_true", help=f"list every drifted metric (default: the first {SHOWN})")
    args = parser.parse_args(argv)
    from pipeline.base.paths import checkout_root

    root = checkout_root()
    try:
        baseline, current = read_sides(args.baseline, args.current, root)
        problems = compare(baseline, current, load_rules(root / args.tolerances))
    except (PipelineError, OSError, ValueError) as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return 2
    checked = len(flatten(baseline).keys() | flatten(current).keys())  # a problem is one of these names
    if problems:
        print(f"gate: {len(problems)} of {checked} metrics drifted from the baseline ({args.baseline}):")
        shown = problems if args.all else problems[:SHOWN]
        for line in shown:
            print(f"  FAIL {line}")
        if len(shown) < len(problems):
            print(f"  ... and {len(problems) - len(shown)} more: `python -m pipeline.gate --all` lists every one")
        return 1
    print(
        f"gate: all {checked} metrics within tolerance of the baseline ({args.baseline}); the metrics only: "
        "`python -m pipeline.verify` checks the data and figures by content"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
