"""`python -m pipeline.compose [overrides]`: write params.yaml from conf/ (what `dvc exp run` does before running).

Examples:
    python -m pipeline.compose
    python -m pipeline.compose glove=6B-100d sweep.w2=10 'texts.sentences=[a b c, c b a]'
"""
from __future__ import annotations

import sys

from pipeline.config import compose, validate, write_params
from pipeline.errors import PipelineError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        from pipeline.paths import checkout_root

        conf = checkout_root() / "conf"
        for group in sorted(p for p in conf.iterdir() if p.is_dir() and p.name != "hydra"):  # hydra/: launchers
            print(f"  {group.name}: {', '.join(sorted(f.stem for f in group.glob('*.yaml')))}")
        return 0
    try:
        params = compose(argv)
        validate(params)
        path = write_params(params)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}" + (f" with {' '.join(argv)}" if argv else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
