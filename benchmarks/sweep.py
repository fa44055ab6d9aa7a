"""Benchmark of the sweep's metrics: every weight pair measured at once against the per-pair loop, same run.

    python -m benchmarks.sweep                        # 10,000 pairs x 2 sentences of 11 words, d = 50
    python -m benchmarks.sweep --pairs 1000 --dims 50,300 --loop-pairs 100

Per d: two sentences of 11 words (GloVe-like random vectors, real sinusoidal PE rows: the second sentence's
positions shuffled), --pairs weight pairs (W1, W2 log-uniform in 1e-2..1e2, the baseline first), projected once
with pipeline.core.projection.weighted_pca (timed too: the part of the sweep this issue did not change).

  batched   pipeline.core.sweep.measure: every pair's metrics at once (pipeline.core.metrics.batch_metrics, in
            chunks of bounded memory, and the batched Procrustes disparity)
  loop      the sweep before: per pair, pipeline.core.metrics.sentence_metrics (the references recomputed per
            call) and scipy.spatial.procrustes; timed on --loop-pairs pairs per sentence and extrapolated
            (best per-pair time of 5 chunks, interleaved with re-runs of the batched path)

The loop's values on its sample must equal the batched ones (max |difference| printed). Also timed: the
weight-pair validation of --pairs pairs (pipeline.core.weights.weight_pairs, linear) against the quadratic
de-duplication it replaced (each label compared with all earlier ones), extrapolated from a sample.
Results are printed and written to --out (JSON). Times are the best of --repeat runs after a warm-up.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from benchmarks.report import finish, machine_line

TARGET_SECONDS = 10.0  # issue 12: the metrics of 10,000 pairs x 2 sentences in at most 10 s


def best_of(fn, repeat: int) -> tuple[float, object]:
    result = fn()  # warm-up
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def loop_measure(pair, coords, explained, baseline, e, p, words, groups, k) -> dict[str, float]:
    """One pair as the sweep measured it before: all metrics of one weighting, then the scipy disparity."""
    from pipeline.core.metrics import sentence_metrics
    from pipeline.core.projection import procrustes_disparity

    values = sentence_metrics(pair.w1 * e + pair.w2 * p, coords, e, p, words, groups, k)
    values["pca_disparity"] = 0.0 if pair.is_baseline else procrustes_disparity(baseline, coords)
    values["explained_variance_2d"] = float(explained.sum())
    return values


def bench_metrics(d: int, args) -> dict:
    import torch

    from pipeline.core.encoding import sinusoidal_encoding
    from pipeline.core.metrics import Reference, valid_neighbours
    from pipeline.core.sweep import measure, project
    from pipeline.core.weights import WeightPair

    rng = np.random.default_rng(d)
    n, sentences, count = 11, 2, args.pairs
    words = "king queen man woman dog wolf football basketball red green yellow".split()
    groups = [
        ["king", "queen"],
        ["man", "woman"],
        ["dog", "wolf"],
        ["football", "basketball"],
        ["red", "green", "yellow"],
    ]
    pe = sinusoidal_encoding(100, d, dtype=torch.float32).double().numpy()
    es = rng.normal(scale=0.4, size=(sentences, n, d))
    ps = np.stack([pe[:n], pe[rng.permutation(n)]])
    w1, w2 = 10 ** rng.uniform(-2, 2, count), 10 ** rng.uniform(-2, 2, count)
    pairs = [WeightPair(1.0, 0.0, "1", "0")] + [WeightPair(a, b, repr(a), repr(b)) for a, b in zip(w1[1:], w2[1:])]
    k = valid_neighbours(3, n)

    t_project, projected = best_of(lambda: [project(es[s], ps[s], pairs) for s in range(sentences)], args.repeat)
    refs = [Reference(es[s], ps[s], words, groups, k) for s in range(sentences)]

    def batched():
        return [
            measure(pairs, coords, explained, coords[0], refs[s]) for s, (coords, explained) in enumerate(projected)
        ]

    t_batched, values = best_of(batched, args.repeat)
    sample = rng.choice(count, min(args.loop_pairs, count), replace=False)
    t_pair, err = math.inf, 0.0
    for chunk in np.array_split(sample, 5):
        start = time.perf_counter()
        for s, (coords, explained) in enumerate(projected):
            for j in chunk:
                row = loop_measure(pairs[j], coords[j], explained[j], coords[0], es[s], ps[s], words, groups, k)
                err = max(
                    err,
                    max(
                        abs(v - values[s][key][j])
                        for key, v in row.items()
                        if not (math.isnan(v) and math.isnan(values[s][key][j]))
                    ),
                )
        t_pair = min(t_pair, (time.perf_counter() - start) / max(1, len(chunk) * sentences))
        start = time.perf_counter()
        batched()
        t_batched = min(t_batched, time.perf_counter() - start)
    t_loop = t_pair * count * sentences
    return {
        "d": d,
        "n_words": n,
        "sentences": sentences,
        "pairs": count,
        "seconds": {
            "project (weighted_pca, unchanged)": t_project,
            "metrics: batched": t_batched,
            "metrics: per-pair loop (extrapolated)": t_loop,
        },
        "loop_sampled_pairs": int(len(sample) * sentences),
        "max_abs_difference": err,
        "speedup_batched_vs_loop": t_loop / t_batched,
        "target_seconds": TARGET_SECONDS,
        "meets_target": t_batched + t_project <= TARGET_SECONDS,
    }


def quadratic_weight_pairs(w2: list[float], d_model: int) -> int:
    """The de-duplication before this issue: each new label compared with every kept one."""
    from pipeline.core.weights import BASELINE, WeightPair, _parse

    pairs = [WeightPair(*BASELINE, "1", "0")]
    for b in w2:
        (v1, t1), (v2, t2) = _parse(1, d_model), _parse(b, d_model)
        pair = WeightPair(v1, v2, t1, t2)
        if all(p.label != pair.label for p in pairs):
            pairs.append(pair)
    return len(pairs)


def bench_validation(args) -> dict:
    from pipeline.core.weights import weight_pairs

    w2 = [float(x) for x in np.logspace(-2, 2, args.pairs)]
    t_linear, pairs = best_of(lambda: weight_pairs(1, w2, d_model=50), args.repeat)
    # quadratic: time a prefix of m pairs (m^2 / 2 comparisons) and scale by (P / m)^2
    m = min(args.pairs, 1500)
    start = time.perf_counter()
    quadratic_weight_pairs(w2[:m], 50)
    t_quadratic = (time.perf_counter() - start) * (args.pairs / m) ** 2
    return {
        "pairs": len(pairs) - 1,
        "seconds": {
            "weight_pairs (set of labels)": t_linear,
            f"quadratic de-duplication (from {m} pairs, extrapolated)": t_quadratic,
        },
        "speedup": t_quadratic / t_linear,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=10_000, help="weight pairs per sentence (default: %(default)s)")
    parser.add_argument("--dims", default="50", help="embedding dimensions (default: %(default)s)")
    parser.add_argument("--loop-pairs", type=int, default=300, help="pairs per sentence timed in the per-pair loop")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs after the warm-up (best is kept)")
    parser.add_argument("--out", default="reports/benchmarks/sweep.json", help="JSON results (default: %(default)s)")
    args = parser.parse_args(argv)
    import torch

    print(machine_line(torch))
    results = {"cpus": os.cpu_count(), "load_average_start": os.getloadavg()[0], "metrics": []}
    for d in (int(v) for v in args.dims.split(",") if v):
        result = bench_metrics(d, args)
        results["metrics"].append(result)
        print(
            f"\n== sweep metrics: {result['pairs']} pairs x {result['sentences']} sentences of "
            f"{result['n_words']} words, d={d}"
        )
        for name, seconds in result["seconds"].items():
            print(f"  {name:<42} {seconds:9.3f} s")
        print(
            f"  batched vs per-pair loop: {result['speedup_batched_vs_loop']:.0f}x faster; max |difference| "
            f"{result['max_abs_difference']:.1e} over {result['loop_sampled_pairs']} pairs; project + metrics "
            f"{'within' if result['meets_target'] else 'ABOVE'} the {TARGET_SECONDS:g} s target"
        )
    validation = bench_validation(args)
    results["validation"] = validation
    print(f"\n== weight-pair validation, {validation['pairs']} pairs")
    for name, seconds in validation["seconds"].items():
        print(f"  {name:<58} {seconds:9.4f} s")
    print(f"  {validation['speedup']:.0f}x faster")
    return finish(results, args.out)


if __name__ == "__main__":
    main()
