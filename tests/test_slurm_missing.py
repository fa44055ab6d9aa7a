"""Issue 23: `hydra/launcher=slurm` where SLURM cannot take the jobs is one message naming the fix, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_slurm_launcher_without_sbatch_is_one_message(tmp_path):
    cmd = [sys.executable, "-m", "pipeline", "-m", "hydra/launcher=slurm", "sweep.w2=1,2", "figures=none"]
    cmd += ["tracking=disabled", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}  # no sbatch on PATH
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: hydra/launcher=slurm: `srun` and `sbatch` not on PATH (SLURM is not installed here): run the sweep on a "
        "SLURM login node, or locally with hydra/launcher=basic (one job after another) or hydra/launcher=parallel"
    ]
