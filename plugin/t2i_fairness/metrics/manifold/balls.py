"""Which generated image lies in which real ball: the membership matrix that bootstraps and
diagnostics resample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from t2i_fairness.metrics.manifold.exact import _U64
from t2i_fairness.metrics.manifold.inputs import (
    Dedupe,
    _as_features,
    _check_dedupe,
    _check_finite,
    _check_same_dim,
)
from t2i_fairness.metrics.manifold.scores import ReferenceManifold, dedupe_index



def ball_membership(real: Any, radii: Any, fake: Any, *, block_elements: int = 2**24) -> np.ndarray:
    """bool (n_fake, n_real): ``d(i, j) < radii[j]`` on exact float64 distances.

    Example:
        >>> ball_membership(np.array([[0.0], [10.0]]), np.array([1.0, 2.0]), np.array([[0.5], [9.0], [5.0]])).tolist()
        [[True, False], [False, True], [False, False]]
    """
    r = np.asarray(real, dtype=np.float64)
    f = np.asarray(fake, dtype=np.float64)
    rad = np.asarray(radii, dtype=np.float64)
    if r.ndim != 2 or f.ndim != 2 or r.shape[1] != f.shape[1]:
        raise ValueError(f"real and fake must be 2-D with the same width, got {r.shape} and {f.shape}")
    if rad.shape != (r.shape[0],):
        raise ValueError(f"radii must have shape ({r.shape[0]},), one per real row, got {rad.shape}")
    for name, a in (("real", r), ("fake", f), ("radii", rad)):
        if not np.isfinite(a).all():
            raise ValueError(f"{name} has NaN or inf values; pass only rows with features")
    out = np.zeros((f.shape[0], r.shape[0]), dtype=bool)
    if out.size == 0:
        return out
    dim = r.shape[1]
    gamma = 8.0 * (dim + 4) * _U64  # >= 3 gamma_dim: norms and the dot product, any summation order
    slack = 2.0 * (dim + 4) * _U64  # exact-difference distance vs the true one
    r_sq = np.einsum("ij,ij->i", r, r)
    f_sq = np.einsum("ij,ij->i", f, f)
    step = max(1, block_elements // max(1, r.shape[0]))
    for start in range(0, f.shape[0], step):
        stop = min(f.shape[0], start + step)
        q = f_sq[start:stop, None] + r_sq[None, :] - 2.0 * (f[start:stop] @ r.T)
        err = gamma * (f_sq[start:stop, None] + r_sq[None, :]) + 1e-300
        hi = np.sqrt(q + err) * (1 + slack)
        lo = np.sqrt(np.maximum(q - err, 0.0)) * (1 - slack)
        sure_in = hi < rad[None, :]
        sure_out = lo >= rad[None, :]
        out[start:stop] = sure_in
        li, lj = np.nonzero(~(sure_in | sure_out))
        if li.size:
            d = np.sqrt(np.square(f[start + li] - r[lj]).sum(axis=1))
            out[start + li, lj] = d < rad[lj]
    return out


def pair_distances(real: Any, fake: Any, *, block_elements: int = 2**24) -> np.ndarray:
    """float64 (n_fake, n_real) distances from exact coordinate differences."""
    r = np.asarray(real, dtype=np.float64)
    f = np.asarray(fake, dtype=np.float64)
    if r.ndim != 2 or f.ndim != 2 or r.shape[1] != f.shape[1]:
        raise ValueError(f"real and fake must be 2-D with the same width, got {r.shape} and {f.shape}")
    for name, a in (("real", r), ("fake", f)):
        if not np.isfinite(a).all():
            raise ValueError(f"{name} has NaN or inf values; pass only rows with features")
    out = np.zeros((f.shape[0], r.shape[0]), dtype=np.float64)
    step = max(1, block_elements // max(1, r.shape[0] * max(1, r.shape[1])))
    for start in range(0, f.shape[0], step):
        block = f[start:start + step]
        out[start:start + len(block)] = np.sqrt(np.square(block[:, None, :] - r[None, :, :]).sum(axis=2))
    return out


@dataclass(frozen=True)
class Membership:
    """Which kept generated rows lie in which real k-NN balls.

    Attributes:
        inside: bool ``(n_kept, n_real)``.
        kept: indices of the generated rows kept by the dedupe, in order.
    """

    inside: np.ndarray
    kept: np.ndarray

    @property
    def n_fake(self) -> int:
        return int(self.inside.shape[0])

    @property
    def n_real(self) -> int:
        return int(self.inside.shape[1])

    @property
    def precision(self) -> float:
        return self.precision_of(slice(None))

    @property
    def coverage(self) -> float:
        return self.coverage_of(slice(None))

    def precision_of(self, idx: Any) -> float:
        rows = self.inside[idx]
        return float(rows.any(axis=1).mean()) if rows.shape[0] else float("nan")

    def coverage_of(self, idx: Any) -> float:
        rows = self.inside[idx]
        return float(rows.any(axis=0).mean()) if rows.shape[1] else float("nan")


def membership(manifold: "ReferenceManifold", fake_features: Any, *, dedupe: Dedupe = "none",
               group: str | None = None) -> Membership:
    """The ball membership of generated rows in a reference manifold, after their ``dedupe``."""
    mode = _check_dedupe(dedupe)
    fake = _as_features(fake_features, "fake_features", group)
    _check_same_dim(manifold.features, fake, group)
    _check_finite(fake, "fake_features", group)
    kept = dedupe_index(fake, mode)
    inside = ball_membership(manifold.features, manifold.radii, fake[kept])
    return Membership(inside, kept)
