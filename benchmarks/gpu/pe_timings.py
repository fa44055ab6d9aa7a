"""The encoding core timed at one size (n positions, d dimensions) on the device and on the CPU path, beside torch's
usual way on the same device:

  encoding float32          pipeline.core.encoding.sinusoidal_encoding (float64 angles, rounded once)
  encoding, float32 angles  the common formula, sin/cos of p * w formed in float32 (torch, same device)
  diagnostics               sinusoidal_diagnostics: norms and offset distances of the matrix, the closed-form
                            profiles, exact block means at --max-size
  full matrices float64     profile_matrices(sinusoidal_profiles(...)): the (n, n) dot-product and distance
  full matrices float32     matrices written from their profiles (their bytes / seconds: the write bandwidth)
  cdist + float32 matmul    torch.cdist(pe, pe) and pe @ pe.T: the usual alternative (the reference of the ratios)

Errors are max |value - float64 reference| (benchmarks.gpu.reference) over sampled rows.
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.gpu import reference as R
from benchmarks.gpu.budget import Budget
from benchmarks.gpu.measure import as_np, measure
from pipeline.core import encoding as E

BASE = 10000.0
MAX_OFFSET = 20
PE = "encoding float32 (project)"
PE_TORCH = "encoding, float32 angles (torch)"
DIAGNOSTICS = "diagnostics (project)"
FULL64 = "full matrices float64 (project)"
FULL32 = "full matrices float32 (project)"
CDIST = "cdist + float32 matmul (torch)"
# each project method's same-device reference for the ratios
REFERENCE = {PE: PE_TORCH, DIAGNOSTICS: CDIST, FULL64: CDIST, FULL32: CDIST}


def torch_float32_encoding(n: int, d: int, device: torch.device) -> torch.Tensor:
    """(n, d) interleaved encoding with the angles p * w_i formed in float32, as the notebook and most code do."""
    w = torch.pow(BASE, -torch.arange(0, d, 2, device=device, dtype=torch.float32) / d)
    angle = torch.arange(n, device=device, dtype=torch.float32)[:, None] * w[None, :]
    pe = torch.empty(n, d, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe


def sample_rows(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    return np.unique(np.r_[0, n - 1, rng.choice(n, min(n, count), replace=False)])


def bench_size(n: int, d: int, device: torch.device, args, budget: Budget, keep: float) -> list[dict]:
    """Every row at one size: the device's first, then the CPU path's (the same functions on the CPU)."""
    rng = np.random.default_rng(n + d)
    rows = sample_rows(n, 14, rng)
    index = torch.as_tensor(rows)
    prof = R.profiles(n, d, BASE)
    ref_pe = R.pe_rows(rows, d, BASE)
    ref_dot, ref_dist = R.matrix_rows(prof, rows)
    out: list[dict] = []

    def pe_err(pe) -> dict[str, float]:
        return {"encoding": float(np.abs(as_np(pe[index.to(pe.device)]) - ref_pe).max())}

    def matrix_err(mats) -> dict[str, float]:
        dot, dist = (m[index.to(m.device)] for m in mats)
        return {
            "dot": float(np.abs(as_np(dot) - ref_dot).max()),
            "distance": float(np.abs(as_np(dist) - ref_dist).max()),
        }

    def diag_err(diag) -> dict[str, float]:
        f, M = diag.factor, n // diag.factor
        blocks = sample_rows(M, 2, rng)
        want_dot, want_dist = R.block_rows(prof, blocks, f)
        K = min(MAX_OFFSET, n - 1)
        closed = np.sqrt(prof.dist2[1 : K + 1])
        errors = {
            "dot_blocks": float(np.abs(as_np(diag.dot_blocks)[blocks] - want_dot).max()),
            "distance_blocks": float(np.abs(as_np(diag.distance_blocks)[blocks] - want_dist).max()),
            "dot_profile": float(np.abs(as_np(diag.profiles.dot) - prof.dot).max()),
            "distance2_profile": float(np.abs(as_np(diag.profiles.dist2) - prof.dist2).max()),
            "norms": float(np.abs(as_np(diag.norms)[rows] - np.linalg.norm(ref_pe, axis=1)).max()),
        }
        if d % 2 == 0 and K:
            hi, lo = as_np(diag.offset_hi), as_np(diag.offset_lo)
            errors["offset_distances"] = float(max(np.abs(hi - closed).max(), np.abs(lo - closed).max()))
        return errors

    pe_dev = E.sinusoidal_encoding(n, d, BASE, device=device)
    for path, dev in (("device", device), ("cpu path", torch.device("cpu"))):
        pe = pe_dev if dev == device else pe_dev.cpu()
        tag = "" if path == "device" else "cpu:"
        common = {"rows": out, "budget": budget, "device": dev, "repeat": args.repeat, "keep": keep, "n": n, "d": d}
        common["path"] = path
        measure(
            method=PE,
            kind=tag + "pe",
            work=n * d,
            errors=pe_err,
            **common,
            fn=lambda dev=dev: E.sinusoidal_encoding(n, d, BASE, device=dev),
        )
        measure(
            method=PE_TORCH,
            kind=tag + "pe_torch",
            work=n * d,
            errors=pe_err,
            **common,
            fn=lambda dev=dev: torch_float32_encoding(n, d, dev),
        )
        measure(
            method=DIAGNOSTICS,
            kind=tag + "diagnostics",
            work=n * d,
            errors=diag_err,
            **common,
            fn=lambda pe=pe: E.sinusoidal_diagnostics(pe, BASE, MAX_OFFSET, args.max_size),
        )
        for method, dtype in ((FULL64, torch.float64), (FULL32, torch.float32)):
            written = 2 * n * n * torch.empty(0, dtype=dtype).element_size()  # the two results' bytes
            measure(
                method=method,
                kind=tag + "full",
                work=written,
                errors=matrix_err,
                bytes_written=written,
                **common,
                fn=lambda dev=dev, dtype=dtype: E.profile_matrices(E.sinusoidal_profiles(n, d, BASE, dev), dtype, dev),
            )
        measure(
            method=CDIST,
            kind=tag + "cdist",
            work=n * n * d,
            errors=matrix_err,
            **common,
            fn=lambda pe=pe: (pe @ pe.T, torch.cdist(pe, pe)),
        )
        del pe
    del pe_dev
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def ratios(rows: list[dict]) -> None:
    """Add to each row that ran: x_reference (its same-device reference's seconds / its own) and x_cpu_path (the
    CPU path's seconds for the same method and size / its own, device rows only)."""

    def key(row, method=None, path=None):
        return (row["n"], row["d"], method or row["method"], path or row["path"])

    seconds = {key(r): r["seconds"] for r in rows if "seconds" in r}
    for row in rows:
        if "seconds" not in row:
            continue
        ref = seconds.get(key(row, REFERENCE.get(row["method"], row["method"])))
        if row["method"] in REFERENCE and ref:
            row["x_reference"] = ref / row["seconds"]
        cpu = seconds.get(key(row, path="cpu path"))
        if row["path"] == "device" and cpu:
            row["x_cpu_path"] = cpu / row["seconds"]
