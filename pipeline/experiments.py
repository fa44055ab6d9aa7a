"""`python -m pipeline.experiments [dvc exp show options]`: the experiments table, narrowed to what tells them apart.

`dvc exp show` lists every key of params.yaml (about 100) and one hash column per stage dependency (about 70),
and DVC's config cannot turn either off: in a terminal every cell becomes "…". This view shows
  always                  Experiment, Created and the per-sentence headline metrics (r_star.s{i},
                          sqrt_d_semantic.s{i}: pipeline.core.sweep.HEADLINE);
  where the rows differ   the other headline metrics and the config keys users vary (pipeline.config.schema.VARIED);
  never                   the other keys and the dependency hashes: plain `dvc exp show` has them all,
                          `dvc exp show --csv` for a spreadsheet.
At the default config after a few experiments it fits 160 columns. Other options go to `dvc exp show` as they
are: `-A` (all commits), `-n 5`, `--sort-by r_star.s0`, `--md`, `--csv`, `--json`, `--keep REGEX` (one more
column), `--no-pager`.
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


def command(extra: list[str]) -> list[str]:
    keep, drop = columns()
    return [sys.executable, "-m", "dvc", "exp", "show", "--only-changed", "--keep", keep, "--drop", drop, *extra]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        print(__doc__)
        return 0
    return subprocess.call(command(argv))


if __name__ == "__main__":
    sys.exit(main())
