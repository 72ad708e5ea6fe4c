"""Precision, recall, density and coverage of a generated feature set against a real one.

Membership is strict, ``d(i, j) < r_j`` with ``r_j`` the distance of real point ``j`` to its k-th
nearest other real point (``rf_i`` likewise for fake points)::

    precision = mean over fake i of  [exists real j: d(i, j) < r_j]
    recall    = mean over real j of  [exists fake i: d(i, j) < rf_i]
    density   = mean over fake i of  #{real j: d(i, j) < r_j} / k
    coverage  = mean over real j of  [exists fake i: d(i, j) < r_j]

the ``prdc`` package's definitions, decided exactly on float64 distances (docs/manifold.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from t2i_fairness.metrics.manifold.exact import _Frame, _Options, _Space, _cross, _ieee_matmul, _radii
from t2i_fairness.metrics.manifold.inputs import (
    DEFAULT_NEAREST_K,
    Dedupe,
    _as_features,
    _check_dedupe,
    _check_finite,
    _check_group_size,
    _check_nearest_k,
    _check_radii,
    _check_same_dim,
    _dedupe,
    _in,
    _readonly,
)


_NPZ_FORMAT = 1


@dataclass(frozen=True, eq=False)
class ReferenceManifold:
    """A reference feature set with its k-NN radii: build once per group, cache, reuse for every model.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> ref = ReferenceManifold.build(rng.normal(size=(50, 8)), nearest_k=3)
        >>> ref.radii.shape, sorted(precision_coverage(ref, rng.normal(size=(40, 8))))
        ((50,), ['coverage', 'precision'])
    """

    features: np.ndarray
    radii: np.ndarray
    nearest_k: int

    def __post_init__(self) -> None:
        k = _check_nearest_k(self.nearest_k)
        feats = _as_features(self.features, "features")
        _check_finite(feats, "features", None)
        _check_group_size(feats, "features", k + 2, k, None, None)
        radii = _check_radii(self.radii, feats.shape[0], "radii", None)
        object.__setattr__(self, "features", _readonly(feats))
        object.__setattr__(self, "radii", _readonly(radii))
        object.__setattr__(self, "nearest_k", k)

    @classmethod
    def build(
        cls,
        features: Any,
        nearest_k: int = DEFAULT_NEAREST_K,
        *,
        dedupe: Dedupe = "none",
        device: str | torch.device | None = None,
        chunk_size: int | None = None,
        group: str | None = None,
    ) -> "ReferenceManifold":
        """Deduplicate ``features`` as asked (:func:`deduplicate`) and compute their radii.

        Args:
            device: torch device of the distances; ``None`` picks CUDA when available.
            chunk_size: rows per block (memory ``chunk_size x n``); ``None`` picks a size.
            group: name of the reference group, quoted in error messages.
        """
        k = _check_nearest_k(nearest_k)
        mode = _check_dedupe(dedupe)
        opts = _Options.make(device, chunk_size)
        feats = _as_features(features, "features", group)
        _check_finite(feats, "features", group)
        feats = _dedupe(feats, mode)
        _check_group_size(feats, "features", k + 2, k, group, mode)
        with _ieee_matmul():
            radii = _radii(feats, k, opts)
        return cls(feats, radii, k)

    def to_npz(self, path: str | os.PathLike[str]) -> None:
        """Write ``features``, ``radii`` and ``nearest_k`` to ``path`` atomically."""
        from t2i_fairness.base.files import atomic_write_bytes

        atomic_write_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        """The ``.npz`` file :meth:`to_npz` writes, as bytes (for a cache entry)."""
        import io

        buf = io.BytesIO()
        np.savez(buf, features=self.features, radii=self.radii, nearest_k=np.int64(self.nearest_k),
                 format_version=np.int64(_NPZ_FORMAT))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> "ReferenceManifold":
        """Read what :meth:`to_bytes` wrote; ``name`` is quoted in errors."""
        import io

        return cls._from_npz(io.BytesIO(data), name)

    @classmethod
    def from_npz(cls, path: str | os.PathLike[str]) -> "ReferenceManifold":
        """Read a manifold written by :meth:`to_npz`."""
        return cls._from_npz(os.fspath(path), os.fspath(path))

    @classmethod
    def _from_npz(cls, source, name: str) -> "ReferenceManifold":
        with np.load(source, allow_pickle=False) as data:
            missing = sorted({"features", "radii", "nearest_k", "format_version"} - set(data.files))
            if missing:
                raise ValueError(
                    f"{name!r} is not a ReferenceManifold file: missing arrays {missing}"
                )
            version = int(data["format_version"])
            if version != _NPZ_FORMAT:
                raise ValueError(
                    f"{name!r} has format_version {version}, expected {_NPZ_FORMAT}"
                )
            return cls(data["features"], data["radii"], int(data["nearest_k"]))


def deduplicate(features: Any, dedupe: Dedupe = "drop_all") -> np.ndarray:
    """Remove exactly repeated rows, keeping order: ``"keep_one"``, ``"drop_all"`` (DIG In's) or ``"none"``.

    Example:
        >>> x = np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0], [4.0, 5.0]])
        >>> deduplicate(x, "keep_one").tolist(), deduplicate(x, "drop_all").tolist()
        ([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], [[2.0, 3.0], [4.0, 5.0]])
    """
    mode = _check_dedupe(dedupe)
    return _dedupe(_as_features(features, "features"), mode)


def real_radii(
    real_features: Any,
    nearest_k: int = DEFAULT_NEAREST_K,
    *,
    device: str | torch.device | None = None,
    chunk_size: int | None = None,
    group: str | None = None,
) -> np.ndarray:
    """Distance from every row to its ``nearest_k``-th nearest other row (``prdc``'s radius), exact.

    Example:
        >>> real_radii(np.array([[0.0], [1.0], [3.0], [7.0]]), nearest_k=1).tolist()
        [1.0, 1.0, 2.0, 4.0]
    """
    k = _check_nearest_k(nearest_k)
    opts = _Options.make(device, chunk_size)
    feats = _as_features(real_features, "real_features", group)
    _check_finite(feats, "real_features", group)
    _check_group_size(feats, "real_features", k + 2, k, group, None)
    with _ieee_matmul():
        return _radii(feats, k, opts)


def prdc(
    real_features: Any,
    fake_features: Any,
    nearest_k: int = DEFAULT_NEAREST_K,
    *,
    dedupe: Dedupe = "none",
    device: str | torch.device | None = None,
    chunk_size: int | None = None,
    group: str | None = None,
) -> dict[str, float]:
    """Precision, recall, density and coverage, equal to ``prdc.compute_prdc`` on float64 features.

    Args:
        nearest_k: k of the radii (both sets need ``k + 2`` rows).
        dedupe: ``"none"`` (the ``prdc`` package's), ``"keep_one"`` or ``"drop_all"``, per set.
        chunk_size: rows per block (memory ``chunk_size x n``); never changes the result.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> real, fake = rng.normal(size=(200, 16)), rng.normal(size=(150, 16))
        >>> sorted(prdc(real, fake, nearest_k=5)), prdc(real, real, nearest_k=5)["precision"]
        (['coverage', 'density', 'precision', 'recall'], 1.0)
    """
    k = _check_nearest_k(nearest_k)
    mode = _check_dedupe(dedupe)
    opts = _Options.make(device, chunk_size)
    real = _as_features(real_features, "real_features", group)
    fake = _as_features(fake_features, "fake_features", group)
    _check_same_dim(real, fake, group)
    _check_finite(real, "real_features", group)
    _check_finite(fake, "fake_features", group)
    real, fake = _dedupe(real, mode), _dedupe(fake, mode)
    _check_group_size(real, "real_features", k + 2, k, group, mode)
    _check_group_size(fake, "fake_features", k + 2, k, group, mode)
    with _ieee_matmul():
        space = _Space(_Frame.make(real, fake), opts, real=real, fake=fake)
        fake_r = _radii(fake, k, opts, space, "fake")
        real_r = _radii(real, k, opts, space, "real")
        stats = _cross(space, real_r, fake_r, want_counts=True)
    return {
        "precision": float(np.mean(stats.fake_counts > 0)),
        "recall": float(np.mean(stats.real_recalled)),
        "density": float((1.0 / float(k)) * np.mean(stats.fake_counts)),
        "coverage": float(np.mean(stats.real_covered)),
    }


def precision_coverage(
    real_features: Any,
    fake_features: Any,
    nearest_k: int | None = None,
    *,
    real_radii: Any = None,
    dedupe: Dedupe = "none",
    device: str | torch.device | None = None,
    chunk_size: int | None = None,
    group: str | None = None,
) -> dict[str, float]:
    """Precision and coverage only (DIG In's realism and diversity), the same numbers as :func:`prdc`.

    Args:
        real_features: ``(n_real, dim)`` array/tensor, or a :class:`ReferenceManifold`.
        real_radii: precomputed ``(n_real,)`` radii, taken as given.
    """
    mode = _check_dedupe(dedupe)
    opts = _Options.make(device, chunk_size)
    if isinstance(real_features, ReferenceManifold):
        manifold = real_features
        if real_radii is not None:
            raise ValueError(
                f"real_radii must be None when real_features is a ReferenceManifold{_in(group)}: "
                "the manifold carries its own radii"
            )
        if nearest_k is not None and _check_nearest_k(nearest_k) != manifold.nearest_k:
            raise ValueError(
                f"nearest_k={nearest_k} differs from the manifold's nearest_k="
                f"{manifold.nearest_k}{_in(group)}; rebuild the manifold or pass nearest_k=None"
            )
        real, radii = manifold.features, manifold.radii
        fake = _as_features(fake_features, "fake_features", group)
        _check_same_dim(real, fake, group)
    else:
        k = _check_nearest_k(DEFAULT_NEAREST_K if nearest_k is None else nearest_k)
        real = _as_features(real_features, "real_features", group)
        fake = _as_features(fake_features, "fake_features", group)
        _check_same_dim(real, fake, group)
        _check_finite(real, "real_features", group)
        if real_radii is None:
            real = _dedupe(real, mode)
            _check_group_size(real, "real_features", k + 2, k, group, mode)
            radii = None
        else:
            radii = _check_radii(real_radii, real.shape[0], "real_radii", group)
            _check_group_size(real, "real_features", 1, None, group, None)
    _check_finite(fake, "fake_features", group)
    fake = _dedupe(fake, mode)
    _check_group_size(fake, "fake_features", 1, None, group, mode)
    with _ieee_matmul():
        space = _Space(_Frame.make(real, fake), opts, real=real, fake=fake)
        if radii is None:
            radii = _radii(real, k, opts, space, "real")
        stats = _cross(space, radii, None, want_counts=False)
    return {
        "precision": float(np.mean(stats.fake_counts > 0)),
        "coverage": float(np.mean(stats.real_covered)),
    }


def dedupe_index(features: Any, dedupe: str = "drop_all", groups: Any = None) -> np.ndarray:
    """Row indices :func:`deduplicate` keeps; with ``groups``, ``keep_one`` drops copies whose labels differ (DIG In's)."""
    if dedupe not in ("none", "keep_one", "drop_all"):
        raise ValueError(f"dedupe must be one of ('none', 'keep_one', 'drop_all'), got {dedupe!r}")
    x = np.asarray(features)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (n_images, dim), got shape {x.shape}")
    if groups is not None and len(groups) != x.shape[0]:
        raise ValueError(f"groups has {len(groups)} labels for {x.shape[0]} feature rows")
    if dedupe == "none" or x.shape[0] < 2:
        return np.arange(x.shape[0])
    key = np.ascontiguousarray(x + x.dtype.type(0.0))  # -0.0 == 0.0, as the manifold module
    rows = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True, return_counts=True)
    if dedupe == "drop_all":
        return np.sort(first[counts == 1])
    if groups is None:
        return np.sort(first)
    labels = np.asarray([str(g) for g in groups], dtype=object)
    inverse = np.asarray(inverse).ravel()
    mixed = np.zeros(first.size, bool)
    for u in np.flatnonzero(counts > 1):
        mixed[u] = len(set(labels[inverse == u])) > 1
    return np.sort(first[~mixed])
