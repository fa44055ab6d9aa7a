"""Every output has the same bytes whatever the machine: each switch below makes this machine compute as another
CPU, BLAS kernel, libm variant or thread count would, and every stage's every output (the default config, the real
GloVe 50-d vectors) must come out byte-identical to the run without it.

The switches (each one a separate run of every stage, in a process of its own, so that the libraries read them at
start):
  numpy       NPY_DISABLE_CPU_FEATURES: its SIMD dispatch groups this CPU has beyond numpy's baseline (all of them,
              and the top ones only), so numpy's exp, log, power, sort... take the kernels of an older CPU
  openblas    OPENBLAS_CORETYPE: two kernels this CPU can run other than its own
  mkl         MKL_ENABLE_INSTRUCTIONS=SSE4_2: torch's BLAS (MKL) on its oldest kernels
  aten        ATEN_CPU_CAPABILITY=default and avx2: torch's vectorised kernels of another width
  libm        GLIBC_TUNABLES without AVX2/FMA: glibc's sin, cos, exp, log... on their non-FMA variants
  threads     one thread for OpenMP, BLAS and torch (the default run has one per core)

A machine can switch off only what it has, so a CPU with AVX-512 shows more than one without; the table of what each
switch changed is the test's failure message. Other CPU families (an AMD EPYC, an Arm server) run the same code:
docs/reliability.md, "Byte-identical on every machine", says why their bytes cannot differ.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import REPO, output_hashes

pytestmark = pytest.mark.slow

DRIVER = """
import sys
from pathlib import Path
sys.path.insert(0, "tests")
from conftest import run_every_stage
run_every_stage(Path(sys.argv[1]))
"""

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@lru_cache(maxsize=1)
def numpy_groups() -> tuple[str, ...]:
    """numpy's SIMD dispatch groups that this CPU has, in numpy's order (the oldest first)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return tuple(group for group in __cpu_dispatch__ if __cpu_features__.get(group))


def openblas_kernels() -> tuple[str, ...]:
    """Two OpenBLAS kernels this x86 CPU can run other than its default (Prescott: SSE3 only; Sandybridge: AVX)."""
    from numpy._core._multiarray_umath import __cpu_features__

    return ("Prescott", "Sandybridge") if __cpu_features__.get("AVX") else ("Prescott", "Core2")


def switches() -> dict[str, dict[str, str]]:
    """Setting name -> the environment that makes this machine compute as another would."""
    out: dict[str, dict[str, str]] = {}
    groups = numpy_groups()
    if groups:
        out["numpy: no " + " ".join(groups)] = {"NPY_DISABLE_CPU_FEATURES": " ".join(groups)}
        if len(groups) > 1:
            out["numpy: no " + " ".join(groups[1:])] = {"NPY_DISABLE_CPU_FEATURES": " ".join(groups[1:])}
    for kernel in openblas_kernels():
        out[f"openblas: {kernel}"] = {"OPENBLAS_CORETYPE": kernel}
    out["mkl: SSE4_2"] = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    out["aten: default"] = {"ATEN_CPU_CAPABILITY": "default"}
    out["aten: avx2"] = {"ATEN_CPU_CAPABILITY": "avx2"}
    out["libm: no AVX2/FMA"] = {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F"}
    out["threads: 1"] = {name: "1" for name in THREAD_VARIABLES}
    return out


def run_with_env(base: Path, env: dict[str, str]) -> dict[str, str]:
    """Every stage in a fresh folder `base`, in a process of its own with `env`; returns output path -> SHA-256."""
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and not k.startswith(("NPY_", "ATEN_"))}
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, str(base)],
        cwd=REPO,
        env={**clean, "PE_PROJECT_ROOT": str(base), **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, f"{env}: the stages failed\n{result.stderr[-3000:]}"
    return output_hashes(base)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    """The outputs of a run with no switch (this machine's own kernels, one thread per core)."""
    return run_with_env(tmp_path_factory.mktemp("reference") / "run", {})


def test_the_reference_run_writes_every_output(reference):
    """The comparison covers every kind of output: arrays, JSON, CSV, figures, the report."""
    for name in (
        "data/encode/pe.npy",
        "data/encode/profiles.npz",
        "data/relative/rope.npz",
        "data/families/scalings.npz",
        "data/sweep/projections.npz",
        "reports/metrics.json",
        "reports/properties.json",
        "reports/study/crossover.json",
        "reports/figures/relative/rope_scalings.png",
        "reports/figures/sweep/panels_s0.png",
        "reports/report.html",
    ):
        assert name in reference, f"{name} was not written"
    assert len(reference) > 60


@pytest.mark.parametrize("setting", list(switches()))
def test_every_output_is_the_same_bytes_under(setting, reference, tmp_path):
    outputs = run_with_env(tmp_path / "run", switches()[setting])
    assert outputs.keys() == reference.keys()
    differ = sorted(name for name in outputs if outputs[name] != reference[name])
    assert not differ, f"{setting}: {len(differ)} of {len(outputs)} outputs differ from the reference run: {differ}"
