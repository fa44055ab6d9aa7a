"""The portable arithmetic earns its place: with last-bit noise in the kernels beneath it, every output keeps its
bytes; with noisy kernels in its place, the outputs it guards change, the same on every machine.

tests/test_machine_independence.py makes this CPU compute as an older one would, which moves only the bits that this
CPU's kernels move (on some CPUs none that reaches a file). Here the noise is injected the way another machine's
kernels differ from this one's, seeded, as a function of the values (splitmix64 of their bits), so that any call
order, forked figure workers included, draws the same:

  libm   sin, cos, exp, log, power... (numpy, math, torch): a hashed half of the results moved one ulp toward the
         exact value (in long double): the other double around it, which another libm may return; exact results and
         the powers every kernel computes with basic operations (x^2 = x * x, x^0.5 = sqrt x) stay
  BLAS   matrix products (numpy's and torch's functions, and the partial products inside portable.exact_matmul): the
         inner dimension permuted and summed in chunks, as another kernel or thread count adds
  sums   torch's sum and mean over permuted dims; softmax, norms, einsum, LAPACK beyond eigh: a hashed half of the
         non-integer results moved one ulp
  eigh   a hashed half of the input's lower triangle moved one ulp of its largest entry, as LAPACK's rounding on
         another BLAS moves its intermediate values

numpy's own sum and mean along an axis are not noised (pairwise summation in plain C, one order on every machine: the
portable module's premise), nor are +, -, *, /, sqrt (IEEE-754 rounds them correctly everywhere). The pipeline's calls
get the noise however they reach a kernel (np.sin, a function-level import, a tensor method or operator), other
libraries' calls (matplotlib's, numpy's and torch's own) do not; numpy's `@` operator cannot be intercepted, and no
pipeline module outside pipeline/core/portable.py writes it (a test below).

Three runs of every stage in this process (the default config, the real GloVe vectors, conftest.run_every_stage),
each against the suite's one run of every stage with no switch (conftest.reference_outputs):
  reference       the code as it is
  portable+noise  the noise in every plain kernel that the pipeline or the portable layer calls (`noise_kernels`):
                  every output keeps its bytes
  magnified       the same noise MAGNIFIED times larger: every number written keeps its bytes, however unlikely one
                  ulp is to cross its rounding boundary (the figures are the one-ulp run's)
  plain+noise     portable+noise with each portable function replaced by a plain kernel of another machine
                  (`plain_portable`: its own result moved by the noise; a product or sum by one ulp of the sum of its
                  terms' magnitudes, as a sum in another order rounds): exactly the outputs in PLAIN_CHANGES change
This machine's plain kernels are taken to be the portable functions themselves (each result one a plain kernel may
give), so no outcome depends on the CPU: removing a portable call where a number reaches a file lets the noise reach
it in the magnified run, or where one ulp moves a figure's pixel, in the portable+noise run; either fails on any
machine. PE_NOISE_SEEDS=1,2,3 runs other seeds (three runs each; PLAIN_CHANGES is asserted for seed 0).
docs/reliability.md ("Last-bit noise") holds the table of what changes and why.
"""

from __future__ import annotations

import ast
import functools
import importlib
import math
import os
import pkgutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import REPO, changed_outputs, output_hashes, run_every_stage
from pipeline.core import eigen, portable

SEEDS = tuple(int(seed) for seed in os.environ.get("PE_NOISE_SEEDS", "0").split(","))
# A magnifier: noise of 2^24 ulps (a relative 2e-9 to 4e-9) moves a number it reaches across its 12-digit rounding
# boundary near certainly (one not far below its file's magnitude floor), a float32 one with probability ~0.03
MAGNIFIED = 2**24
EXTENDED = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant  # x86-64: 63 bits; aarch64 Linux: 112

# ---------------------------------------------------------------- the noise


