"""`python -m pipeline.repro [overrides] [-- dvc repro options]`: compose params.yaml from conf/, then `dvc repro`.

The README's main command. Only stages whose inputs changed re-run.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.compose import main as compose_main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    overrides, dvc_args = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    status = compose_main(overrides)
    if status:
        return status
    # the stage commands say `python`: make it this interpreter even when its venv is not activated
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.call([sys.executable, "-m", "dvc", "repro", *dvc_args], env=env)


if __name__ == "__main__":
    raise SystemExit(main())
