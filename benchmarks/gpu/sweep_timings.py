"""The sweep's projection timed at P weight pairs x 2 sentences of 11 words (d = 50, the embedded GloVe's):

  torch port (device)     benchmarks.sweep.torch_weighted_pca on the device: the core's algorithm (three Gram
                          matrices per sentence, one batched eigh, scikit-learn's signs) in torch
  batched SVD (torch)     torch.linalg.svd of every formed W1 E + W2 P on the same device, in chunks of 2,000 pairs
                          (benchmarks.encoding.torch_pca): the usual way, the reference of the ratios
  weighted_pca (CPU path) pipeline.core.projection.weighted_pca: the sweep's own projection, numpy on the CPU

The core's sweep is numpy on the CPU (the sweep stage imports no torch): only the torch port and the SVD run on the
device. The device's errors are against weighted_pca on the first pairs (at most --sweep-check): coordinates
relative to each frame's largest, explained variance ratios, and the components whose sign differs.
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.encoding import torch_pca
from benchmarks.gpu.budget import Budget
from benchmarks.gpu.measure import as_np, measure
from benchmarks.sweep import torch_weighted_pca
from pipeline.core import encoding as E
from pipeline.core.projection import weighted_pca

WORDS, SENTENCES, D = 11, 2, 50
PORT = "projection, torch port"
SVD = "projection, batched SVD (torch)"
CORE = "projection, weighted_pca (project, numpy)"
SVD_CHUNK = 2000
# Pairs per call of the torch port: its batched eigh asks CUDA for about 1.2 MB of workspace per pair (1,000,000 pairs
# asked for 1107.75 GiB at once on an H200), so 20,000 pairs take about 24 GiB, within an H100's memory.
PORT_CHUNK = 20_000


def inputs(pairs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """e, p (2, 11, 50): GloVe-like random vectors and sinusoidal rows (the second sentence's shuffled); w1, w2
    (pairs,) log-uniform in 1e-2 .. 1e2, the baseline (1, 0) first."""
    rng = np.random.default_rng(pairs)
    e = rng.normal(scale=0.4, size=(SENTENCES, WORDS, D))
    pe = E.sinusoidal_encoding(100, D, dtype=torch.float64).numpy()
    p = np.stack([pe[:WORDS], pe[rng.permutation(WORDS)]])
    w1, w2 = 10 ** rng.uniform(-2, 2, pairs), 10 ** rng.uniform(-2, 2, pairs)
    w1[0], w2[0] = 1.0, 0.0
    return e, p, w1, w2


def svd_projection(e: np.ndarray, p: np.ndarray, w1: np.ndarray, w2: np.ndarray, device: torch.device):
    """(S, P, n, 2) coordinates by torch's batched SVD of every formed matrix, chunk by chunk."""
    e_t, p_t = torch.as_tensor(e, device=device), torch.as_tensor(p, device=device)
    w1_t, w2_t = torch.as_tensor(w1, device=device), torch.as_tensor(w2, device=device)
    out = torch.empty(SENTENCES, len(w1), WORDS, 2, dtype=torch.float64, device=device)
    for s in range(SENTENCES):
        for j in range(0, len(w1), SVD_CHUNK):
            x = w1_t[j : j + SVD_CHUNK, None, None] * e_t[s] + w2_t[j : j + SVD_CHUNK, None, None] * p_t[s]
            out[s, j : j + SVD_CHUNK] = torch_pca(x)
    return out


def port_projection(e: np.ndarray, p: np.ndarray, w1: np.ndarray, w2: np.ndarray, device: torch.device):
    """The torch port's (S, P, n, 2) coordinates and (S, P, 2) explained ratios, PORT_CHUNK pairs at a time."""
    parts = [
        torch_weighted_pca(e, p, w1[j : j + PORT_CHUNK], w2[j : j + PORT_CHUNK], device=device)
        for j in range(0, len(w1), PORT_CHUNK)
    ]
    return torch.cat([c for c, _ in parts], dim=1), torch.cat([r for _, r in parts], dim=1)


def compare(coords, reference: np.ndarray, ratio=None, reference_ratio=None) -> dict[str, float]:
    """Largest coordinate difference relative to its frame's largest coordinate, explained-variance difference, and
    the number of components whose sign differs from the reference's."""
    check = reference.shape[1]
    got = as_np(coords[:, :check])
    scale = np.abs(reference).max(axis=(-2, -1), keepdims=True)
    flipped = ((got * reference).sum(axis=-2) < 0).sum()
    found = {"coords_rel": float((np.abs(got - reference) / scale).max()), "flipped_signs": float(flipped)}
    if ratio is not None:
        found["explained"] = float(np.abs(as_np(ratio[:, :check]) - reference_ratio).max())
    return found


def bench_pairs(pairs: int, device: torch.device, args, budget: Budget, keep: float) -> list[dict]:
    e, p, w1, w2 = inputs(pairs)
    check = min(pairs, args.sweep_check)
    want, want_ratio = weighted_pca(e, p, w1[:check], w2[:check])
    out: list[dict] = []
    common = {"rows": out, "budget": budget, "repeat": args.repeat, "keep": keep, "pairs": pairs}
    measure(
        method=PORT,
        device=device,
        kind="port",
        work=pairs,
        path="device",
        **common,
        fn=lambda: port_projection(e, p, w1, w2, device),
        errors=lambda result: compare(result[0], want, result[1], want_ratio),
    )
    measure(
        method=SVD,
        device=device,
        kind="svd",
        work=pairs,
        path="device",
        **common,
        fn=lambda: svd_projection(e, p, w1, w2, device),
        errors=lambda coords: compare(coords, want),
    )
    measure(
        method=CORE,
        device=torch.device("cpu"),
        kind="core",
        work=pairs,
        path="cpu path",
        **common,
        fn=lambda: weighted_pca(e, p, w1, w2),
    )
    seconds = {row["method"]: row["seconds"] for row in out if "seconds" in row}
    for row in out:
        if row["method"] == PORT and "seconds" in row:
            if SVD in seconds:
                row["x_reference"] = seconds[SVD] / row["seconds"]
            if CORE in seconds:
                row["x_cpu_path"] = seconds[CORE] / row["seconds"]
    return out
