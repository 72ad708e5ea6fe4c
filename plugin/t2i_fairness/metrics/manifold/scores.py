"""Precision, recall, density and coverage of a generated feature set against a real one, and the
reference manifold (real features with their k-NN radii) they are measured against.
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

__all__ = [
    "ReferenceManifold",
    "dedupe_index",
    "deduplicate",
    "prdc",
    "precision_coverage",
    "real_radii",
]

_NPZ_FORMAT = 1


@dataclass(frozen=True, eq=False)
class ReferenceManifold:
    """A reference feature set with the radii of its k-nearest-neighbour balls, for reuse.

    Building the radii is the expensive, model-independent half of precision and coverage:
    build it once per reference group, cache it with :meth:`to_npz`, and pass it to
    :func:`precision_coverage` for every model and run.

    Attributes:
        features: ``(n, dim)`` real features (float32 or float64), read-only.
        radii: ``(n,)`` float64 distance of each row to its ``nearest_k``-th nearest other row.
        nearest_k: the k the radii were computed with.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> ref = ReferenceManifold.build(rng.normal(size=(50, 8)), nearest_k=3)
        >>> ref.radii.shape, ref.nearest_k
        ((50,), 3)
        >>> scores = precision_coverage(ref, rng.normal(size=(40, 8)))
        >>> sorted(scores)
        ['coverage', 'precision']
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
        """Deduplicate ``features`` as asked and compute their radii.

        Args:
            features: ``(n, dim)`` numpy array or torch tensor of real features.
            nearest_k: k of the k-th nearest neighbour defining each radius.
            dedupe: ``"none"``, ``"keep_one"`` or ``"drop_all"``, see :func:`deduplicate`.
                The stored features are the deduplicated ones.
            device: torch device for the distance computation; ``None`` picks CUDA when available.
            chunk_size: rows per block (memory ``chunk_size x n``); ``None`` picks a size.
            group: name of the reference group, quoted in error messages.

        Raises:
            ValueError: bad shape, non-finite rows, too few rows for ``nearest_k``, bad option.

        Example:
            >>> ref = ReferenceManifold.build(np.arange(12.0).reshape(6, 2), nearest_k=2)
            >>> ref.radii.tolist()
            [5.656854249492381, 2.8284271247461903, 2.8284271247461903, 2.8284271247461903, 2.8284271247461903, 5.656854249492381]
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
        """Write ``features``, ``radii`` and ``nearest_k`` to ``path`` atomically.

        The arrays go to a temporary file in the same directory, which then replaces ``path``,
        so a reader never sees a half-written cache.

        Args:
            path: destination file; conventionally ending in ``.npz``.

        Example:
            >>> import pathlib, tempfile
            >>> ref = ReferenceManifold.build(np.arange(12.0).reshape(6, 2), nearest_k=2)
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ref.to_npz(pathlib.Path(tmp) / "africa.npz")
            ...     again = ReferenceManifold.from_npz(pathlib.Path(tmp) / "africa.npz")
            >>> bool((again.radii == ref.radii).all()), again.nearest_k
            (True, 2)
        """
        from t2i_fairness.base.files import atomic_write_bytes

        atomic_write_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        """The ``.npz`` file :meth:`to_npz` writes, as bytes (for a cache entry).

        Example:
            >>> ref = ReferenceManifold.build(np.arange(12.0).reshape(6, 2), nearest_k=2)
            >>> ReferenceManifold.from_bytes(ref.to_bytes()).nearest_k
            2
        """
        import io

        buf = io.BytesIO()
        np.savez(buf, features=self.features, radii=self.radii, nearest_k=np.int64(self.nearest_k),
                 format_version=np.int64(_NPZ_FORMAT))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> "ReferenceManifold":
        """Read what :meth:`to_bytes` wrote; ``name`` is quoted in errors.

        Raises:
            ValueError: not a manifold file, another format version, or inconsistent arrays.
        """
        import io

        return cls._from_npz(io.BytesIO(data), name)

    @classmethod
    def from_npz(cls, path: str | os.PathLike[str]) -> "ReferenceManifold":
        """Read a manifold written by :meth:`to_npz`.

        Args:
            path: file written by :meth:`to_npz`.

        Raises:
            ValueError: the file lacks one of the arrays, has another format version, or holds
                inconsistent arrays.

        Example:
            See :meth:`to_npz`.
        """
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
    """Remove exactly repeated feature vectors (rows) from one feature set.

    ``"keep_one"`` keeps the first copy of every repeated row; ``"drop_all"`` removes every
    copy, as DIG In's evaluation code does (``keep_one=False``); ``"none"`` returns the rows
    unchanged. Rows are equal when all their values are equal (``-0.0 == 0.0``). Row order is
    preserved. :func:`prdc` and :func:`precision_coverage` apply this to the real and the fake
    set separately: a vector present in both sets is not a duplicate.

    Args:
        features: ``(n, dim)`` numpy array or torch tensor.
        dedupe: ``"none"``, ``"keep_one"`` or ``"drop_all"``.

    Raises:
        ValueError: ``features`` is not 2-D or ``dedupe`` is not one of the choices.

    Example:
        >>> x = np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0], [4.0, 5.0]])
        >>> deduplicate(x, "keep_one").tolist()
        [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
        >>> deduplicate(x, "drop_all").tolist()
        [[2.0, 3.0], [4.0, 5.0]]
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
    """Distance from every row to its ``nearest_k``-th nearest other row.

    This is ``prdc``'s radius (the (k+1)-th smallest distance counting the point itself),
    computed exactly on the float64 values (see the module docstring). Duplicated rows count
    as neighbours at distance 0; deduplicate first (:func:`deduplicate`) if that is unwanted.

    Args:
        real_features: ``(n, dim)`` numpy array or torch tensor, ``n >= nearest_k + 2``.
        nearest_k: which nearest neighbour sets the radius.
        device: torch device; ``None`` picks CUDA when available.
        chunk_size: rows per block (memory ``chunk_size x n``); ``None`` picks a size.
        group: name of the group, quoted in error messages.

    Returns:
        float64 array of shape ``(n,)``.

    Raises:
        ValueError: bad shape, non-finite rows, too few rows, ``nearest_k < 1``.

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
    """Precision, recall, density and coverage, equal to ``prdc.compute_prdc``.

    Decisions are exact on the float64 values (module docstring): for float64 features this is
    ``prdc.compute_prdc(real, fake, nearest_k)``; for float32 features it is ``prdc`` on the same
    arrays cast to float64 (``prdc`` on float32 arrays rounds distances to float32 first).

    Args:
        real_features: ``(n_real, dim)`` numpy array or torch tensor of real features.
        fake_features: ``(n_fake, dim)`` generated features, same ``dim``.
        nearest_k: k of the k-nearest-neighbour radii (both sets need ``k + 2`` rows).
        dedupe: repeated rows handling, applied to the real and the fake set separately:
            ``"none"`` (default, the ``prdc`` package's behaviour), ``"keep_one"``, or
            ``"drop_all"`` (DIG In's evaluation code). See :func:`deduplicate`.
        device: torch device for the distances; ``None`` picks CUDA when available.
        chunk_size: rows per block (memory ``chunk_size x n``); ``None`` picks a size. It never
            changes the result.
        group: name of the group being scored (e.g. ``"africa"``), quoted in error messages.

    Returns:
        ``{"precision", "recall", "density", "coverage"}`` as Python floats.

    Raises:
        ValueError: non-2-D input, different feature dimensions, NaN/inf rows, a set with fewer
            than ``nearest_k + 2`` rows, ``nearest_k < 1``, or an unknown option.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> real, fake = rng.normal(size=(200, 16)), rng.normal(size=(150, 16))
        >>> scores = prdc(real, fake, nearest_k=5)
        >>> sorted(scores), all(0.0 <= scores[m] <= 1.0 for m in ("precision", "recall", "coverage"))
        (['coverage', 'density', 'precision', 'recall'], True)
        >>> prdc(real, real, nearest_k=5)["precision"]
        1.0
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
    """Precision and coverage only (DIG In's realism and diversity), same numbers as :func:`prdc`.

    Skips the fake set's own radii and resolves only the pairs that can change these two
    numbers. The reference side can be raw features, raw features with precomputed
    ``real_radii``, or a :class:`ReferenceManifold`.

    Args:
        real_features: ``(n_real, dim)`` array/tensor, or a :class:`ReferenceManifold`.
        fake_features: ``(n_fake, dim)`` generated features, ``n_fake >= 1``.
        nearest_k: k of the real radii; ``None`` means 3, or the manifold's own ``nearest_k``
            (giving a different value with a manifold is an error).
        real_radii: optional ``(n_real,)`` radii of ``real_features`` (e.g. from
            :func:`real_radii`); they are taken as given and ``nearest_k`` is not used.
        dedupe: ``"none"`` (default), ``"keep_one"`` or ``"drop_all"``, see :func:`prdc`.
            Precomputed radii (``real_radii`` or a manifold) fix the reference rows, so then
            only the fake set is deduplicated; deduplicate the reference when building it.
        device: torch device; ``None`` picks CUDA when available.
        chunk_size: rows per block; never changes the result.
        group: name of the group being scored, quoted in error messages.

    Returns:
        ``{"precision", "coverage"}`` as Python floats.

    Raises:
        ValueError: as :func:`prdc`, plus radii of the wrong shape or negative/non-finite radii,
            or ``real_radii`` given together with a manifold.

    Example:
        >>> rng = np.random.default_rng(1)
        >>> real, fake = rng.normal(size=(120, 8)), rng.normal(size=(90, 8))
        >>> pc = precision_coverage(real, fake, nearest_k=5)
        >>> full = prdc(real, fake, nearest_k=5)
        >>> pc == {"precision": full["precision"], "coverage": full["coverage"]}
        True
        >>> precision_coverage(real, fake, real_radii=real_radii(real, 5)) == pc
        True
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
    """Row indices :func:`deduplicate` keeps, in order.

    ``features[dedupe_index(x, mode)]`` equals ``deduplicate(x, mode)``; knowing which rows stay
    lets the diagnostics name the images.

    With ``groups`` (one label per row, e.g. the region), ``keep_one`` follows DIG In's
    ``utils.get_df_deduped(keep_one=True)``: the first copy of a repeated row is kept only when
    every copy has the same label, otherwise every copy goes. ``drop_all`` and ``none`` ignore it.

    Args:
        features: ``(n, dim)`` rows.
        dedupe: ``"none"``, ``"keep_one"`` or ``"drop_all"``.
        groups: optional label per row (see above).

    Raises:
        ValueError: ``dedupe`` is not a choice, ``features`` is not 2-D, or ``groups`` has another length.

    Example:
        >>> x = np.array([[0.0], [1.0], [0.0], [2.0]])
        >>> dedupe_index(x, "drop_all").tolist(), dedupe_index(x, "keep_one").tolist()
        ([1, 3], [0, 1, 3])
        >>> dedupe_index(x, "keep_one", groups=["africa", "africa", "europe", "africa"]).tolist()
        [1, 3]
    """
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
