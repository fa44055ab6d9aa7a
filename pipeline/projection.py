"""Batched PCA on the device, oriented as scikit-learn orients it, and the disparity between projections."""
from __future__ import annotations

import torch


def pca_project(x: torch.Tensor, n_components: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """PCA of every matrix in a batch, as `sklearn.decomposition.PCA(n_components).fit_transform`.

    x: (batch, n_samples, n_features). Returns (coords (batch, n_samples, k), explained_variance_ratio (batch, k)).
    Signs follow scikit-learn (>= 1.5): in each component the entry of largest magnitude is positive.
    Computed in float64 (float32 on MPS), whatever the input dtype.
    """
    if x.ndim != 3:
        raise ValueError(f"expected (batch, n_samples, n_features), got shape {tuple(x.shape)}")
    k = n_components
    if k > min(x.shape[1], x.shape[2]):
        raise ValueError(f"n_components={k} needs at least {k} samples and features, got {tuple(x.shape[1:])}")
    work = torch.float32 if x.device.type == "mps" else torch.float64
    centered = x.to(work) - x.to(work).mean(dim=1, keepdim=True)
    _, s, vt = torch.linalg.svd(centered, full_matrices=False)      # vt: (batch, r, n_features)
    components = vt[:, :k, :]
    pivot = components.abs().argmax(dim=2, keepdim=True)             # (batch, k, 1)
    signs = torch.sign(torch.gather(components, 2, pivot))
    signs[signs == 0] = 1.0
    components = components * signs
    coords = centered @ components.transpose(1, 2)                   # (batch, n_samples, k)
    variance = s.square()
    total = variance.sum(dim=1, keepdim=True)
    ratio = torch.where(total > 0, variance[:, :k] / total.clamp_min(torch.finfo(work).tiny), torch.zeros_like(variance[:, :k]))
    return coords, ratio


def procrustes_disparity(reference, other) -> float:
    """scipy.spatial.procrustes disparity in [0, 1]: 0 when `other` is `reference` up to shift, scale,
    rotation and reflection; 1 when nothing of its shape is left. Both (n_points, 2)."""
    import numpy as np
    from scipy.spatial import procrustes

    reference, other = np.asarray(reference, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if not (np.ptp(reference, axis=0).any() and np.ptp(other, axis=0).any()):
        return float("nan")  # a projection collapsed to one point has no shape to compare
    return float(procrustes(reference, other)[2])
