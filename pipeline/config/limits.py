"""Limits before exhaustion: what a config or a Hydra sweep would cost, estimated from measured constants, and
refused (before anything is allocated) when it exceeds the machine or a documented bound.

Memory estimates are peak RSS, each a stage process's baseline (its imports) plus what the stage holds at its peak:

    encode   345 MB + N (s d + 64) + max(32 K N, B)    the table (N x d, s bytes: encoding.dtype), eight
                                                           float64 vectors per position (norms, profiles), the
                                                           Gram band and its comparisons (four N x K float64);
             B = 18 f N (+ 8 d N for a learned table)      the elementwise block means of a learned table or an
                                                           odd d (f = ceil(N / max_matrix_size); an even-d
                                                           sinusoid needs none): knobs encoding.max_len,
                                                           encoding.max_offset, encoding.max_matrix_size
    sweep     80 MB + (P + 1 + m) n^2 16 + P S 6 kB        one batched PCA per sentence (each weighting's n x n
                                                           Gram matrix and eigenvectors) and what every pair keeps
                                                           per sentence (projections, metrics, their JSON): knobs
                                                           sweep.w1 / sweep.w2, sweep.ratios.points,
                                                           tokenizer.maxlen
    figures  min(S, max_sentences) x (per-sentence kinds   the per-sentence kinds of the figure set
             the set draws: P + 1 projections, a panels,   (pipeline.outputs.figure_plan); figures=none: 0
             a ratio_sweep)
    multirun jobs = the product of the overrides' sweep    counted from the command line before Hydra composes
             lengths; memory 345 MB + jobs x JOB_HELD;     anything (a range is not materialized); Hydra's
             time jobs x JOB_SECONDS[figure set]           sweeper keeps every job's configs to the end

N: encoding.max_len, d: d_model, K: encoding.max_offset, n: the longest sentence in words (as the tokenizer splits
it, cut at tokenizer.maxlen), S: sentences, P: weight pairs (the longer of the two lists), m: sweep.ratios.points.
The constants were measured as the peak RSS (ru_maxrss) of a process running the stage on a small GloVe store
(tests/test_limits.py measures two of them again). Memory is refused above MEMORY_SHARE of the machine's physical
memory, figures above MAX_FIGURES (about half a second each), a sweep above MAX_JOBS jobs or MAX_PAIRS weight pairs
typed in one override.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Sequence

from pipeline.base.errors import PipelineError

if TYPE_CHECKING:
    from pipeline.config.schema import Config

MEMORY_SHARE = 0.8
MAX_FIGURES = 2000
GB = 1e9

# The RSS of a stage process after its imports: encode (numpy, torch) at max_len=100 342 MB; the sweep (numpy only)
# 80 MB, fitted to its peak RSS at n = 100-400 words and 43-642 weightings (67-467 MB measured, the formula within
# -13 %..+28 %, closest for the large batches it exists to refuse); a Hydra job's process imports both.
ENCODE_BASE = 345e6
SWEEP_BASE = 80e6
# A Hydra job kept by the sweeper until the sweep ends (hydra.core.utils.JobReturn: the job's config and a copy of
# the Hydra config): 219 kB, the RSS of holding 200 deep copies of a composed config; its override list 170 B
# (BasicSweeper.split_arguments of range(0, 10**6): 169 B a job).
JOB_HELD = 220e3
# Seconds a job of a basic-launcher sweep takes per figure set, measured on this machine as (time of a 20-point
# sweep - time of a 1-point sweep) / 19 (6 points for `all`), glove=path (50-d), tracking=disabled, on 2 cores
# shared with three other sessions (load average 8): the README's 0.45 s a point (summary) is an idle machine's.
JOB_SECONDS = {"none": 1.6, "summary": 3.3, "all": 18.5}
# Beyond this, a multirun is refused whatever the memory: 100,000 jobs are about half a day at 0.45 s each and
# 22 GB of kept configs; a longer study is split into sweeps, or sweeps the weights inside one job.
MAX_JOBS = 100_000
# Items of a list override that are counted (commas) before Hydra parses it: composing a 10,000-item list takes
# 9 s of CPU (linear in the items: a 100,000-item list is 1.5 minutes, a 10-million-item one hours), and one job's
# sweep stage then keeps about 6 kB a pair per sentence.
MAX_PAIRS = 100_000
PAIR_KEYS = ("sweep.w1", "sweep.w2")


def machine_memory() -> int:
    """Physical memory of this machine in bytes (POSIX); 0 when unknown (then memory is not checked)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0


def _count(weights) -> int:
    return len(weights) if isinstance(weights, list) else 1


def pair_count(params: Config) -> int:
    """P: the configured weight pairs (a scalar broadcasts against a list)."""
    return max(_count(params.sweep.w1), _count(params.sweep.w2))


