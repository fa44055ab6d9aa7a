"""The command line of `python -m benchmarks.gpu` (the package docstring says what it does): options, the order of
the steps, the JSON and the exit status."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

import torch

from benchmarks.gpu import __doc__ as DOC
from benchmarks.gpu.bandwidth import copy_peak, theoretical_peak
from benchmarks.gpu.budget import Budget
from benchmarks.gpu.devinfo import describe
from benchmarks.gpu.length_timings import bench_length, projection
from benchmarks.gpu.memory_probe import probe
from benchmarks.gpu.parity import run_tests
from benchmarks.gpu.pe_timings import FULL32, FULL64, bench_size, ratios
from benchmarks.gpu.sweep_timings import bench_pairs
from benchmarks.gpu.table import parity_figures, print_report
from pipeline.base.files import write_text
from pipeline.core.memory import memory_cap

REPO = Path(__file__).resolve().parents[2]
FULL = {"budget": 240.0, "sizes": "4096x512,16384x1024,65536x4096", "pairs": "10000,1000000", "repeat": 3}
QUICK = {"budget": 100.0, "sizes": "2048x256,8192x1024", "pairs": "10000,100000", "repeat": 1}
UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
CPU_CAP = "256M"  # the CPU's default --memory-cap: the probe proves the code path, not this machine's RAM
# shares of the budget kept for the steps after the encoding's sizes, and after the sweep's
KEEP_AFTER_SIZES, KEEP_AFTER_SWEEP = 0.3, 0.1


# The budget predicts each measurement from the last smaller one of its kind, and the first runs unpredicted: a large
# one measured first could overrun the budget many times (docs/benchmarks-measurements.md#outside-the-project). So a
# small scout runs first whenever the sizes asked for are all larger.
SCOUT_SIZE, SCOUT_PAIRS = (2048, 256), 10_000


def with_scout(items: list, scout, key) -> list:
    """`items` smallest first (by `key`), with `scout` in front when it is smaller than every one of them."""
    items = sorted(set(items), key=key)
    return items if key(items[0]) <= key(scout) else [scout, *items]


def parse_sizes(text: str) -> list[tuple[int, int]]:
    try:
        sizes = [tuple(int(v) for v in item.lower().split("x")) for item in text.split(",") if item]
    except ValueError:
        sizes = []
    if not sizes or any(len(s) != 2 or min(s) < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NxD[,NxD...] of positive numbers, e.g. 4096x512")
    return sizes


def parse_counts(text: str) -> list[int]:
    try:
        counts = [int(v) for v in text.split(",") if v]
    except ValueError:
        counts = []
    if not counts or min(counts) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers >= 2 separated by commas, e.g. 10000,1000000")
    return counts


def parse_bytes(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size such as 512M, 8G or 1073741824")
    return int(float(match[1]) * UNITS[match[2].upper()])


def resolve(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            f"error: --device cuda, but torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device. "
            "Fix: run it on a GPU machine, or use --device cpu to run the same code paths on the CPU."
        )
    return torch.device(name)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu", description=DOC, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="default: cuda if seen")
    parser.add_argument("--quick", action="store_true", help=f"smaller defaults: {QUICK}")
    parser.add_argument("--budget", type=float, help=f"seconds for the whole check (default {FULL['budget']:.0f})")
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        help=f"NxD list (default {FULL['sizes']}; a {SCOUT_SIZE[0]}x{SCOUT_SIZE[1]} scout runs first when all are larger)",
    )
    parser.add_argument("--sweep-pairs", type=parse_counts, help=f"weight pair counts (default {FULL['pairs']})")
    parser.add_argument("--sweep-check", type=int, default=20_000, help="pairs compared with weighted_pca")
    parser.add_argument("--max-size", type=int, default=512, help="side of the diagnostics' block means")
    parser.add_argument("--repeat", type=int, help="timed runs after the warm-up, best kept (default 3)")
    parser.add_argument(
        "--memory-cap",
        type=parse_bytes,
        help=f"memory the probe may assume, e.g. 8G (default: all; {CPU_CAP} on a CPU)",
    )
    parser.add_argument(
        "--length-steps",
        type=int,
        default=20,
        help="training steps timed per family of the length experiment (0: none)",
    )
    parser.add_argument("--out", type=Path, help="the JSON (default benchmarks/results/gpu-check-<device>.json)")
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    args.budget = args.budget or defaults["budget"]
    args.sizes = with_scout(args.sizes or parse_sizes(defaults["sizes"]), SCOUT_SIZE, key=lambda s: s[0] * s[0] * s[1])
    args.sweep_pairs = with_scout(args.sweep_pairs or parse_counts(defaults["pairs"]), SCOUT_PAIRS, key=lambda p: p)
    args.repeat = defaults["repeat"] if args.repeat is None else args.repeat
    return args


def write_rate(rows: list[dict], bandwidth: dict | None) -> dict | None:
    """The fastest full-matrix write on the device, against the peaks."""
    writes = [r for r in rows if r["method"] in (FULL64, FULL32) and r["path"] == "device" and "bytes_per_s" in r]
    if not writes or not bandwidth:
        return None
    best = max(writes, key=lambda r: r["bytes_per_s"])
    theoretical = bandwidth["theoretical_bytes_per_s"]
    return {
        "n": best["n"],
        "method": best["method"],
        "bytes_per_s": best["bytes_per_s"],
        "share_of_theoretical_peak": best["bytes_per_s"] / theoretical if theoretical else None,
        "share_of_copy_peak": best["bytes_per_s"] / bandwidth["copy"]["bytes_per_s"],
    }


def passed(results: dict) -> bool:
    """No step raised, every selected test passed or was skipped, the full matrices fit at the largest n, and beyond
    it the core's clear error came."""
    tests, memory = results.get("tests"), results.get("memory")
    if results["errors"] or not tests or not memory:
        return False
    if tests["returncode"] != 0 or tests["failed"] or tests["error"] or not tests["total"]:
        return False
    return memory.get("clear_error_beyond", True) and memory.get("at_n_max", {}).get("fits", True)


