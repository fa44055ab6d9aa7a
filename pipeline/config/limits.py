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
    sweep     80 MB + min(P + 1 + m, 2e9 / n^3) n^2 16     one batched PCA per sentence (each weighting's n x n
              + P S 6 kB (+ 150 MB when (P + 1 + m) n^3    Gram matrix and eigenvectors) and what every pair keeps
              exceeds eigen.INTERPRETED_WORK)              per sentence (projections, metrics, their JSON); numba
                                                           and the compiled eigensolver beyond small work: knobs
                                                           sweep.w1 / sweep.w2, sweep.ratios.points,
                                                           tokenizer.maxlen
    figures  min(S, max_sentences) x (per-sentence kinds   the per-sentence kinds of the figure set
             the set draws: P + 1 projections, a panels,   (pipeline.figures.labels); figures=none: 0
             a ratio_sweep)
    multirun jobs = the product of the overrides' sweep    counted from the command line before Hydra composes
             lengths; memory 345 MB + jobs x JOB_HELD;     anything (a range is not materialized); Hydra's
             time jobs x JOB_SECONDS[figure set]           sweeper keeps every job's configs to the end

Time estimates, in CPU seconds, for the parts whose cost grows with the square of a size, or with sizes that
multiply:

    block means    N^2 (2.45e-8 + 5e-11 d)      a learned table's f x f block means (its Gram matrix and distances,
                   N^2 1.43e-8                   every pair of positions), or an odd-d sinusoid's distances
    figures        2.1e-3 A sum(n_s) over the    drawing each word and placing its label, A the axes with word
                   sentences with figures        labels per sentence: P + 1 projections, min(P + 1, 15) panels

Each is refused above MAX_SECONDS (measured on a 2-core machine: a faster one takes less, never more than a few
times less), naming the estimate and the knob.

N: encoding.max_len, d: d_model, K: encoding.max_offset, n: the longest sentence in words (as the tokenizer splits
it, cut at tokenizer.maxlen), S: sentences, P: weight pairs (the longer of the two lists), m: sweep.ratios.points.
The constants were measured as the peak RSS (ru_maxrss) of a process running the stage on a small GloVe store
(tests/test_limits.py measures two of them again). Memory is refused above MEMORY_SHARE of the machine's physical
memory, figures above MAX_FIGURES (about half a second each), a sweep above MAX_JOBS jobs or MAX_PAIRS weight pairs
in one list, typed in an override or written in a file of conf/ (`check_conf_lists`, before anything composes).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from pipeline.base.errors import PipelineError

if TYPE_CHECKING:
    from pipeline.config.schema import Config

MEMORY_SHARE = 0.8
MAX_FIGURES = 2000
GB = 1e9
MAX_SECONDS = 300  # CPU seconds of one such part (block means, figure labels)
# CPU seconds per pair of positions of the block means (the generic path: learned tables), and of an odd-d sinusoid's
# distances; fitted to measurements (docs/benchmarks-measurements.md#limits)
BLOCK_MEANS_PAIR_S, BLOCK_MEANS_PAIR_DIM_S, ODD_D_PAIR_S = 2.45e-8, 5e-11, 1.43e-8
# CPU seconds per word of an axes with word labels (docs/benchmarks-measurements.md#limits)
LABEL_S = 2.1e-3
# CPU seconds of the sweep per sentence of n words and weighting: 1, n^2 and n^3 terms (its metrics, the eigensolver
# of its PCA; docs/benchmarks-measurements.md#limits); work estimated above LONG_S is announced before it starts
SWEEP_S, LONG_S = (1e-4, 2e-7, 5e-9), 30.0

# Measured (docs/benchmarks-measurements.md#limits): the RSS of the encode and sweep stage processes after their
# imports (a Hydra job's process imports both); numba's and the compiled eigensolver's, when the sweep's eigen work
# exceeds pipeline.core.eigen.INTERPRETED_WORK; a job Hydra's sweeper keeps to the sweep's end; the seconds a
# basic-launcher job takes per figure set (upper estimates)
ENCODE_BASE, SWEEP_BASE, SWEEP_COMPILED, JOB_HELD = 345e6, 80e6, 150e6, 220e3
JOB_SECONDS = {"none": 1.6, "summary": 3.3, "all": 18.5}
# Beyond this, a multirun is refused whatever the memory (its time and kept configs: docs/benchmarks-measurements.md
# #limits): split it into sweeps, or sweep the weights inside one job.
MAX_JOBS = 100_000
# Items of a list (counted by commas before Hydra parses an override): composing and a job's sweep stage grow
# linearly in them (docs/benchmarks-measurements.md#limits).
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


