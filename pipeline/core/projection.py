"""Batched PCA on the device, oriented as scikit-learn orients it, and the disparity between projections.

`pca_project`: batched SVD of given matrices (any shapes). `weighted_pca`: the sweep's W1 E + W2 P for
every weight pair and sentence from three n x n Gram matrices per sentence and one batched eigh.
"""

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
    _, s, vt = torch.linalg.svd(centered, full_matrices=False)  # vt: (batch, r, n_features)
    components = vt[:, :k, :]
    pivot = components.abs().argmax(dim=2, keepdim=True)  # (batch, k, 1)
    signs = torch.sign(torch.gather(components, 2, pivot))
    signs[signs == 0] = 1.0
    components = components * signs
    coords = centered @ components.transpose(1, 2)  # (batch, n_samples, k)
    variance = s.square()
    total = variance.sum(dim=1, keepdim=True)
    ratio = torch.where(
        total > 0, variance[:, :k] / total.clamp_min(torch.finfo(work).tiny), torch.zeros_like(variance[:, :k])
    )
    return coords, ratio


def weighted_pca(
    embeddings: torch.Tensor, encodings: torch.Tensor, w1, w2, lengths=None, n_components: int = 2
) -> tuple[torch.Tensor, torch.Tensor]:
    """PCA of X[s, j] = w1[j] * embeddings[s] + w2[j] * encodings[s] for every sentence s and weight pair j,
    as `sklearn.decomposition.PCA(n_components).fit_transform(X[s, j][:lengths[s]])`, signs included.

    embeddings, encodings: (S, n, d), sentence s using its first lengths[s] rows (the rest is padding), or
    (n, d) for one sentence. w1, w2: (P,) sequences or tensors. Returns coords (S, P, n, k) (zero on padding
    rows) and explained_variance_ratio (S, P, k) in float64 (float32 on MPS) on the inputs' device; for
    (n, d) inputs the S axis is dropped.

    No X is formed: its centred Gram matrix is w1^2 Gee + w1 w2 (Gep + Gep^T) + w2^2 Gpp, so three n x n
    products per sentence and one batched eigh of (S P, n, n) give every projection: coords = U sqrt(lambda).
    Signs follow scikit-learn (>= 1.5, svd_flip on the components): the entry of largest magnitude of each
    component V_c = X^T U_c / s_c is made positive, V_c computed as w1 (E^T U_c) + w2 (P^T U_c).
    """
    single = embeddings.ndim == 2
    e, p = (embeddings[None], encodings[None]) if single else (embeddings, encodings)
    if e.ndim != 3 or e.shape != p.shape:
        raise ValueError(
            f"embeddings {tuple(embeddings.shape)} and encodings {tuple(encodings.shape)} must both be "
            "(sentences, n, d) or (n, d) of the same shape"
        )
    device = e.device
    work = torch.float32 if device.type == "mps" else torch.float64
    e, p = e.to(work), p.to(device, work)
    S, n, d = e.shape
    w1 = torch.as_tensor(w1, dtype=work).reshape(-1).to(device)
    w2 = torch.as_tensor(w2, dtype=work).reshape(-1).to(device)
    if w1.shape != w2.shape:
        raise ValueError(f"w1 ({w1.numel()}) and w2 ({w2.numel()}) must have one value per weight pair")
    lengths = torch.full((S,), n, device=device) if lengths is None else torch.as_tensor(lengths).to(device)
    k = n_components
    if lengths.shape != (S,) or int(lengths.min()) < 1 or int(lengths.max()) > n:
        raise ValueError(f"lengths must hold one value in 1..{n} per sentence, got {lengths.tolist()}")
    if not 1 <= k <= min(int(lengths.min()), d):
        raise ValueError(
            f"n_components={k} needs at least {k} samples and features, got lengths {lengths.tolist()} and d={d}"
        )

    mask = (torch.arange(n, device=device)[None, :] < lengths[:, None]).to(work)[..., None]  # (S, n, 1)
    count = lengths.to(work)[:, None, None]
    e_c = (e - (e * mask).sum(dim=1, keepdim=True) / count) * mask
    p_c = (p - (p * mask).sum(dim=1, keepdim=True) / count) * mask
    g_ep = e_c @ p_c.transpose(1, 2)
    blocks = torch.stack([e_c @ e_c.transpose(1, 2), g_ep + g_ep.transpose(1, 2), p_c @ p_c.transpose(1, 2)], 1)
    coef = torch.stack([w1 * w1, w1 * w2, w2 * w2], dim=1)  # (P, 3)
    S, P = blocks.shape[0], coef.shape[0]
    gram = (coef @ blocks.reshape(S, 3, n * n)).reshape(S, P, n, n)  # every pair's Gram
    total = coef @ torch.diagonal(blocks, dim1=-2, dim2=-1).sum(-1)[..., None]  # (S, P, 1): (n-1) * variance
    evals, evecs = torch.linalg.eigh(gram)  # ascending
    lam = evals[..., -k:].flip(-1).clamp_min(0.0)  # (S, P, k)
    u = evecs[..., -k:].flip(-1)  # (S, P, n, k)

    features = torch.cat([e_c, p_c], dim=1)  # (S, 2n, d)
    sign = torch.empty_like(lam)
    chunk = max(1, 2**22 // (S * k * d))
    for j0 in range(0, P, chunk):
        j1 = min(P, j0 + chunk)
        uj = u[:, j0:j1]
        weighted = torch.cat([w1[j0:j1, None, None] * uj, w2[j0:j1, None, None] * uj], dim=2)  # (S, p, 2n, k)
        v = torch.einsum("spmk,smd->spkd", weighted, features)  # s_c * component c
        sj = torch.sign(torch.gather(v, -1, v.abs().argmax(dim=-1, keepdim=True)))[..., 0]
        sign[:, j0:j1] = torch.where(sj == 0, 1.0, sj)
    coords = u * (lam.sqrt() * sign)[:, :, None, :] * mask[:, None]
    ratio = torch.where(total > 0, lam / total.clamp_min(torch.finfo(work).tiny), 0.0)
    return (coords[0], ratio[0]) if single else (coords, ratio)


def procrustes_disparity(reference, other) -> float:
    """scipy.spatial.procrustes disparity in [0, 1]: 0 when `other` is `reference` up to shift, scale,
    rotation and reflection; 1 when nothing of its shape is left. Both (n_points, 2)."""
    import numpy as np
    from scipy.spatial import procrustes

    reference, other = np.asarray(reference, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if not (np.ptp(reference, axis=0).any() and np.ptp(other, axis=0).any()):
        return float("nan")  # a projection collapsed to one point has no shape to compare
    return float(procrustes(reference, other)[2])