def save(results: dict, out: Path) -> None:
    """The JSON with every float as Python prints it (repr, round-trips): the differences the check measures are
    1e-16 .. 1e-6, below the fixed decimals of pipeline.base.files.write_json (benchmarks.report.finish)."""
    results["load_average_end"] = os.getloadavg()[0]
    write_text(Path(out), json.dumps(results, indent=2) + "\n")
    print(f"\nresults: {out}")


def main(argv: list[str] | None = None) -> dict:
    args = arguments(argv)
    device = resolve(args.device)
    if args.memory_cap is None and device.type == "cpu":
        args.memory_cap = parse_bytes(CPU_CAP)

    def capped():
        return memory_cap(args.memory_cap) if args.memory_cap else contextlib.nullcontext()

    budget = Budget(args.budget)
    info = describe(device)
    print(f"{info['name']} ({device}), torch {info['torch']}, CUDA {info['cuda']}: budget {args.budget:.0f} s")
    results: dict = {
        "command": "python -m benchmarks.gpu " + " ".join(sys.argv[1:] if argv is None else argv),
        "quick": args.quick,
        "budget_seconds": args.budget,
        "device": info,
        "load_average_start": os.getloadavg()[0],
    }

    results["steps"], results["errors"] = {}, []

    def step(name: str, fn) -> None:
        """Run one step; an unexpected exception is printed and recorded, and the next steps still run."""
        print(f"{name} ...", flush=True)
        start = time.perf_counter()
        try:
            fn()
        except Exception:  # noqa: BLE001  (recorded with its traceback: the JSON keeps what the other steps found)
            traceback.print_exc()
            results["errors"].append({"step": name, "traceback": traceback.format_exc()})
        results["steps"][name] = time.perf_counter() - start

    def tests() -> None:
        results["tests"] = run_tests(device.type, timeout=max(60.0, 0.5 * budget.left()))
        results["parity"] = parity_figures(results["tests"]["cases"])

    def bandwidth() -> None:
        with capped():
            copy = copy_peak(device, budget)
        theoretical = theoretical_peak(info)
        results["bandwidth"] = {
            "theoretical_bytes_per_s": theoretical,
            "copy": copy,
            "peak_bytes_per_s": theoretical or copy["bytes_per_s"],
            "peak_used": "theoretical peak (memory clock x bus width)" if theoretical else "measured copy",
        }

    def encoding(n: int, d: int) -> None:
        rows.extend(bench_size(n, d, device, args, budget, keep=KEEP_AFTER_SIZES * args.budget))

    def sweep(pairs: int) -> None:
        rows.extend(bench_pairs(pairs, device, args, budget, keep=KEEP_AFTER_SWEEP * args.budget))

    def memory() -> None:
        with capped():
            results["memory"] = {"cap_bytes": args.memory_cap, **probe(device)}

    def length() -> None:
        measured = bench_length(device, budget, 0.0, args.length_steps, 16 if args.quick else None)
        rows.extend(measured)
        results["length"] = {path: projection(measured, path) for path in ("device", "cpu path")}

    rows: list[dict] = []
    results["rows"] = rows
    step("1. the cuda-marked tests", tests)
    step("2. peak bandwidth", bandwidth)
    for n, d in args.sizes:
        step(f"3. encoding n={n} d={d}", lambda n=n, d=d: encoding(n, d))
    ratios(rows)
    for pairs in args.sweep_pairs:
        step(f"4. sweep {pairs} pairs", lambda pairs=pairs: sweep(pairs))
    step("5. the largest n", memory)
    if args.length_steps > 0:
        step("6. the length experiment", length)
    results["full_matrix_writes"] = write_rate(rows, results.get("bandwidth"))
    results["skipped"] = budget.skipped
    results["wall_seconds"] = budget.spent()
    print_report(results)
    out = args.out or REPO / "benchmarks" / "results" / f"gpu-check-{device.type}-{slug(info['name'])}.json"
    save(results, out)
    if not passed(results):
        raise SystemExit(1)
    return results
