"""The check's printed summary: the tests' counts and figures, the peaks, one table of every measured row, the
largest n and the errors beyond it, what the budget skipped, the steps that failed."""

from __future__ import annotations

from benchmarks.gpu.length_timings import DOCUMENTED


def _gb(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e9:.1f}"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


COUNTS = ("differing_values", "flipped_signs", "degenerate_components", "bias_equal")


def parity_figures(cases: list[dict]) -> dict:
    """The largest of the relative differences the tests recorded (not the counts, nor the float32 encoding's
    error against float64) and the sums of the counts that must be 0."""
    largest, where, sums = -1.0, "", {name: 0.0 for name in COUNTS}
    for case in cases:
        for name, value in case["properties"].items():
            if name in COUNTS:
                sums[name] += float(value)
            elif name != "max_abs_err_vs_float64" and float(value) > largest:
                largest, where = float(value), f"{case['test'].rpartition('::')[2]}: {name}"
    return {"largest": largest, "where": where, **sums} if where else {}


def print_tests(tests: dict, device_type: str) -> None:
    print(
        f"tests (cuda-marked, on {device_type}): {tests['passed']} passed, {tests['failed']} failed, "
        f"{tests['error']} errors, {tests['skipped']} skipped of {tests['total']} in {tests['seconds']:.1f} s"
    )
    for case in tests["cases"]:
        if case["outcome"] in ("failed", "error"):
            print(f"  {case['outcome'].upper()} {case['test']}: {case['message']}")
    if tests["returncode"] not in (0, 1):
        print(tests["output_tail"])
    figures = parity_figures(tests["cases"])
    if figures:
        print(
            f"  largest relative difference recorded, device against the CPU path or a reference: "
            f"{figures['largest']:.2g} ({figures['where']}); float32 encoding values that differ: "
            f"{figures['differing_values']:.0f}; PCA components with another sign: {figures['flipped_signs']:.0f}"
        )


def print_rows(rows: list[dict], bw: dict | None) -> None:
    if bw:
        print(
            f"peak memory bandwidth: {_gb(bw['theoretical_bytes_per_s'])} GB/s from the device's properties, "
            f"{_gb(bw['copy']['bytes_per_s'])} GB/s measured by a {bw['copy']['bytes'] / 2**20:.0f} MiB copy "
            f"(reads and writes; %peak below: against the {bw['peak_used']})"
        )
    peak = bw["peak_bytes_per_s"] if bw else None
    header = (
        f"{'n':>6} {'d':>5} {'pairs':>8} {'method':<42} {'path':<8} {'seconds':>9} {'x ref':>7} {'x cpu':>7} "
        f"{'GB/s':>7} {'%peak':>6} {'max|err|':>9}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for row in rows:
        size = f"{row.get('n', '-'):>6} {row.get('d', '-'):>5} {row.get('pairs', '-'):>8}"
        if "seconds" not in row:
            why = row.get("skipped") or row.get("failed", "")
            print(f"{size} {row['method']:<42} {row['path']:<8} {'not run: ' + why[:90]}")
            continue
        rate = row.get("bytes_per_s")
        share = None if rate is None or not peak else 100 * rate / peak
        print(
            f"{size} {row['method']:<42} {row['path']:<8} {row['seconds']:>9.3g} {_num(row.get('x_reference')):>7} "
            f"{_num(row.get('x_cpu_path')):>7} {_gb(rate) if rate else '-':>7} {_num(share, '.0f'):>6} "
            f"{_num(row.get('max_abs_err'), '.1e'):>9}"
        )
    print(
        "x ref: the same device's reference (cdist + float32 matmul; the float32-angle formula; the batched SVD) "
        "seconds / the row's; x cpu: the CPU path's seconds / the device's;\nmax|err|: against float64 references "
        "(absolute; the projections' relative to each frame's largest coordinate, against weighted_pca)"
    )


def print_memory(mem: dict) -> None:
    if mem.get("n_max") is None:
        print(f"\nlargest n: {mem.get('skipped')}")
        return
    at = mem["at_n_max"]
    cap = f" (--memory-cap {mem['cap_bytes'] / 2**30:.2f} GiB)" if mem.get("cap_bytes") else ""
    there = (
        f"computed there in {at['seconds']:.3g} s, peak growth {at['peak_growth_bytes'] / 2**30:.2f} GiB "
        f"({'the allocator' if mem.get('device') == 'cuda' else 'peak RSS: 0 when an earlier step held more'}) for "
        f"an estimate of {at['estimate_bytes'] / 2**30:.2f} GiB, max |err| {at['max_abs_err']:.1e}"
        if at.get("fits")
        else f"NOT computed there: {at.get('error')}"
    )
    print(
        f"\nlargest n for the full float64 matrices: {mem['n_max']} (float32: {mem['n_max_float32']}) with "
        f"{mem['available_bytes'] / 2**30:.2f} GiB available{cap}; {there}"
    )
    for b in mem["beyond"]:
        print(f"  n = {b['n']}: {b['outcome']}: {b.get('message', '')}")


def print_report(results: dict) -> None:
    dev = results["device"]
    print(f"\n== {dev['name']} ({dev['type']}), torch {dev['torch']}, CUDA {dev['cuda']}, Python {dev['python']}")
    if "tests" in results:
        print_tests(results["tests"], dev["type"])
    print_rows(results["rows"], results.get("bandwidth"))
    if "memory" in results:
        print_memory(results["memory"])
    for where in (results.get("length") or {}).values():
        if where:
            print(
                f"length experiment, the documented config ({DOCUMENTED['runs']} runs of at most {DOCUMENTED['steps']:,} "
                f"steps) on the {where['path']}: about "
                f"{where['seconds']:.0f} s ({1e3 * where['seconds_per_step']:.1f} ms a step and "
                f"{where['evaluation_seconds']:.2f} s an evaluation, the slowest family's)"
            )
    for item in results["skipped"]:
        print(f"skipped by the budget: {item['what']} (predicted {item['predicted_seconds']:.3g} s)")
    for error in results["errors"]:
        print(f"FAILED STEP {error['step']}: {error['traceback'].strip().splitlines()[-1]}")
    print(f"wall time {results['wall_seconds']:.1f} s of a {results['budget_seconds']:.0f} s budget")
