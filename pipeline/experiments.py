"""`python -m pipeline.experiments [dvc exp show options]`: the experiments table, narrowed to what tells them apart.

`dvc exp show` lists every key of params.yaml (about 120) and one hash column per stage dependency (about 70),
and DVC's config cannot turn either off: in a terminal every cell becomes "…". This view shows
  always                  Experiment, Created and the per-sentence headline metrics (r_star.s{i},
                          sqrt_d_semantic.s{i}: pipeline.core.sweep.HEADLINE);
  where the rows differ   the other headline metrics and the config keys users vary (pipeline.config.schema.VARIED);
  never                   the other keys and the dependency hashes: plain `dvc exp show` has them all,
                          `dvc exp show --csv` for a spreadsheet.
The table is printed here, not by DVC: numbers to 6 significant digits, every cell whole (no "…"), no pager, and
in blocks of columns that fit the terminal (160 columns when the output is not one), each block starting with the
experiment's name. Other options go to `dvc exp show` as they are: `-A` (all commits), `-n 5`, `--sort-by
r_star.s0`, `--keep REGEX` (one more column); `--md`, `--csv`, `--json` print DVC's own output of these columns.
"""

from __future__ import annotations

import re
import subprocess
import sys

from pipeline.config.schema import VARIED
from pipeline.core.sweep import HEADLINE

PER_SENTENCE = "{s}"


def _names(names: list[str]) -> str:
    """A regex alternative matching each of `names` whole; `{s}` in a name stands for any sentence, s0, s1, ..."""
    return "|".join(re.escape(name).replace(re.escape(PER_SENTENCE), r"s\d+") for name in names)


def columns() -> tuple[str, str]:
    """(keep, drop): the regexes given to `dvc exp show --only-changed --keep KEEP --drop DROP`. DVC matches them
    at the start of each column name; a kept column survives both --only-changed and --drop."""
    always = ["Experiment", "Created", *(name for name in HEADLINE if PER_SENTENCE in name)]
    if_changed = [*(name for name in HEADLINE if PER_SENTENCE not in name), *VARIED]
    return f"^(?:{_names(always)})$", f"^(?!(?:{_names(if_changed)})$)"


WIDTH = 160  # the table's width when the output is not a terminal
OWN_FORMATS = ("--md", "--csv", "--json")  # DVC prints these itself
TREE = {"branch_commit": "├── ", "branch_base": "└── "}  # an experiment under its commit, as `dvc exp show` draws it
NAME = "Experiment"  # the first column: DVC's Experiment, or its rev (workspace, a branch, a commit)


def command(extra: list[str]) -> list[str]:
    keep, drop = columns()
    if not any(arg in OWN_FORMATS for arg in extra):
        keep = f"{keep[:-1]}|^rev$|^typ$"  # the name of the workspace's and the commits' rows; an experiment's
        extra = ["--csv", *extra]
    return [sys.executable, "-m", "dvc", "exp", "show", "--only-changed", "--keep", keep, "--drop", drop, *extra]


def _cell(text: str) -> str:
    try:
        return f"{float(text):.6g}" if text not in ("", "-") and not text.isdigit() else text
    except ValueError:
        return text


def table(csv_text: str, width: int) -> list[str]:
    """DVC's CSV (`command`'s columns, with rev and typ) as fixed-width lines: one row per experiment named by its
    Experiment (or its rev; an experiment under its commit as DVC draws it, `├── `), numbers to 6 significant digits, the columns in blocks of at most `width` characters, each block repeating
    the name column."""
    import csv

    rows = list(csv.reader(csv_text.splitlines()))
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    at = {name: i for i, name in enumerate(header)}
    names = [TREE.get(row[at["typ"]], "") + (row[at["Experiment"]] or row[at["rev"]]) for row in body]
    shown = [c for c in header if c not in ("Experiment", "rev", "typ")]
    cells = {c: [_cell(row[at[c]]) for row in body] for c in shown}
    widths = {c: max([len(c), *map(len, cells[c])]) for c in shown}
    first = max([len(NAME), *map(len, names)])
    blocks, block, used = [], [], first
    for c in shown:
        if block and used + 2 + widths[c] > width:
            blocks.append(block)
            block, used = [], first
        block.append(c)
        used += 2 + widths[c]
    blocks.append(block)
    lines = []
    for b in blocks:
        lines.append("  ".join([NAME.ljust(first), *(c.rjust(widths[c]) for c in b)]).rstrip())
        lines += [
            "  ".join([n.ljust(first), *(cells[c][i].rjust(widths[c]) for c in b)]).rstrip()
            for i, n in enumerate(names)
        ]
        lines.append("")
    return lines[:-1]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        print(__doc__)
        return 0
    if any(arg in OWN_FORMATS for arg in argv):
        return subprocess.call(command(argv))
    import shutil

    done = subprocess.run(command(argv), capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        return done.returncode
    width = shutil.get_terminal_size((WIDTH, 24)).columns if sys.stdout.isatty() else WIDTH
    print("\n".join(table(done.stdout, width)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