def _hash(y: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of each value's bits and the seed: bit 0 picks the values moved, bit 1 a direction."""
    bits = y.view(np.uint64) if y.dtype == np.float64 else y.view(np.uint32).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = bits + np.uint64((0x9E3779B97F4A7C15 * (seed + 1)) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _noise(y, seed: int, direction, scale=None, ulps: int = 1):
    """y (a float array or scalar) with a hashed half of its values moved `ulps` ulps of |scale| (default: of each
    value) in `direction` (-1, 0 or 1 each, or a function of the array giving them)."""
    a = np.asarray(y)
    if a.dtype not in (np.float32, np.float64) or a.size == 0:
        return y
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.nan_to_num(direction(a) if callable(direction) else direction).astype(np.int8)
        d = np.where((_hash(a, seed) & np.uint64(1)).astype(bool) & np.isfinite(a), d, 0)
        step = ulps * np.spacing(np.abs(a if scale is None else np.asarray(scale, dtype=a.dtype)))
        out = np.where(d != 0, (a + d * step).astype(a.dtype), a)
    return out if isinstance(y, np.ndarray) else type(y)(out)


def _either_way(a: np.ndarray, seed: int) -> np.ndarray:
    """A hashed direction, 0 for integers: a sum of integer-valued terms is exact in any order."""
    return np.where(a == np.rint(a), 0, np.where(_hash(a, seed) & np.uint64(2), 1, -1))


def faithful(y, exact, seed: int, ulps: int = 1):
    """libm's noise: a hashed half of y moved toward `exact` (long double); exact results stay. Without a long double
    wider than a double, a hashed direction and integer results stay."""
    if EXTENDED:
        return _noise(
            y, seed, lambda a: np.sign(np.asarray(exact, np.longdouble) - a.astype(np.longdouble)), None, ulps
        )
    return _noise(y, seed, lambda a: _either_way(a, seed), None, ulps)


def jitter(y, seed: int, scale=None, ulps: int = 1):
    """A sum's noise: a hashed half of the non-integer values of y moved either way, by ulps of |y| or of `scale`
    (the sum of the terms' magnitudes, which sets the rounding of a sum in another order)."""
    return _noise(y, seed, lambda a: _either_way(a, seed), scale, ulps)


def _numpy(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x


def _on_tensors(noise):
    """noise(y, ...) of numpy values applied to torch tensors too (float32 and float64), and to tuples of either."""

    def apply(y, *args):
        if isinstance(y, tuple):
            values = [apply(v, *args) for v in y]
            return type(y)(*values) if hasattr(y, "_fields") else tuple(values)
        if isinstance(y, torch.Tensor):
            if y.dtype not in (torch.float32, torch.float64):
                return y
            return torch.from_numpy(np.array(noise(_numpy(y), *(_numpy(a) for a in args)))).to(y.device)
        return noise(y, *args)

    return apply


# libm's functions by numpy's name (math's and torch's names map to them), evaluated in long double for the exact value
LIBM = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
    "arctan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "exp": np.exp, "exp2": np.exp2,
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "power": np.power,
    "float_power": np.float_power, "cbrt": np.cbrt,
}  # fmt: skip
ALIASES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2", "pow": "power"}
ALIASES |= {"__pow__": "power", "__rpow__": "power"}
BASIC_EXPONENTS = (0.0, 1.0, 2.0, -1.0, 0.5)
TORCH_LIBM = ("sin", "cos", "tan", "atan2", "tanh", "exp", "expm1", "log", "log2", "log10", "log1p", "pow")
MATH_LIBM = ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "exp", "expm1", "log")
MATH_LIBM += ("log2", "log10", "log1p", "pow", "cbrt", "exp2")


class Kernels:
    """Wrappers that put the noise of `seed` on a kernel's results, `ulps` ulps (1: another machine's kernels; more:
    a magnifier, MAGNIFIED)."""

    def __init__(self, seed: int, ulps: int = 1):
        self.seed, self.ulps = seed, ulps

    def libm(self, function, name: str):
        """`function` (numpy's, math's or torch's `name`, or a portable function computing it) with libm's noise."""
        reference, noise = LIBM[ALIASES.get(name, name)], _on_tensors(faithful)

        @functools.wraps(function)
        def noisy(*args, **kwargs):
            y = function(*args, **kwargs)
            exponent = _numpy(args[name != "__rpow__"]) if len(args) > 1 and "pow" in name else None
            if exponent is not None and np.ndim(exponent) == 0 and float(exponent) in BASIC_EXPONENTS:
                return y
            inputs = [np.asarray(_numpy(a), np.longdouble) for a in args]
            with np.errstate(all="ignore"):
                if name == "log" and len(inputs) == 2:  # math.log(x, base)
                    exact = np.log(inputs[0]) / np.log(inputs[1])
                else:
                    exact = reference(*(inputs[::-1] if name == "__rpow__" else inputs))
            return noise(y, exact, self.seed, self.ulps)

        return noisy

    def jittered(self, function, always: bool = True):
        """`function` with a sum's noise on its results (if `always`, else only when magnified)."""
        if not always and self.ulps == 1:
            return function
        noise = _on_tensors(jitter)
        return functools.wraps(function)(lambda *a, **kw: noise(function(*a, **kw), self.seed, None, self.ulps))

    def reordered(self, function):
        """A matrix product `function(a, b)` (numpy's or torch's) adding the inner dimension in another order:
        permuted, in up to three chunks summed from the last."""

        @functools.wraps(function)
        def reordered(a, b, *args, **kwargs):
            k = np.shape(a)[-1] if np.ndim(a) else 0
            if k < 2 or np.ndim(b) == 0 or args or kwargs:
                return function(a, b, *args, **kwargs)
            rng = np.random.default_rng([self.seed, k])
            order = rng.permutation(k)
            total = None
            for idx in np.split(order, np.sort(rng.choice(np.arange(1, k), size=min(2, k - 1), replace=False)))[::-1]:
                idx = torch.from_numpy(idx).to(a.device) if isinstance(a, torch.Tensor) else idx
                part = function(a[..., idx], b[idx] if np.ndim(b) == 1 else b[..., idx, :])
                total = part if total is None else total + part
            return total

        return reordered

    def reduction(self, function):
        """A torch reduction `function(x, dim, ...)` (sum, mean) over its dims permuted."""

        @functools.wraps(function)
        def reordered(x, *args, **kwargs):
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim == 0:
                return function(x, *args, **kwargs)
            dims = kwargs.get(
                "dim", kwargs.get("axis", args[0] if args and not isinstance(args[0], torch.dtype) else None)
            )
            for d in range(x.ndim) if dims is None else (dims,) if isinstance(dims, int) else dims:
                perm = np.random.default_rng([self.seed, x.shape[d]]).permutation(x.shape[d])
                x = x.index_select(d, torch.from_numpy(perm).to(x.device))
            return function(x, *args, **kwargs)

        return self.jittered(reordered, always=False)

    def eigh(self, function):
        """An eigh (numpy's, torch's, or pipeline.core.eigen's) of its input with a hashed half of its lower
        triangle moved by ulps of the matrix's largest entry."""

        def move(a):
            if not a.size:
                return a
            scale = np.broadcast_to(np.abs(a).max(axis=(-2, -1), keepdims=True), a.shape)
            moved = _noise(a, self.seed, np.where(_hash(a, self.seed) & np.uint64(2), 1, -1), scale, self.ulps)
            return np.where(np.tri(a.shape[-1], dtype=bool), moved, a)

        @functools.wraps(function)
        def perturbed(a, *args, **kwargs):
            if isinstance(a, torch.Tensor):
                return function(torch.from_numpy(move(_numpy(a).astype(np.float64))).to(a), *args, **kwargs)
            return function(move(np.asarray(a, dtype=np.float64)), *args, **kwargs)

        return perturbed


# ---------------------------------------------------------------- where the noise goes


def pipeline_modules() -> list[types.ModuleType]:
    """Every module of the pipeline package, imported (a forked worker imports none that the noise misses)."""
    import pipeline

    for info in pkgutil.walk_packages(pipeline.__path__, "pipeline."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    return [m for name, m in sorted(sys.modules.items()) if name == "pipeline" or name.startswith("pipeline.")]


def rebind(mp: pytest.MonkeyPatch, replacements: dict) -> None:
    """Every global of a pipeline module that is a key of `replacements` bound to its value."""
    by_id = {id(k): v for k, v in replacements.items()}
    for module in pipeline_modules():
        for name, value in list(vars(module).items()):
            if id(value) in by_id:
                mp.setattr(module, name, by_id[id(value)])


def _for_the_pipeline(plain, noisy):
    """`noisy` when a pipeline module calls, `plain` for every other caller (matplotlib, numpy and torch themselves)."""

    @functools.wraps(plain)
    def dispatch(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        return (noisy if caller == "pipeline" or caller.startswith("pipeline.") else plain)(*args, **kwargs)

    for name in ("outer", "reduce", "accumulate", "reduceat", "at"):  # a ufunc's methods (matplotlib: np.power.outer)
        if hasattr(plain, name):
            setattr(dispatch, name, getattr(plain, name))
    return dispatch


def noise_kernels(mp: pytest.MonkeyPatch, k: Kernels) -> None:
    """The noise in every plain kernel that the pipeline calls, however it reaches it (np.sin, a function-level
    import, a tensor method or operator): numpy's, math's and torch's functions and torch's tensor methods for the
    pipeline's calls, and the BLAS products inside portable.exact_matmul."""
    libm, jittered, reduction = k.libm, lambda f, name: k.jittered(f), lambda f, name: k.reduction(f)
    matmul, eigh = (lambda f, name: k.jittered(k.reordered(f), always=False)), lambda f, name: k.eigh(f)
    kernels = (
        (np, LIBM, libm),
        (np, ("matmul", "dot"), matmul),
        (np, ("einsum", "inner", "vdot", "tensordot"), jittered),
        (np.linalg, ("svd", "norm", "solve", "lstsq", "inv", "pinv", "qr", "eig"), jittered),
        (np.linalg, ("eigh", "eigvalsh"), eigh),
        (math, MATH_LIBM, libm),
        (torch, TORCH_LIBM, libm),
        (torch, ("matmul", "mm", "bmm"), matmul),
        (torch, ("sum", "mean"), reduction),
        (torch, ("einsum", "softmax", "logsumexp", "norm"), jittered),
        (torch.linalg, ("svd", "norm", "solve", "inv", "qr", "eig"), jittered),
        (torch.linalg, ("eigh",), eigh),
        (torch.Tensor, (*TORCH_LIBM, "__pow__", "__rpow__"), libm),
        (torch.Tensor, ("matmul", "__matmul__"), matmul),
        (torch.Tensor, ("sum", "mean"), reduction),
        (torch.Tensor, ("softmax", "logsumexp", "norm"), jittered),
    )
    replacements = {}
    for owner, names, noisy in kernels:
        for name in names:
            plain = getattr(owner, name)
            replacements[plain] = _for_the_pipeline(plain, noisy(plain, name))
            mp.setattr(owner, name, replacements[plain])
    rebind(mp, replacements)  # names imported from them (from math import log)
    blas, sum_products = k.reordered(lambda a, b: a @ b), portable._sum_products
    # the BLAS products inside exact_matmul and exact_band
    mp.setattr(portable, "_sum_products", lambda a_parts, b_parts, product: sum_products(a_parts, b_parts, blas))


def plain_portable(mp: pytest.MonkeyPatch, k: Kernels) -> None:
    """Each portable function, wherever the pipeline binds it, replaced by a plain kernel of another machine: its own
    result (what a plain kernel may give here) moved by the noise: sin, cos, exp, log and the correctly rounded scalars
    by libm's; exact_matmul, exact_band and tree_sum (of tensors: numpy's sum is portable) by one ulp of the sum of the terms'
    magnitudes; eigh of a moved input. What the portable module builds on them (tree_mean, box_muller,
    standard_normal, cr_powers, logspace, geomspace) follows."""
    sin_cos, tree_sum, exact_matmul, eigh = portable.sin_cos, portable.tree_sum, portable.exact_matmul, eigen.eigh
    exact_band = portable.exact_band
    noise, libm = _on_tensors(jitter), _on_tensors(faithful)

    def noisy_sin_cos(x):
        angle = np.asarray(_numpy(x), np.longdouble)
        return tuple(libm(y, LIBM[f](angle), k.seed, k.ulps) for y, f in zip(sin_cos(x), ("sin", "cos")))

    def noisy_tree_sum(x, axis: int = -1):
        total = tree_sum(x, axis)
        return noise(total, k.seed, tree_sum(abs(x), axis), k.ulps) if isinstance(x, torch.Tensor) else total

    def noisy_exact_matmul(a, b):
        return noise(exact_matmul(a, b), k.seed, exact_matmul(abs(a), abs(b)), k.ulps)

    def noisy_exact_band(x, width, chunk_elems):
        return noise(exact_band(x, width, chunk_elems), k.seed, exact_band(abs(x), width, chunk_elems), k.ulps)

    replacements = {
        portable.sin_cos: noisy_sin_cos,
        portable.exact_band: noisy_exact_band,
        portable.tree_sum: noisy_tree_sum,
    }
    replacements |= {portable.exact_matmul: noisy_exact_matmul, eigen.eigh: k.eigh(eigh)}
    replacements |= {portable.exp: k.libm(portable.exp, "exp"), portable.log: k.libm(portable.log, "log")}
    for name, function in (("pow", portable.cr_pow), ("log", portable.cr_log), ("log10", portable.cr_log10)):
        replacements[function] = k.libm(function, name)
    rebind(mp, replacements)


# ---------------------------------------------------------------- the runs


def run(root: Path, *, noise: int | None = None, plain: bool = False, ulps: int = 1) -> dict[str, str]:
    """Every stage into `root`, with the noise of seed `noise` (None: none), `ulps` ulps, in the plain kernels, and in
    the portable functions' place if `plain`; returns the outputs' hashes."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PE_PROJECT_ROOT", str(root))
        clear_caches()  # nothing computed by an earlier run in this process
        try:
            if noise is not None:
                eigen.eigh(np.eye(2), eigen._kernel())  # numba's ufunc registry built from numpy's own ufuncs
                noise_kernels(mp, Kernels(noise, ulps))
                if plain:
                    plain_portable(mp, Kernels(noise, ulps))
            run_every_stage(root)
        finally:
            clear_caches()  # nothing computed under the noise for a later test in this process
    return output_hashes(root)


def clear_caches() -> None:
    """Every functools cache of the pipeline's modules emptied."""
    for module in pipeline_modules():
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, reference_outputs):
    """run(...)'s outputs by its arguments, each run once; the reference (no noise) is the suite's one run of every
    stage with no switch (conftest.reference_outputs, in a process of its own: the bytes do not depend on which)."""
    done: dict[tuple, dict[str, str]] = {(None, False, 1): reference_outputs}

    def get(noise: int | None = None, plain: bool = False, ulps: int = 1) -> dict[str, str]:
        if (noise, plain, ulps) not in done:
            root = tmp_path_factory.mktemp("run") / "project"
            done[noise, plain, ulps] = run(root, noise=noise, plain=plain, ulps=ulps)
        return done[noise, plain, ulps]

    return get


# What the noise of seed 0 changes when the portable functions are noisy kernels (docs/reliability.md, "Last-bit
# noise", has every output's expected boundary crossings a run); the other outputs change in some seeds only
PLAIN_CHANGES = {
    "data/relative/rope.npz",  # RoPE's decay bounds: ~900 of its 99,841 values cross a 12-digit boundary a run
    "data/families/scalings.npz",  # the RoPE scalings' bounds: ~3.5 crossings a run
    "reports/figures/relative/rope_scalings.png",  # log10_values of its distances: a line's antialiasing, 6 seeds of 6
    "reports/figures/sweep/ratio_sweep_s1.png",  # log10_values of the ratio grid: 3 seeds of 6
    "reports/report.html",  # embeds every figure
}


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_portable_code_keeps_every_output_under_noise(seed, runs):
    """One ulp of noise in every plain kernel moves no output's bytes, figures included."""
    differ = sorted(changed_outputs(runs(noise=seed), runs()))
    assert not differ, f"seed {seed}: {len(differ)} outputs differ from the reference run: {differ}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_no_number_written_depends_on_a_plain_kernel(seed, runs):
    """Under magnified noise no number in a data file, JSON or CSV moves: none depends on a plain kernel, so removing a
    portable call where a number reaches a file fails here on any machine, however unlikely one ulp is to cross its
    rounding boundary. The figures (and the page that embeds them) are the one-ulp run's: a plain kernel may feed a
    figure where one ulp moves no pixel (pipeline.figures.drawing.log_axis)."""
    figures = {name for name in runs() if name.endswith(".png") or name == "reports/report.html"}
    differ = sorted(changed_outputs(runs(noise=seed, ulps=MAGNIFIED), runs()) - figures)
    assert not differ, f"seed {seed}: {len(differ)} outputs differ from the reference run: {differ}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_plain_code_under_noise_changes_the_outputs_the_portable_layer_guards(seed, runs):
    """With noisy kernels in the portable functions' place, the outputs they guard change: the same ones on every
    machine with a long double wider than a double (the noise's direction); elsewhere at least rope.npz."""
    differ = changed_outputs(runs(noise=seed, plain=True), runs())
    print(f"seed {seed}: plain code under noise changes {sorted(differ)}")
    if seed == 0 and EXTENDED:
        assert differ == PLAIN_CHANGES
    else:
        assert "data/relative/rope.npz" in differ  # hundreds of its values cross a rounding boundary a run


def test_the_noise_moves_plain_kernels_and_not_the_portable_functions(monkeypatch):
    """The noise can fail a run: plain kernels give other bits under it (as the pipeline's modules see them), each
    near their bits, while the portable functions give the same; and plain_portable does replace them."""
    rng = np.random.default_rng(0)
    x, a, b = rng.uniform(-10, 10, 2000), rng.normal(size=(40, 300)), rng.normal(size=(300, 30))
    t, m = torch.from_numpy(rng.normal(size=(50, 400))), np.cov(rng.normal(size=(8, 40)))
    kernels = (lambda v: np.sin(v), lambda v: np.exp(v), lambda v: np.matmul(a, b), lambda v: t.sum(dim=-1))
    functions = (lambda v: portable.sin_cos(v)[0], lambda v: portable.exp(v), lambda v: portable.exact_matmul(a, b))
    functions += (
        lambda v: portable.tree_sum(t),
        lambda v: eigen.eigh(m)[1],
        lambda v: portable.cr_powers(10.0, v[:20]),
    )
    plain = [np.asarray(f(x)) for f in kernels] + [np.linalg.eigh(m)[0]]
    before = [np.asarray(f(x)) for f in functions]
    noise_kernels(monkeypatch, Kernels(0))
    calls = "np.sin(x), np.exp(x), np.matmul(a, b), t.sum(dim=-1).numpy(), np.linalg.eigh(m)[0]"
    for where, noisy in (("tests", False), ("pipeline.core.any", True)):  # the calls of a pipeline module are noisy
        got = eval(calls, {"__name__": where, "np": np, "x": x, "a": a, "b": b, "t": t, "m": m})
        assert [not np.array_equal(g, want) for g, want in zip(got, plain)] == [noisy] * len(plain)
        assert all(np.allclose(g, want, rtol=1e-12, atol=1e-12) for g, want in zip(got, plain))
    assert all(np.array_equal(np.asarray(f(x)), want) for f, want in zip(functions, before))
    plain_portable(monkeypatch, Kernels(0))
    assert not any(np.array_equal(np.asarray(f(x)), want) for f, want in zip(functions, before))


def test_no_matrix_product_outside_the_reach_of_the_noise():
    """numpy's `@` operator is a BLAS call that no module global intercepts: outside pipeline/core/portable.py the
    pipeline writes products as portable.exact_matmul, or np.matmul / torch.matmul where the noise reaches them.
    pipeline/length/ trains its models in torch, byte-identical on one machine (docs/length-experiment.md)."""
    found = []
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        if name != "pipeline/core/portable.py" and not name.startswith("pipeline/length/"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{name}:{n.lineno}" for n in ast.walk(tree) if isinstance(getattr(n, "op", None), ast.MatMult)]
    assert not found, f"a @ b where tests/test_last_bit_noise.py cannot reach it: {found}"