def longest_sentence(params: Config, sentences: Sequence[str]) -> int:
    """n: the most words of one sentence as the tokenizer splits it, at most tokenizer.maxlen."""
    from pipeline.inputs.tokenizer import text_to_word_sequence

    tok = params.tokenizer
    n = max((len(text_to_word_sequence(s, tok.filters, tok.lower, tok.split)) for s in sentences), default=0)
    return min(n, tok.maxlen) if tok.maxlen else n


def encode_estimate(params: Config) -> tuple[float, str]:
    """The encode stage's peak RSS in bytes and its formula with the numbers (module docstring)."""
    enc = params.encoding
    n, d, k = enc.max_len, enc.d_model or params.glove.dim, enc.max_offset
    size = 8 if enc.dtype == "float64" else 4
    f = -(-n // enc.max_matrix_size)
    learned = enc.name == "learned"
    elementwise = f > 1 and (learned or d % 2)
    blocks = 18 * f * n + (8 * d * n if learned else 0) if elementwise else 0
    needed = ENCODE_BASE + n * (size * d + 64) + max(32 * k * n, blocks)
    peak = (
        f"max(32 max_offset max_len, {blocks / GB:,.1f} GB of block means)" if elementwise else "32 max_offset max_len"
    )
    formula = f"{ENCODE_BASE / 1e6:.0f} MB + max_len x ({size} d + 64) + {peak} with max_len = {n:,}, d = {d}, "
    formula += f"max_offset = {k}" + (f", f = {f:,}" if elementwise else "")
    return needed, formula


def sweep_estimate(params: Config, sentences: Sequence[str]) -> tuple[float, str]:
    """The sweep stage's peak RSS in bytes and its formula with the numbers (module docstring)."""
    pairs, m, n = pair_count(params), params.sweep.ratios.points, longest_sentence(params, sentences)
    batch = pairs + 1 + m
    needed = SWEEP_BASE + batch * n * n * 16 + pairs * len(sentences) * 6e3
    formula = (
        f"{SWEEP_BASE / 1e6:.0f} MB + (pairs + 1 + ratios) x n^2 x 16 + pairs x sentences x 6 kB = "
        f"{batch:,} x {n:,}^2 x 16 + {pairs:,} x {len(sentences):,} x 6 kB (n: words of the longest sentence)"
    )
    return needed, formula


def estimates(params: Config, sentences: Sequence[str]) -> list[tuple[str, float, str, str]]:
    """(what, bytes, formula with the numbers, knobs) for each memory estimate of the module docstring."""
    return [
        (
            "the positional encoding",
            *encode_estimate(params),
            "lower encoding.max_len (or encoding.max_offset; encoding.max_matrix_size for a learned table or odd d)",
        ),
        (
            "the sweep's batched PCA",
            *sweep_estimate(params, sentences),
            "use fewer weight pairs (sweep.w1 / sweep.w2) or sweep.ratios.points, or shorter sentences "
            "(tokenizer.maxlen cuts them)",
        ),
    ]


def figure_count(params: Config, sentences: Sequence[str]) -> tuple[int, str]:
    """The per-sentence figures the configured figure set draws, and how they add up."""
    from pipeline.config.figure_sets import drawn_kinds, shown_sentences

    kinds = drawn_kinds(params.figures.name)
    per_kind = {"projection": pair_count(params) + 1, "panels": 1, "ratio_sweep": 1}  # + 1: the baseline pair
    drawn = {kind: count for kind, count in per_kind.items() if kind in kinds}
    shown = shown_sentences(len(sentences), params.figures.max_sentences)
    terms = " + ".join(f"{count:,} {kind}" for kind, count in drawn.items()) or "0"
    return shown * sum(drawn.values()), f"{shown} sentences x ({terms})"


def check_limits(params: Config, sentences: Sequence[str], memory: int | None = None) -> None:
    """Refuse a config whose memory estimate exceeds MEMORY_SHARE of `memory` (default: this machine's) or that
    would draw more than MAX_FIGURES per-sentence figures. Raises PipelineError naming the estimate and the knob."""
    memory = machine_memory() if memory is None else memory
    for what, needed, formula, knob in estimates(params, sentences):
        if memory and needed > MEMORY_SHARE * memory:
            raise PipelineError(
                f"this config needs about {needed / GB:,.1f} GB of memory for {what} ({formula}), "
                f"more than {MEMORY_SHARE:.0%} of this machine's {memory / GB:,.1f} GB: it would fail "
                f"or swap. Fix: {knob}."
            )
    figures, terms = figure_count(params, sentences)
    if figures > MAX_FIGURES:
        raise PipelineError(
            f"this config would draw about {figures:,} figures ({terms}), more than {MAX_FIGURES:,} (about half a "
            "second each). Fix: figures=summary or figures=none (a sweep's metrics need no figure per pair), lower "
            "figures.max_sentences, or use fewer weight pairs (sweep.w1 / sweep.w2); the ratio grid "
            "(sweep.ratios) covers many ratios without a figure each."
        )


# ---------------------------------------------------------------- before composing: the command line's overrides


def check_list_overrides(overrides: Sequence[str]) -> None:
    """Refuse a sweep.w1 / sweep.w2 list override of more than MAX_PAIRS items, counted by its commas before Hydra
    parses it (parsing and composing millions of items is itself the exhaustion)."""
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") in PAIR_KEYS and value.lstrip().startswith("["):
            items = value.count(",") + 1
            if items > MAX_PAIRS:
                raise PipelineError(
                    f"{key} lists about {items:,} weights, more than {MAX_PAIRS:,} weight pairs in one run (the "
                    f"sweep stage keeps about 6 kB a pair per sentence, and composing the list alone takes minutes). "
                    "Fix: use fewer values (the ratio grid sweep.ratios covers many ratios W2/W1 at once), or split "
                    "the pairs over several runs."
                )


def sweep_length(override) -> int:
    """The number of values of one parsed Hydra override: 1 for a plain value, the length of a choice or range
    sweep (a range counted, not materialized), the matches of a glob are not known here (counted as 1)."""
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep

    value = override.value()
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        return max(0, math.ceil((stop - start) / step)) if step else 0
    return 1


def multirun_jobs(overrides: Sequence[str]) -> tuple[int, list[str]]:
    """The jobs of a basic-sweeper multirun of these command-line overrides (the product of the sweep lengths),
    and the figure sets its jobs use, parsed with Hydra's public override parser (no composition)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    jobs, figure_sets = 1, []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        jobs *= sweep_length(override)
        if override.get_key_element() == "figures":
            figure_sets = (
                [str(v) for v in override.sweep_string_iterator()]
                if override.is_sweep_override()
                else [str(override.value())]
            )
    return jobs, figure_sets


def check_multirun(overrides: Sequence[str], memory: int | None = None, default_figures: str = "all") -> None:
    """Refuse a multirun of more than MAX_JOBS jobs, or whose kept jobs would exceed MEMORY_SHARE of `memory`,
    before Hydra expands or composes it; the message names the job count, the estimates and the fix."""
    check_list_overrides(overrides)
    jobs, figure_sets = multirun_jobs(overrides)
    memory = machine_memory() if memory is None else memory
    needed = ENCODE_BASE + jobs * JOB_HELD
    too_big = memory and needed > MEMORY_SHARE * memory
    if jobs <= MAX_JOBS and not too_big:
        return
    seconds = jobs * max(JOB_SECONDS.get(name, JOB_SECONDS["all"]) for name in figure_sets or [default_figures])
    beyond = [f"the limit of {MAX_JOBS:,} jobs"] if jobs > MAX_JOBS else []
    beyond += [f"{MEMORY_SHARE:.0%} of this machine's {memory / GB:,.1f} GB"] if too_big else []
    raise PipelineError(
        f"this multirun has {jobs:,} jobs: about {_duration(seconds)} and {needed / GB:,.1f} GB of memory for the "
        f"jobs Hydra's sweeper keeps ({JOB_HELD / 1e3:.0f} kB each), beyond {' and '.join(beyond)}. Fix: split the "
        "sweep into several multiruns, use fewer values, or give the weights as lists in ONE job (e.g. "
        "'sweep.w2=[1,2,4,8]' without -m, or sweep.ratios for a dense grid of W2/W1): the sweep stage computes "
        "every pair of one job in one batch."
    )


def _duration(seconds: float) -> str:
    """`seconds` as the largest unit that keeps it readable (s, minutes, hours, days)."""
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds:,.0f} s"


# ---------------------------------------------------------------- the length experiment (pipeline/length/)

# CPU seconds of one training step on one core: LENGTH_STEP_OVERHEAD (Python and torch's dispatch of a step's ~200
# kernels, measured with a model too small for its arithmetic to count: 2.6 ms a step) plus its floating-point
# operations at LENGTH_FLOPS per second (fitted to the documented model, 21 ms a step: 0.85 GFLOP). Measured on this
# 2-core machine with one torch thread a run; a step's CPU time varies by about 10% with the machine's load.
LENGTH_STEP_OVERHEAD = 2.5e-3
LENGTH_FLOPS = 45e9
# Peak RSS: the process that trains (torch, numpy, matplotlib, MLflow imported) and each forked worker's own pages
# (the run's weights, optimizer state and activations, and what torch allocates once a worker computes)
LENGTH_PROCESS = 600e6
LENGTH_WORKER = 150e6
# A CPU run estimated above this many hours is refused (fewer steps, seeds or families, or a GPU: length.device)
LENGTH_MAX_HOURS = 24.0


def length_flops(cfg) -> tuple[float, float]:
    """(one training step, one run's evaluation) in floating-point operations of the length config `cfg`: per token
    2 x (12 d^2 per layer for the projections and the MLP + 2 T d for the scores and their values + 2 d V for the
    head) forward, three times that with the backward pass; T = 2 n positions for strings of n symbols (the mean n
    of training: (L + 1) / 2)."""
    d, layers, vocab = cfg.model.d_model, cfg.model.layers, cfg.symbols + 1
    width = cfg.model.mlp

    def forward(positions: float) -> float:  # per token
        return 2 * (layers * ((4 + 2 * width) * d * d + 2 * positions * d) + d * vocab)

    mean_positions = cfg.train_length + 1  # 2 x (L + 1) / 2
    step = 3 * forward(mean_positions) * cfg.train.batch * mean_positions
    test = cfg.test_factor * cfg.train_length
    evaluation = sum(forward(2 * n) * cfg.eval_batch * 2 * n for n in range(1, test + 1))
    return step, evaluation


def length_estimate(cfg, workers: int) -> tuple[float, float, str]:
    """(wall seconds on the CPU, peak bytes, the sums with their numbers) of the length config `cfg` trained by
    `workers` processes: every run's steps and evaluation, shared by the workers."""
    runs = len(cfg.tasks) * len(cfg.families) * len(cfg.seeds)
    step, evaluation = length_flops(cfg)
    per_run = cfg.train.steps * (LENGTH_STEP_OVERHEAD + step / LENGTH_FLOPS) + evaluation / LENGTH_FLOPS
    at_once = max(1, min(workers, runs))
    seconds = per_run * -(-runs // at_once)
    peak = LENGTH_PROCESS + (at_once if at_once > 1 else 0) * LENGTH_WORKER
    formula = (
        f"{runs} run(s) ({len(cfg.tasks)} tasks x {len(cfg.families)} families x {len(cfg.seeds)} seeds) of "
        f"{cfg.train.steps:,} steps at {1e3 * (LENGTH_STEP_OVERHEAD + step / LENGTH_FLOPS):.1f} ms and an evaluation "
        f"of {evaluation / LENGTH_FLOPS:.1f} s, {at_once} at a time; {LENGTH_PROCESS / 1e6:.0f} MB + {at_once} x "
        f"{LENGTH_WORKER / 1e6:.0f} MB"
    )
    return seconds, peak, formula


def check_length(cfg, workers: int, on_cpu: bool = True, memory: int | None = None) -> tuple[float, float, str]:
    """Refuse a length config whose memory estimate exceeds MEMORY_SHARE of `memory` (default: this machine's) or, on
    the CPU, whose time estimate exceeds LENGTH_MAX_HOURS; returns the estimate (`length_estimate`)."""
    seconds, peak, formula = length_estimate(cfg, workers)
    memory = machine_memory() if memory is None else memory
    if memory and peak > MEMORY_SHARE * memory:
        raise PipelineError(
            f"this length experiment needs about {peak / GB:,.1f} GB of memory ({formula}), more than "
            f"{MEMORY_SHARE:.0%} of this machine's {memory / GB:,.1f} GB. Fix: fewer workers (length.workers)."
        )
    if on_cpu and seconds > LENGTH_MAX_HOURS * 3600:
        raise PipelineError(
            f"this length experiment would take about {_duration(seconds)} on this machine's CPU ({formula}), more "
            f"than {LENGTH_MAX_HOURS:.0f} hours. Fix: fewer steps (length.train.steps), seeds, families or tasks, a "
            "smaller model (length.model), or a GPU (length.device=cuda)."
        )
    return seconds, peak, formula


def check_length_multirun(overrides: Sequence[str], memory: int | None = None) -> None:
    """Refuse a multirun of `python -m pipeline.length` of more than MAX_JOBS jobs, or whose kept jobs would exceed
    MEMORY_SHARE of `memory`, before Hydra expands it (each job's own runs are checked by check_length)."""
    jobs, _ = multirun_jobs(overrides)
    memory = machine_memory() if memory is None else memory
    needed = LENGTH_PROCESS + jobs * JOB_HELD
    if jobs > MAX_JOBS or (memory and needed > MEMORY_SHARE * memory):
        raise PipelineError(
            f"this multirun has {jobs:,} jobs: {needed / GB:,.1f} GB of memory for the jobs Hydra's sweeper keeps "
            f"({JOB_HELD / 1e3:.0f} kB each); at most {MAX_JOBS:,} jobs within {MEMORY_SHARE:.0%} of this machine's "
            "memory. Fix: sweep lists in fewer jobs (a job trains every seed and family of its own lists, e.g. "
            "'length.seeds=[0,1,2]'), or split the sweep."
        )