def word_counts(params: Config, sentences: Sequence[str]) -> list[int]:
    """The words of each sentence as the tokenizer splits it, at most tokenizer.maxlen."""
    from pipeline.inputs.tokenizer import word_sequence

    tok = params.tokenizer
    return [min(n, tok.maxlen or n) for n in (len(word_sequence(s, tok)) for s in sentences)]


def longest_sentence(params: Config, sentences: Sequence[str]) -> int:
    """n: the most words of one sentence as the tokenizer splits it, at most tokenizer.maxlen."""
    return max(word_counts(params, sentences), default=0)


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
    from pipeline.core.eigen import INTERPRETED_WORK, PROJECTION_WORK

    batch = pairs + 1 + m
    at_once = min(batch, max(1, PROJECTION_WORK // max(1, n) ** 3))  # the weightings projected together
    compiled = SWEEP_COMPILED if batch * n**3 > INTERPRETED_WORK else 0.0
    needed = SWEEP_BASE + compiled + at_once * n * n * 16 + pairs * len(sentences) * 6e3
    eigensolver = f" + {compiled / 1e6:.0f} MB (the compiled eigensolver)" if compiled else ""
    return needed, (
        f"{SWEEP_BASE / 1e6:.0f} MB{eigensolver} + min(pairs + 1 + ratios, {PROJECTION_WORK:,} / n^3) x n^2 x 16 + "
        f"pairs x sentences x 6 kB = {at_once:,} x {n:,}^2 x 16 + {pairs:,} x {len(sentences):,} x 6 kB (n: the longest "
        "sentence's words)"
    )


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


def block_means_seconds(params: Config) -> tuple[float, str]:
    """CPU seconds of the encode stage's O(N^2) block means (0 when it has none) and the formula with the numbers."""
    enc = params.encoding
    n, d = enc.max_len, enc.d_model or params.glove.dim
    if enc.name != "learned" and d % 2 == 0:
        return 0.0, "none: an even-d sinusoid's blocks come from its closed form"
    if enc.name == "learned":
        per_pair = BLOCK_MEANS_PAIR_S + BLOCK_MEANS_PAIR_DIM_S * d
        return (
            n * n * per_pair,
            f"max_len^2 x ({BLOCK_MEANS_PAIR_S:g} + {BLOCK_MEANS_PAIR_DIM_S:g} d) s = {n:,}^2 x {per_pair:.3g} s",
        )
    return n * n * ODD_D_PAIR_S, f"max_len^2 x {ODD_D_PAIR_S:g} s (odd d = {d}) = {n:,}^2 x {ODD_D_PAIR_S:g} s"


def label_seconds(params: Config, sentences: Sequence[str]) -> tuple[float, str]:
    """CPU seconds of placing the word labels of the per-sentence figures, and the formula with the numbers."""
    from pipeline.config.figure_sets import drawn_kinds, shown_sentences

    kinds, pairs = drawn_kinds(params.figures.name), pair_count(params) + 1  # + 1: the baseline pair
    axes = (pairs if "projection" in kinds else 0) + (min(pairs, 15) if "panels" in kinds else 0)
    shown = sentences[: shown_sentences(len(sentences), params.figures.max_sentences)]
    lengths = word_counts(params, shown)
    seconds = LABEL_S * axes * sum(lengths)
    return seconds, (
        f"{LABEL_S:g} s x {axes} labelled axes per sentence x {sum(lengths):,} words in the {len(lengths)} sentences "
        "with figures"
    )


def sweep_seconds(params: Config, lengths: Sequence[int]) -> float:
    """CPU seconds of the sweep stage for sentences of `lengths` words (as tokenized): per sentence and weighting,
    SWEEP_S[0] + SWEEP_S[1] n^2 + SWEEP_S[2] n^3 (its metrics, its PCA's eigensolver). Above LONG_S, it says so
    before the work starts: how long, and what shortens it."""
    batch = pair_count(params) + 2 + params.sweep.ratios.points  # + the baseline and the Transformer's scaling
    seconds = batch * sum(SWEEP_S[0] + SWEEP_S[1] * n * n + SWEEP_S[2] * n**3 for n in lengths)
    if seconds > LONG_S:
        logging.getLogger("pipeline").warning(
            f"sweep: about {_duration(seconds)} of CPU to come ({len(lengths):,} sentence(s) of up to "
            f"{max(lengths, default=0):,} words x {batch} weightings; measured on 2 cores). Shorter: tokenizer.maxlen "
            "(it cuts long sentences), fewer sentences, sweep.ratios.points or weight pairs."
        )
    return seconds


def time_estimates(params: Config, sentences: Sequence[str]) -> list[tuple[str, float, str, str]]:
    """(what, CPU seconds, formula with the numbers, knobs) for each time estimate of the module docstring."""
    return [
        (
            "the encoding's block means",
            *block_means_seconds(params),
            "lower encoding.max_len (the block means cover every pair of positions), or use encoding=sinusoidal "
            "with an even d (closed forms, no pair by pair work)",
        ),
        (
            "the word labels of the per-sentence figures",
            *label_seconds(params, sentences),
            "figures=none (or figures.max_sentences lower, fewer weight pairs), or shorter sentences (tokenizer.maxlen "
            "cuts them)",
        ),
    ]


def check_limits(params: Config, sentences: Sequence[str], memory: int | None = None) -> None:
    """Refuse a config whose memory estimate exceeds MEMORY_SHARE of `memory` (default: this machine's), that would
    draw more than MAX_FIGURES per-sentence figures, or one of whose quadratic parts would take more than MAX_SECONDS
    of CPU. Raises PipelineError naming the estimate and the knob."""
    memory = machine_memory() if memory is None else memory
    for what, needed, formula, knob in estimates(params, sentences):
        if memory and needed > MEMORY_SHARE * memory:
            raise PipelineError(
                f"this config needs about {needed / GB:,.1f} GB of memory for {what} ({formula}), "
                f"more than {MEMORY_SHARE:.0%} of this machine's {memory / GB:,.1f} GB: it would fail "
                f"or swap. Fix: {knob}."
            )
    for what, seconds, formula, knob in time_estimates(params, sentences):
        if seconds > MAX_SECONDS:
            raise PipelineError(
                f"this config needs about {_duration(seconds)} of CPU for {what} ({formula}), more than the bound of "
                f"{_duration(MAX_SECONDS)} (measured on 2 cores). Fix: {knob}."
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
# and the files of conf/


def check_conf_lists(conf_dir: Path) -> None:
    """Refuse a file of conf/ with a list of more than MAX_PAIRS items, or aliases (`*name`) that expand it by more
    than MAX_PAIRS values, before Hydra composes (and expands) it: `check_list_overrides` for what the command line
    does not show (docs/benchmarks-measurements.md#files-and-parsing). Only a file large enough for such a list, or
    with an alias, is parsed, by libyaml's composer, which keeps an alias as one shared node."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in sorted(conf_dir.rglob("*.yaml")):
        data = path.read_bytes()
        if len(data) <= 2 * MAX_PAIRS and b"*" not in data:  # an item takes two bytes at least ("1,")
            continue
        try:
            tree = yaml.compose(data, Loader=loader)
        except yaml.YAMLError:
            continue  # Hydra reports it, with its own message
        sizes, long = {}, []
        expanded = _expanded(tree, "", sizes, long) if tree is not None else 0
        for key, items in long:
            raise PipelineError(
                f"{path} lists {items:,} items at {key}, more than {MAX_PAIRS:,} in one list (composing it alone "
                "takes minutes, and the sweep stage keeps about 6 kB a weight pair per sentence). Fix: use fewer "
                "values (the ratio grid sweep.ratios covers many ratios W2/W1 at once), or split them over several "
                "runs."
            )
        if expanded - len(sizes) > MAX_PAIRS:
            raise PipelineError(
                f"{path}: its aliases (*name) expand its {len(sizes):,} values to {expanded:,}, more than "
                f"{MAX_PAIRS:,} beyond those written (composing expands every alias: hours and all the memory). Fix: "
                "write the values out, or use fewer aliases."
            )


def _expanded(node, key: str, sizes: dict, long: list) -> int:
    """How many values a YAML node holds with its aliases expanded, each shared node counted once (`sizes`: by node);
    (dotted key, length) of each list of more than MAX_PAIRS items into `long`."""
    import yaml

    if id(node) not in sizes:
        size, value = 1, node.value
        if isinstance(node, yaml.MappingNode):
            size += sum(_expanded(v, f"{key}.{k.value}" if key else str(k.value), sizes, long) for k, v in value)
        elif isinstance(node, yaml.SequenceNode):
            long += [(key or "the top level", len(value))] if len(value) > MAX_PAIRS else []
            size += sum(_expanded(v, f"{key}[{i}]", sizes, long) for i, v in enumerate(value))
        sizes[id(node)] = size
    return sizes[id(node)]


def check_list_overrides(overrides: Sequence[str]) -> None:
    """Refuse a sweep.w1 / sweep.w2 list override of more than MAX_PAIRS items, counted by its commas before Hydra
    parses it (parsing and composing millions of items is itself the exhaustion), and an unquoted URL with credentials
    in its query (Hydra's grammar refuses its `=` before the schema, which refuses the others, could name the key)."""
    from pipeline.config.schema import NETRC_FIX, TRACKING_FIX, refuse_credentials

    for override in overrides:
        key, _, value = override.partition("=")
        if "://" in value and "=" in value and value[:1] not in "'\"[":
            fix = TRACKING_FIX if key.lstrip("+~").startswith("tracking.") else NETRC_FIX
            refuse_credentials(key.lstrip("+~"), value, fix)
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
# kernels) plus its floating-point operations at LENGTH_FLOPS per second, both fitted to measured steps
# (docs/benchmarks-measurements.md#limits).
LENGTH_STEP_OVERHEAD = 2.5e-3
LENGTH_FLOPS = 45e9
# Peak RSS: the process that trains (torch, numpy, matplotlib, MLflow imported) and each forked worker's own pages
# (the run's weights, optimizer state and activations, and what torch allocates once a worker computes)
LENGTH_PROCESS = 600e6
LENGTH_WORKER = 150e6
# A CPU run estimated above this many hours is refused (fewer steps, seeds or families, or a GPU: length.device)
LENGTH_MAX_HOURS = 24.0


def length_flops(cfg) -> tuple[float, float, float]:
    """(one training step, one run's evaluation, one validation) in floating-point operations of the length config
    `cfg`: per token 2 x (12 d^2 per layer for the projections and the MLP + 2 T d for the scores and their values +
    2 d V for the head) forward, three times that with the backward pass; T = 2 n positions for strings of n symbols
    (the mean n of training: (L + 1) / 2)."""
    d, layers, vocab = cfg.model.d_model, cfg.model.layers, cfg.symbols + 1
    width = cfg.model.mlp

    def forward(positions: float) -> float:  # per token
        return 2 * (layers * ((4 + 2 * width) * d * d + 2 * positions * d) + d * vocab)

    def lengths(longest: int, batch: int) -> float:
        return sum(forward(2 * n) * batch * 2 * n for n in range(1, longest + 1))

    mean_positions = cfg.train_length + 1  # 2 x (L + 1) / 2
    step = 3 * forward(mean_positions) * cfg.train.batch * mean_positions
    evaluation = lengths(cfg.test_factor * cfg.train_length, cfg.eval_batch)
    return step, evaluation, lengths(cfg.train_length, cfg.train.validation_batch)


def length_estimate(cfg, workers: int) -> tuple[float, float, str]:
    """(wall seconds on the CPU, peak bytes, the sums with their numbers) of the length config `cfg` trained by
    `workers` processes, every run to the cap (the most it takes): the search's runs and the seeds' (CPU seconds, one
    core a run, with their validations) and the evaluations (each run's, and each RoPE run's extensions), shared by
    the workers."""
    grid = len(cfg.tasks) * len(cfg.families)
    runs = grid * (len(cfg.seeds) + (len(cfg.train.lrs) if len(cfg.train.lrs) > 1 else 0))
    evaluations = grid * len(cfg.seeds) + len(cfg.tasks) * len(cfg.seeds) * ("rope" in cfg.families) * len(
        cfg.rope.extend
    ) * len(cfg.rope.extend_factors)
    step, evaluation, validation = length_flops(cfg)
    step_seconds = LENGTH_STEP_OVERHEAD + (step + validation / cfg.train.validate_every) / LENGTH_FLOPS
    total = runs * cfg.train.steps * step_seconds + evaluations * evaluation / LENGTH_FLOPS
    at_once = max(1, min(workers, runs))
    seconds = total / at_once
    peak = LENGTH_PROCESS + (at_once if at_once > 1 else 0) * LENGTH_WORKER
    formula = (
        f"{runs} run(s) ({len(cfg.tasks)} tasks x {len(cfg.families)} families x {len(cfg.seeds)} seeds, and the "
        f"search's) of at most {cfg.train.steps:,} steps at {1e3 * step_seconds:.1f} ms and {evaluations} "
        f"evaluation(s) of {evaluation / LENGTH_FLOPS:.1f} s of CPU each, {total:,.0f} CPU-s in all, {at_once} at a "
        f"time: the start, the figure and MLflow come on top; {LENGTH_PROCESS / 1e6:.0f} MB + {at_once} x "
        f"{LENGTH_WORKER / 1e6:.0f} MB"
    )
    return seconds, peak, formula


def check_length(cfg, workers: int, on_cpu: bool = True, memory: int | None = None) -> tuple[float, float, str]:
    """Refuse a length config whose memory estimate exceeds MEMORY_SHARE of `memory` (default: this machine's) or, on
    the CPU, whose time estimate exceeds LENGTH_MAX_HOURS; logs and returns the estimate (`length_estimate`)."""
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
    wall = f"about {_duration(seconds)} of wall time on idle CPU cores and " if on_cpu else ""
    logging.getLogger("pipeline").info("length: %s%.1f GB at most (%s)", wall, peak / GB, formula)
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
