"""Every output has the same bytes whatever the machine: each switch below makes this machine compute as another
CPU, BLAS kernel, libm variant or thread count would, and every stage's every output (the default config, the real
GloVe 50-d vectors) must come out byte-identical to the run without it.

The switches (the libraries read them at start, so each run is a process of its own):
  numpy       NPY_DISABLE_CPU_FEATURES: its SIMD dispatch groups this CPU has beyond numpy's baseline (all of them,
              and the top ones only), so numpy's exp, log, power, sort... take the kernels of an older CPU
  openblas    OPENBLAS_CORETYPE: two kernels this CPU can run other than its own
  mkl         MKL_ENABLE_INSTRUCTIONS=SSE4_2: torch's BLAS (MKL) on its oldest kernels
  aten        ATEN_CPU_CAPABILITY=default and avx2: torch's vectorised kernels of another width
  libm        GLIBC_TUNABLES without AVX2/FMA: glibc's sin, cos, exp, log... on their non-FMA variants
  threads     one thread for OpenMP, BLAS and torch (the default run has one per core)

They run as two other machines, each with one switch of every library at once (`machines`), as a real other CPU
differs from this one in all of them: two runs of every stage instead of one a switch. Each library's switch changes
only that library's kernels, so one switch's change of a last bit shows in its machine's outputs whatever the other
switches there do; the one way for it to hide, another switch taking away the code path it changes, is kept out by
the pairing (`machines`). When a machine's outputs differ, each of its switches runs alone, and the failure names
what each changed.

A machine can switch off only what it has, so a CPU with AVX-512 shows more than one without. Other CPU families (an
AMD EPYC, an Arm server) run the same code: docs/reliability.md, "Byte-identical on every machine", says why their
bytes cannot differ.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from conftest import THREAD_VARIABLES, changed_outputs, every_stage_with_env

pytestmark = pytest.mark.slow


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


def machines() -> dict[str, dict[str, dict[str, str]]]:
    """Two other machines: name -> their switches (switches() by name). Each gets one switch of every library that has
    two (numpy, OpenBLAS, ATen: they exclude each other). libm goes with numpy's and ATen's oldest kernels, whose
    scalar loops call libm where their SIMD kernels compute without it (more of libm reached than alone); MKL and one
    thread go with ATen's vectorised kernels, as they ran alone."""
    every = switches()
    first, second = {}, {}
    for library in ("numpy", "openblas", "aten"):
        mine = [name for name in every if name.startswith(library + ":")]  # none: numpy on a CPU of its baseline
        first.update({name: every[name] for name in mine[:1]})
        second.update({name: every[name] for name in mine[1:2]})
    first["libm: no AVX2/FMA"] = every["libm: no AVX2/FMA"]
    second["mkl: SSE4_2"], second["threads: 1"] = every["mkl: SSE4_2"], every["threads: 1"]
    assert set(first) | set(second) == set(every) and not set(first) & set(second)
    return {"; ".join(first): first, "; ".join(second): second}


@pytest.fixture(scope="module")
def reference(reference_outputs) -> dict[str, str]:
    """The outputs of a run with no switch (this machine's own kernels, one thread per core)."""
    return reference_outputs


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


def test_the_two_machines_take_every_switch_once():
    """Every switch runs, in one machine only, and no machine sets a variable twice."""
    on = [name for switches_on in machines().values() for name in switches_on]
    assert sorted(on) == sorted(switches())
    for switches_on in machines().values():
        variables = [variable for env in switches_on.values() for variable in env]
        assert len(variables) == len(set(variables)), variables


@pytest.mark.parametrize("machine", list(machines()))
def test_every_output_is_the_same_bytes_on(machine, reference, tmp_path):
    switches_on = machines()[machine]
    env = {variable: value for switch in switches_on.values() for variable, value in switch.items()}
    differ = sorted(changed_outputs(every_stage_with_env(tmp_path / "run", env), reference))
    if differ:  # which switch: each alone
        alone = {
            name: sorted(changed_outputs(every_stage_with_env(tmp_path / f"alone-{k}", switch), reference))
            for k, (name, switch) in enumerate(switches_on.items())
        }
        table = "\n".join(f"  {name}: {len(files)} differ: {files}" for name, files in alone.items())
        pytest.fail(
            f"{machine}: {len(differ)} of {len(reference)} outputs differ from the reference run: {differ}\n"
            f"each switch alone:\n{table}"
        )
