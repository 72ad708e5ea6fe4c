"""Precision, recall, density and coverage of a generated feature set against a real one.

The manifold of a feature set is the union of balls around its points whose radius is the
distance to the k-th nearest *other* point of the same set (Kynkaenniemi et al., 2019; Naeem et
al., 2020; DIG In section 4.1). With ``d`` the Euclidean distance and ``r_j`` the radius of
real point ``j`` (``rf_i`` of fake point ``i``), membership is strict (``d < r``) and::

    precision = mean over fake i of  [exists real j: d(i, j) < r_j]
    recall    = mean over real j of  [exists fake i: d(i, j) < rf_i]
    density   = mean over fake i of  #{real j: d(i, j) < r_j} / k
    coverage  = mean over real j of  [exists fake i: d(i, j) < r_j]

These are the definitions of the ``prdc`` package (``prdc.compute_prdc``), whose radius is the
(k+1)-th smallest distance of a row counting the point itself, i.e. the k-th nearest other point.

Exactness. Every membership decision is the one made on float64 distances computed from exact
coordinate differences, numpy's ``np.sqrt(((a - b) ** 2).sum(-1))`` on the features cast to
float64 (integers too; float16/bfloat16 go through float32 exactly). Distances are
first computed fast in float32 with the GEMM identity ``|a|^2 + |b|^2 - 2 a.b`` on centred,
power-of-two-scaled copies; a rigorous bound on the float32 rounding error (from the vector
norms and the dimension) sends every pair within that margin of a radius to a float64 GEMM and
then to the exact-difference float64 distance; radii are the k-th smallest of those float64
distances, found the same way (float32 top-k candidates, float64 recheck). Results therefore do
not depend on ``chunk_size``, ``device`` or the BLAS.

Agreement with ``prdc``: ``prdc`` computes the same distances with sklearn, i.e. with the GEMM
identity in float64. The two agree exactly unless a distance and a radius differ by less than
float64 rounding noise (about 1e-13 relative): always on continuous data, and on data whose
squared distances are exactly representable (integer-valued features, ties, duplicates), where
both are exact. For float32 features ``prdc`` rounds its distances to float32, which creates
extra ties; this module instead gives the result of ``prdc`` on the same array cast to float64.

Features must satisfy |x| < 1e150 (checked). As in any float64 computation, coordinates that
differ only below about 1e-154 give squared differences that underflow to 0.

Memory is O(chunk_size x N): no N x N matrix is ever built.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from typing import Any, Iterator, Literal

import numpy as np
import torch

__all__ = [
    "Dedupe",
    "Membership",
    "ReferenceManifold",
    "ball_membership",
    "dedupe_index",
    "deduplicate",
    "membership",
    "pair_distances",
    "prdc",
    "precision_coverage",
    "real_radii",
]

Dedupe = Literal["none", "keep_one", "drop_all"]
DEDUPE_CHOICES: tuple[str, ...] = ("none", "keep_one", "drop_all")
DEFAULT_NEAREST_K = 3

_NPZ_FORMAT = 1
# Rows per block when chunk_size is None: about 2**25 float32 distances (128 MB) per block.
_BLOCK_ELEMENTS = 2**25
# Values per block when converting features (float64: 64 MB).
_PAIR_BATCH_VALUES = 2**23
# Features must stay far from float64 overflow, since squared distances are summed.
_MAX_ABS_FEATURE = 1e150
_U64 = 2.0**-53
# A float32 cross block leaving more undecided pairs than this (and than 1/256 of the block)
# is redone in float64 rather than resolved pair by pair.
_FALLBACK_MIN_PAIRS = 4096
# Boolean masks are turned into index lists this many entries at a time (bounded memory).
_SLICE_ELEMENTS = 2**22


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Which generated image lies in which real ball (bootstraps, diagnostics)
# --------------------------------------------------------------------------------------------


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


_U64 = 2.0**-53


def ball_membership(real: Any, radii: Any, fake: Any, *, block_elements: int = 2**24) -> np.ndarray:
    """bool (n_fake, n_real): whether generated row i lies in the ball of real row j.

    The decision is ``d(i, j) < radii[j]`` with ``d`` the float64 distance from exact coordinate
    differences, ``sqrt(sum((fake[i] - real[j]) ** 2))``: the rule of
    :func:`precision_coverage`, so ``any`` over columns is its precision membership and
    ``any`` over rows its coverage. Distances are screened with a float64 matrix product; the pairs within a
    rigorous error bound of a radius are recomputed from the exact differences.

    Args:
        real: (n_real, dim) real features (finite).
        radii: (n_real,) radii of the real balls.
        fake: (n_fake, dim) generated features (finite).
        block_elements: pairs per screening block (memory).

    Raises:
        ValueError: shapes that do not match, or non-finite values.

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
    """float64 (n_fake, n_real): the distance of generated row i to real row j, from exact coordinate
    differences (``sqrt(sum((fake[i] - real[j]) ** 2))``, the distance :func:`ball_membership` decides on).

    For showing which real image is nearest to a generated one and how far (the evidence beside a
    failing gate); the memory is ``block_elements`` coordinates at a time.

    Args:
        real: (n_real, dim) real features (finite).
        fake: (n_fake, dim) generated features (finite).
        block_elements: coordinates held at once (memory).

    Raises:
        ValueError: shapes that do not match, or non-finite values.

    Example:
        >>> pair_distances(np.array([[0.0, 0.0], [3.0, 4.0]]), np.array([[0.0, 1.0]])).tolist()
        [[1.0, 4.242640687119285]]
    """
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
    """Which generated rows lie in which real k-NN balls, after the generated rows' dedupe.

    Attributes:
        inside: bool ``(n_kept, n_real)``: kept generated row ``i`` is strictly inside real ball ``j``.
        kept: indices (into the generated rows given) of the rows that entered, in order.

    ``precision`` and ``coverage`` equal :func:`precision_coverage` on the same inputs;
    ``precision_of(idx)`` / ``coverage_of(idx)`` recompute them for a resample of the kept rows
    (indices into ``kept``), which is what a bootstrap over generated images needs.
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
    """The ball membership of generated rows in a reference manifold, after their ``dedupe``.

    Args:
        manifold: the real features and radii.
        fake_features: ``(n_fake, dim)`` generated features.
        dedupe: ``"none"``, ``"keep_one"`` or ``"drop_all"`` on the generated rows (see :func:`prdc`).
        group: quoted in error messages.

    Raises:
        ValueError: shapes that do not match, non-finite values, a bad ``dedupe``.

    Example:
        >>> m = ReferenceManifold.build(np.arange(10.0).reshape(5, 2), nearest_k=1)
        >>> fake = np.array([[0.5, 1.5], [0.5, 1.5], [50.0, 50.0]])
        >>> mem = membership(m, fake, dedupe="keep_one")
        >>> mem.kept.tolist(), mem.precision, mem.coverage
        ([0, 2], 0.5, 0.4)
        >>> mem.precision == precision_coverage(m, fake, dedupe="keep_one")["precision"]
        True
    """
    mode = _check_dedupe(dedupe)
    fake = _as_features(fake_features, "fake_features", group)
    _check_same_dim(manifold.features, fake, group)
    _check_finite(fake, "fake_features", group)
    kept = dedupe_index(fake, mode)
    inside = ball_membership(manifold.features, manifold.radii, fake[kept])
    return Membership(inside, kept)


# --------------------------------------------------------------------------------------------
# Validation (the public boundary)
# --------------------------------------------------------------------------------------------


def _in(group: str | None) -> str:
    return "" if group is None else f" (group {group!r})"


def _check_nearest_k(nearest_k: Any) -> int:
    if isinstance(nearest_k, (bool, np.bool_)) or not isinstance(nearest_k, (int, np.integer)):
        raise ValueError(f"nearest_k must be an integer >= 1, got {nearest_k!r}")
    if nearest_k < 1:
        raise ValueError(f"nearest_k must be an integer >= 1, got {nearest_k!r}")
    return int(nearest_k)


def _check_dedupe(dedupe: Any) -> str:
    if dedupe not in DEDUPE_CHOICES:
        raise ValueError(f"dedupe must be one of {DEDUPE_CHOICES}, got {dedupe!r}")
    return str(dedupe)


def _as_features(x: Any, name: str, group: str | None = None) -> np.ndarray:
    """A 2-D float32 or float64 numpy view/copy of ``x`` (tensors are detached and moved to CPU)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.to(torch.float32)
        x = x.cpu().numpy()
    else:
        x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(
            f"{name}{_in(group)} must be a 2-D array (n_samples, n_features), got shape {x.shape}"
        )
    if x.shape[1] == 0:
        raise ValueError(f"{name}{_in(group)} has no feature columns, got shape {x.shape}")
    kind = x.dtype.kind
    if kind not in "fiub" or (kind == "f" and x.dtype.itemsize > 8):
        raise ValueError(
            f"{name}{_in(group)} must hold real numbers (float32/float64/int), got dtype {x.dtype}"
        )
    if x.dtype == np.float32 or x.dtype == np.float64:
        return x
    if x.dtype == np.float16:
        return x.astype(np.float32)
    return x.astype(np.float64)


def _check_same_dim(real: np.ndarray, fake: np.ndarray, group: str | None) -> None:
    if real.shape[1] != fake.shape[1]:
        raise ValueError(
            f"real_features and fake_features must have the same number of features{_in(group)}, "
            f"got shapes {real.shape} and {fake.shape}"
        )


def _check_finite(x: np.ndarray, name: str, group: str | None) -> None:
    if x.size == 0:
        return
    low, high = float(x.min()), float(x.max())  # nan propagates, inf shows
    if math.isfinite(low) and math.isfinite(high):
        big = max(abs(low), abs(high))
    else:
        bad = ~np.isfinite(x).all(axis=1)
        rows = np.flatnonzero(bad)
        raise ValueError(
            f"{name}{_in(group)} has {rows.size} row(s) with NaN or inf values "
            f"(of {x.shape[0]}; first at row {rows[0]})"
        )
    if big >= _MAX_ABS_FEATURE:
        raise ValueError(
            f"{name}{_in(group)} has values as large as {big:.3g}; features must satisfy "
            f"|x| < {_MAX_ABS_FEATURE:.0e} so that squared distances stay finite"
        )


def _check_group_size(
    x: np.ndarray,
    name: str,
    minimum: int,
    k: int | None,
    group: str | None,
    dedupe: str | None,
) -> None:
    n = x.shape[0]
    if n >= minimum:
        return
    after = "" if dedupe in (None, "none") else f" after dedupe={dedupe!r}"
    why = (
        f"nearest_k={k} needs at least {minimum} (k-th nearest other point, as prdc requires)"
        if k is not None
        else f"at least {minimum} is needed"
    )
    raise ValueError(f"{name}{_in(group)} has {n} row(s){after}, but {why}")


def _check_radii(radii: Any, n: int, name: str, group: str | None) -> np.ndarray:
    if isinstance(radii, torch.Tensor):
        radii = radii.detach().cpu().numpy()
    r = np.asarray(radii)
    if r.shape != (n,):
        raise ValueError(f"{name}{_in(group)} must have shape ({n},), one per real row, got {r.shape}")
    if r.dtype.kind not in "fiu":
        raise ValueError(f"{name}{_in(group)} must be real numbers, got dtype {r.dtype}")
    r = r.astype(np.float64)
    bad = ~np.isfinite(r) | (r < 0)
    if bad.any():
        raise ValueError(
            f"{name}{_in(group)} must be finite and >= 0; {int(bad.sum())} value(s) are not "
            f"(first at index {int(np.flatnonzero(bad)[0])}: {r[bad][0]})"
        )
    return r


def _readonly(x: np.ndarray) -> np.ndarray:
    view = x.view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True)
class _Options:
    device: torch.device
    chunk_size: int | None

    @classmethod
    def make(cls, device: Any, chunk_size: Any) -> "_Options":
        if chunk_size is not None and (
            isinstance(chunk_size, (bool, np.bool_))
            or not isinstance(chunk_size, (int, np.integer))
            or chunk_size < 1
        ):
            raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}")
        if device is None:
            dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            try:
                dev = torch.device(device)
            except (RuntimeError, TypeError) as err:
                raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}") from err
            if dev.type == "cuda" and not torch.cuda.is_available():
                raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'cpu' or None")
        return cls(dev, None if chunk_size is None else int(chunk_size))

    def rows_per_block(self, n_cols: int) -> int:
        if self.chunk_size is not None:
            return self.chunk_size
        return max(1, _BLOCK_ELEMENTS // max(1, n_cols))


# --------------------------------------------------------------------------------------------
# Deduplication
# --------------------------------------------------------------------------------------------


def _dedupe(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "none" or x.shape[0] < 2:
        return x
    key = np.ascontiguousarray(x + x.dtype.type(0.0))  # maps -0.0 to 0.0
    rows = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
    _, first, counts = np.unique(rows, return_index=True, return_counts=True)
    keep = first if mode == "keep_one" else first[counts == 1]
    return x[np.sort(keep)]


# --------------------------------------------------------------------------------------------
# Engine: error-bounded fast distances, exact float64 rechecks
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _ieee_matmul() -> Iterator[None]:
    """Force full-precision float32 matmuls (no TF32/bf16), which the error bound assumes."""
    backends = [
        b
        for b in (getattr(torch.backends.cuda, "matmul", None), getattr(torch.backends.mkldnn, "matmul", None))
        if b is not None and hasattr(b, "fp32_precision")
    ]
    saved = [b.fp32_precision for b in backends]
    try:
        for b in backends:
            b.fp32_precision = "ieee"
        yield
    finally:
        for b, value in zip(backends, saved):
            b.fp32_precision = value


def _row_blocks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(n, start + size)


def _gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n u / (1 - n u): relative error bound of an n-term float sum/dot."""
    if n * u >= 0.5:
        return math.inf
    return n * u / (1.0 - n * u)


@dataclass(frozen=True)
class _Tier:
    dtype: torch.dtype
    u: float  # unit roundoff
    tiny: float  # largest absolute error of rounding a value into the subnormal range


_F32 = _Tier(torch.float32, 2.0**-24, 2.0**-150)
_F64 = _Tier(torch.float64, 2.0**-53, 2.0**-1074)


@dataclass(frozen=True)
class _Frame:
    """Common centre and power-of-two scale of the sets compared in one computation.

    Distances are translation invariant and a power-of-two scale is exact, so the working
    copies ``y = (x - centre) * scale`` keep the identity's cancellation error small. When every
    set is float32 the centre (the mean of all rows) is rounded to float32, so rows are centred
    in float32 with a single rounding; otherwise centring is done in float64. Either way every set
    is centred on the very same value.
    """

    center: np.ndarray
    scale: float
    dim: int
    center_is_float32: bool

    @classmethod
    def make(cls, *sets: np.ndarray) -> "_Frame":
        total = sum(x.sum(axis=0, dtype=np.float64) for x in sets)
        center = total / sum(x.shape[0] for x in sets)
        as_float32 = all(x.dtype == np.float32 for x in sets)
        if as_float32:
            center = center.astype(np.float32).astype(np.float64)
        biggest = 0.0
        for x in sets:  # |x - centre| is largest at a column's extremes
            for extreme in (x.max(axis=0), x.min(axis=0)):
                biggest = max(biggest, float(np.abs(extreme.astype(np.float64) - center).max()))
        scale = 1.0 if biggest == 0.0 else math.ldexp(1.0, -math.frexp(biggest)[1])
        return cls(center, scale, sets[0].shape[1], as_float32)


@dataclass(frozen=True)
class _Work:
    """One feature set in a frame, in a tier's dtype, on the compute device."""

    x: torch.Tensor  # (n, dim) rounded (features - centre) * scale
    sq: torch.Tensor  # (n,) rounded squared norms of x, same dtype
    norm: np.ndarray  # (n,) float64 upper bounds of the exact norms of x
    max_exact_norm: float  # upper bound of ||(features - centre) * scale|| (unrounded)


def _prepare(x: np.ndarray, frame: _Frame, tier: _Tier, device: torch.device) -> _Work:
    n, dim = x.shape
    # subtract in float32 only when x, the centre and the result are float32 (one rounding)
    in_float32 = x.dtype == np.float32 and tier.dtype == torch.float32 and frame.center_is_float32
    exact_dtype = torch.float32 if in_float32 else torch.float64
    center = torch.from_numpy(frame.center).to(exact_dtype)  # exact: see _Frame
    out = torch.empty((n, dim), dtype=tier.dtype)
    sq = torch.empty(n, dtype=tier.dtype)
    for start, stop in _row_blocks(n, max(1, _PAIR_BATCH_VALUES // dim)):
        # torch.sub makes a new tensor: x itself (whose memory from_numpy shares) is never written
        block = x[start:stop] if x.flags.writeable else x[start:stop].copy()  # torch wants writable
        y = torch.sub(torch.from_numpy(block).to(exact_dtype), center).mul_(frame.scale)
        out[start:stop] = y
        sq[start:stop] = out[start:stop].square().sum(dim=1)
    # |sq - |x|^2| <= gamma_dim |x|^2 + dim * tiny (any summation order), so this bounds |x|:
    sq64 = sq.double().numpy()
    norm = np.sqrt((sq64 + dim * tier.tiny) / (1.0 - _gamma(dim, tier.u))) * (1.0 + 4 * _U64)
    # per-component rounding into the tier: relative u (plus float64 centring) or absolute tiny
    u1 = tier.u + 2 * _U64
    alpha = tier.tiny + 2.0**-1074
    max_exact = (float(norm.max(initial=0.0)) + alpha * math.sqrt(dim)) / (1.0 - u1)
    return _Work(out.to(device), sq.to(device), norm, max_exact)


@dataclass(frozen=True)
class _Bounds:
    """Rigorous error bounds linking the tier's identity distances to the float64 semantics.

    For rows a, b of two working sets, with ``q`` the tier's ``|a|^2 + |b|^2 - 2 a.b``:

    * ``|q - dhat^2| <= E = 2c (|a|^2 + |b|^2) + qabs`` where ``dhat`` is the exact distance of
      the rounded rows (every dot/sum of m terms errs by at most gamma_m times its absolute
      sum, in any summation order, and (|a| + |b|)^2 <= 2|a|^2 + 2|b|^2);
    * ``|dhat - d * scale| <= e1`` where ``d`` is the exact distance of the original rows
      (rounding each component into the tier moves a row by at most u |row|);
    * ``|d64 - d| <= s64 d + eps64`` for the float64 exact-difference distance ``d64`` that
      defines the semantics (squares and a sum of non-negative terms, then a square root).
    """

    c: float
    qabs: float
    e1: float
    s64: float
    eps64: float
    scale: float

    @classmethod
    def make(cls, frame: _Frame, tier: _Tier, a: _Work, b: _Work) -> "_Bounds":
        dim = frame.dim
        c = 1.0625 * _gamma(2 * dim + 16, tier.u)
        u1 = tier.u + 2 * _U64
        alpha = tier.tiny + 2.0**-1074
        e1 = (u1 * (a.max_exact_norm + b.max_exact_norm) + 2 * alpha * math.sqrt(dim)) * (1 + 2.0**-40)
        return cls(
            c=c,
            qabs=4.0 * (dim + 4) * tier.tiny,
            e1=e1,
            s64=1.0625 * _gamma(dim + 4, _U64),
            eps64=2.0 * math.sqrt(dim * 2.0**-1074),
            scale=frame.scale,
        )

    def in_radius(self, r: np.ndarray) -> np.ndarray:
        """rho with: sqrt(q + E) < rho  implies  d64 < r  (nan where nothing can be sure)."""
        rho = (r - self.eps64) * self.scale / (1.0 + self.s64) - self.e1
        return np.where(rho > 0, rho * (1 - 2.0**-44), np.nan)

    def out_radius(self, r: np.ndarray) -> np.ndarray:
        """rho with: sqrt(max(q - E, 0)) >= rho  implies  d64 >= r."""
        return ((r + self.eps64) * self.scale / (1.0 - self.s64) + self.e1) * (1 + 2.0**-44)

    def upper_distance(self, q: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Upper bound of d64 for a pair with identity value q and bound E = e."""
        hi = (np.sqrt(np.maximum(q, 0.0) + e) + self.e1) * (1.0 + self.s64) / self.scale + self.eps64
        return hi * (1 + 2.0**-44)

    def lower_distance(self, q: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Lower bound of d64 for a pair with identity value q and bound E = e."""
        lo = (np.sqrt(np.maximum(q - e, 0.0)) - self.e1) * (1.0 - self.s64) / self.scale - self.eps64
        return lo - np.abs(lo) * 2.0**-44

    def lower_distance_threshold(self, d: np.ndarray, e: np.ndarray) -> np.ndarray:
        """t with: q > t  implies  d64 > d."""
        rho = ((d + self.eps64) * self.scale / (1.0 - self.s64) + self.e1) * (1 + 2.0**-44)
        return (rho * rho + e) * (1 + 2.0**-44)


def _to_tier(values: np.ndarray, tier: _Tier, device: torch.device, direction: str) -> torch.Tensor:
    """float64 thresholds rounded into the tier dtype toward -inf ('down') or +inf ('up')."""
    values = np.asarray(values, dtype=np.float64)
    if tier.dtype == torch.float64:
        out = values.copy()
    else:
        with np.errstate(over="ignore"):
            out = values.astype(np.float32)
        wide = out.astype(np.float64)
        if direction == "down":
            fix = wide > values
            out[fix] = np.nextafter(out[fix], np.float32(-np.inf))
        else:
            fix = wide < values
            out[fix] = np.nextafter(out[fix], np.float32(np.inf))
    out = np.where(np.isnan(values), -np.inf if direction == "down" else np.inf, out)
    return torch.from_numpy(np.ascontiguousarray(out)).to(device)


def _round_tier(values: np.ndarray, tier: _Tier, direction: str) -> np.ndarray:
    """float64 values rounded to the tier's precision toward -inf ('down') or +inf ('up'); nan
    becomes -inf ('down') or +inf ('up'). Returned as float64 holding tier-representable values."""
    return _to_tier(values, tier, torch.device("cpu"), direction).double().numpy()


def _exact_distances(a: np.ndarray, ia: np.ndarray, b: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """float64 ``sqrt(sum((a[ia] - b[ib]) ** 2))`` per pair: the reference semantics."""
    out = np.empty(ia.size, dtype=np.float64)
    step = max(1, min(512, ia.size, _PAIR_BATCH_VALUES // a.shape[1]))
    buf_a = np.empty((step, a.shape[1]), dtype=a.dtype)
    buf_b = np.empty((step, b.shape[1]), dtype=b.dtype)
    diff = np.empty((step, a.shape[1]), dtype=np.float64)
    for start, stop in _row_blocks(ia.size, step):
        m = stop - start
        np.take(a, ia[start:stop], axis=0, out=buf_a[:m])
        np.take(b, ib[start:stop], axis=0, out=buf_b[:m])
        np.subtract(buf_a[:m], buf_b[:m], out=diff[:m], dtype=np.float64)
        np.square(diff[:m], out=diff[:m])
        diff[:m].sum(axis=1, out=out[start:stop])
    return np.sqrt(out, out=out)


def _identity_block(a: _Work, rows: slice | torch.Tensor, b: _Work) -> torch.Tensor:
    """q = |a|^2 + |b|^2 - 2 a.b for a[rows] x b, in the tier dtype."""
    q = torch.addmm(b.sq.unsqueeze(0), a.x[rows], b.x.T, beta=1.0, alpha=-2.0)
    return q.add_(a.sq[rows].unsqueeze(1))


class _Space:
    """Feature sets sharing one frame, with their working copies made on demand per tier."""

    def __init__(self, frame: _Frame, opts: _Options, **sets: np.ndarray) -> None:
        self.frame, self.opts, self.sets = frame, opts, sets
        self._works: dict[tuple[str, torch.dtype], _Work] = {}

    def work(self, name: str, tier: _Tier) -> _Work:
        key = (name, tier.dtype)
        if key not in self._works:
            self._works[key] = _prepare(self.sets[name], self.frame, tier, self.opts.device)
        return self._works[key]

    def release(self, tier: _Tier) -> None:
        for key in [key for key in self._works if key[1] == tier.dtype]:
            del self._works[key]


def _tiers(dim: int) -> tuple[_Tier, ...]:
    """Float32 filtering pays off only while its error bound stays small (dim up to about 7800)."""
    return (_F32, _F64) if 1.0625 * _gamma(2 * dim + 16, _F32.u) < 1e-3 else (_F64,)


def _radii(x: np.ndarray, k: int, opts: _Options, space: _Space | None = None, name: str = "x") -> np.ndarray:
    """k-th smallest float64 exact distance from each row of ``x`` to its other rows."""
    space = _Space(_Frame.make(x), opts, x=x) if space is None else space
    n = x.shape[0]
    radii = np.full(n, np.nan)
    tiers = _tiers(x.shape[1])
    # top-k pass in the fast tier; rows with many near-equal neighbours get the mask passes
    todo = _radii_topk_pass(x, k, space.work(name, tiers[0]), tiers[0], space, radii)
    for tier in tiers:
        if todo.size:
            limit = 4 * k + 32 if tier is _F32 else n
            todo = _radii_mask_pass(x, k, space.work(name, tier), tier, space, todo, radii, limit)
    space.release(_F64)
    for row in todo:  # unreachable unless the bounds are wrong: every distance of the row
        others = np.delete(np.arange(n), row)
        d = _exact_distances(x, np.full(others.size, row), x, others)
        radii[row] = np.partition(d, k - 1)[k - 1]
    return radii


def _radii_topk_pass(
    x: np.ndarray, k: int, work: _Work, tier: _Tier, space: _Space, radii: np.ndarray
) -> np.ndarray:
    """Radii from the ``k + 8`` smallest identity values per row; return rows needing more.

    Distances are symmetric, so only blocks on and above the diagonal are computed: each block
    updates the running top-k of its rows (along its rows) and of its columns (along its
    columns). The k-th smallest value bounds the radius from above; every row whose distance may
    not exceed that bound is a candidate. If the last kept value is still a candidate the row may
    have more candidates than kept, and is returned for :func:`_radii_mask_pass`.
    """
    n = x.shape[0]
    keep = min(n - 1, k + 8)
    device = work.x.device
    best_v = torch.full((n, keep), math.inf, dtype=tier.dtype, device=device)
    best_i = torch.zeros((n, keep), dtype=torch.long, device=device)

    def merge(start: int, stop: int, values: torch.Tensor, cols: torch.Tensor) -> None:
        v = torch.cat([best_v[start:stop], values], dim=1)
        i = torch.cat([best_i[start:stop], cols], dim=1)
        v, pos = torch.topk(v, keep, dim=1, largest=False)
        best_v[start:stop] = v
        best_i[start:stop] = torch.gather(i, 1, pos)

    blocks = list(_row_blocks(n, space.opts.rows_per_block(n)))
    for b, (r0, r1) in enumerate(blocks):
        for c0, c1 in blocks[b:]:
            q = torch.addmm(work.sq[c0:c1].unsqueeze(0), work.x[r0:r1], work.x[c0:c1].T, beta=1.0, alpha=-2.0)
            q.add_(work.sq[r0:r1].unsqueeze(1))
            if c0 == r0:
                local = torch.arange(r1 - r0, device=device)
                q[local, local] = math.inf  # a row is not its own neighbour
            values, cols = torch.topk(q, min(keep, c1 - c0), dim=1, largest=False)
            merge(r0, r1, values, cols + c0)
            if c0 != r0:  # the same distances seen from the column rows (row-wise top-k is faster)
                values, rows = torch.topk(q.T.contiguous(), min(keep, r1 - r0), dim=1, largest=False)
                merge(c0, c1, values, rows + r0)
            del q

    bounds = _Bounds.make(space.frame, tier, work, work)
    max_sq = float(work.norm.max()) ** 2
    row_e = 2 * bounds.c * (work.norm**2 + max_sq) + bounds.qabs
    values = best_v.double().cpu().numpy()
    cols = best_i.cpu().numpy()
    limit = bounds.lower_distance_threshold(bounds.upper_distance(values[:, k - 1], row_e), row_e)
    cand = values <= limit[:, None]
    full = cand[:, -1].copy() if keep < n - 1 else np.zeros(n, dtype=bool)  # copy: cand changes
    cand[full] = False
    ri, pos = np.nonzero(cand)
    _radii_from_candidates(x, k, bounds, ri, cols[ri, pos], values[ri, pos], row_e, radii)
    return np.flatnonzero(full)


def _radii_mask_pass(
    x: np.ndarray,
    k: int,
    work: _Work,
    tier: _Tier,
    space: _Space,
    rows: np.ndarray,
    radii: np.ndarray,
    limit: int,
) -> np.ndarray:
    """Radii of ``rows`` from all their candidates; return rows with a count outside [k, limit]."""
    n = x.shape[0]
    bounds = _Bounds.make(space.frame, tier, work, work)
    max_sq = float(work.norm.max()) ** 2
    row_e = 2 * bounds.c * (work.norm**2 + max_sq) + bounds.qabs
    redo, found = [], []
    rows_t = torch.from_numpy(rows).to(work.x.device)
    for start, stop in _row_blocks(rows.size, space.opts.rows_per_block(n)):
        idx = rows_t[start:stop]
        block_rows = rows[start:stop]
        q = _identity_block(work, idx, work)
        q[torch.arange(stop - start, device=q.device), idx] = math.inf
        kth = torch.topk(q, k, dim=1, largest=False).values[:, k - 1].double().cpu().numpy()
        e = row_e[block_rows]
        t = bounds.lower_distance_threshold(bounds.upper_distance(kth, e), e)
        mask = q <= _to_tier(t, tier, q.device, "up").unsqueeze(1)
        local, cols = torch.nonzero(mask, as_tuple=True)
        qv = q[local, cols].double().cpu().numpy()
        local, cols = local.cpu().numpy(), cols.cpu().numpy()
        del q, mask
        counts = np.bincount(local, minlength=stop - start)
        bad = (counts < k) | (counts > limit)
        redo.append(block_rows[bad])
        ok = ~bad[local]
        found.append((block_rows[local[ok]], cols[ok], qv[ok]))
    if found:
        ri, ci, qv = (np.concatenate(parts) for parts in zip(*found))
        _radii_from_candidates(x, k, bounds, ri, ci, qv, row_e, radii)
    return np.concatenate(redo) if redo else np.empty(0, dtype=np.int64)


def _radii_from_candidates(
    x: np.ndarray,
    k: int,
    bounds: _Bounds,
    ri: np.ndarray,
    ci: np.ndarray,
    qv: np.ndarray,
    row_e: np.ndarray,
    radii: np.ndarray,
) -> None:
    """Set ``radii[row]`` to the k-th smallest exact distance among each row's candidates.

    Within a row the bounds grow with q. Candidates whose upper bound is below the k-th smallest
    lower bound are surely among the k - 1 nearest: they are counted, not measured.
    """
    if ri.size == 0:
        return
    order = np.lexsort((qv, ri))
    ri, ci, qv = ri[order], ci[order], qv[order]
    uniq, first = np.unique(ri, return_index=True)
    kth_lo = bounds.lower_distance(qv[first + k - 1], row_e[uniq])
    slot = np.searchsorted(uniq, ri)
    below = bounds.upper_distance(qv, row_e[ri]) < kth_lo[slot]
    below_count = np.bincount(slot, weights=below, minlength=uniq.size).astype(np.int64)
    ri, ci, slot = ri[~below], ci[~below], slot[~below]
    d = _exact_distances(x, ri, x, ci)
    order = np.lexsort((d, slot))
    d, slot = d[order], slot[order]
    rest_first = np.searchsorted(slot, np.arange(uniq.size))
    radii[uniq] = d[rest_first + k - 1 - below_count]


@dataclass
class _CrossStats:
    fake_counts: np.ndarray  # real balls holding each fake point (only > 0 is exact unless counting)
    real_covered: np.ndarray  # the real ball holds some fake point
    real_recalled: np.ndarray  # the real point lies in some fake ball (with fake radii only)


@dataclass
class _BlockResult:
    sure_f: np.ndarray  # (fake, real) pairs surely inside the real ball
    sure_r: np.ndarray
    recalled: np.ndarray  # real columns surely inside some fake ball of this block
    open_f: np.ndarray  # undecided pairs, with what they are undecided for
    open_r: np.ndarray
    open_precision: np.ndarray  # bool: undecided for the real ball (precision/density/coverage)
    open_recall: np.ndarray  # bool: undecided for the fake ball (recall)


def _cross(space: _Space, real_r: np.ndarray, fake_r: np.ndarray | None, want_counts: bool) -> _CrossStats:
    """Membership of fake points in real balls (and of real points in fake balls)."""
    fake, real = space.sets["fake"], space.sets["real"]
    n_fake, n_real = fake.shape[0], real.shape[0]
    stats = _CrossStats(
        fake_counts=np.zeros(n_fake, dtype=np.int64),
        real_covered=np.zeros(n_real, dtype=bool),
        real_recalled=np.zeros(n_real, dtype=bool),
    )
    tiers = _tiers(real.shape[1])
    for start, stop in _row_blocks(n_fake, space.opts.rows_per_block(n_real)):
        for tier in tiers:  # float64 only for a block float32 leaves too undecided
            fw, rw = space.work("fake", tier), space.work("real", tier)
            bounds = _Bounds.make(space.frame, tier, fw, rw)
            block = _cross_block(fw, rw, bounds, tier, start, stop, real_r, fake_r, stats, want_counts)
            if block is not None:
                break
        np.add.at(stats.fake_counts, block.sure_f, 1)
        stats.real_covered[block.sure_r] = True
        stats.real_recalled[block.recalled] = True
        if block.open_f.size:
            pf, pr = block.open_f, block.open_r
            d = _exact_distances(fake, pf, real, pr)
            inside = block.open_precision & (d < real_r[pr])
            np.add.at(stats.fake_counts, pf[inside], 1)
            stats.real_covered[pr[inside]] = True
            if fake_r is not None:
                stats.real_recalled[pr[block.open_recall & (d < fake_r[pf])]] = True
    space.release(_F64)
    return stats


def _nonzero_slices(mask: torch.Tensor, *values: torch.Tensor) -> tuple[np.ndarray, ...]:
    """Row/column indices of ``mask`` (and the matching entries of ``values``), by row slices."""
    n_rows, n_cols = mask.shape
    step = max(1, _SLICE_ELEMENTS // max(1, n_cols))
    on_cpu = mask.device.type == "cpu"
    parts = []
    for start, stop in _row_blocks(n_rows, step):
        if on_cpu:  # numpy's flatnonzero is several times faster than torch.nonzero on CPU
            flat = np.flatnonzero(mask[start:stop].numpy())
            picked = [v[start:stop].numpy().reshape(-1)[flat].astype(np.float64) for v in values]
        else:
            flat_t = torch.nonzero(mask[start:stop].reshape(-1)).squeeze(1)
            picked = [v[start:stop].reshape(-1)[flat_t].double().cpu().numpy() for v in values]
            flat = flat_t.cpu().numpy()
        li, cj = np.divmod(flat, n_cols)
        parts.append((li + start, cj, *picked))
    return tuple(np.concatenate(p) for p in zip(*parts))


def _cross_block(
    fw: _Work,
    rw: _Work,
    bounds: _Bounds,
    tier: _Tier,
    start: int,
    stop: int,
    real_r: np.ndarray,
    fake_r: np.ndarray | None,
    stats: _CrossStats,
    want_counts: bool,
) -> _BlockResult | None:
    """Classify the pairs of fake rows ``start:stop`` x all real rows as inside, outside or open.

    The GEMM computes ``w = q - A_j`` with a per-real-column offset ``A_j`` chosen so that
    ``w < 0`` means surely inside ball j and ``w >= width_j`` surely outside (``|w - (dhat^2 -
    A_j)| <= E_ij + c |A_j|``). One comparison with a scalar therefore finds every pair that is
    inside or open; sure-outside pairs, nearly all of them, are never listed. Returns None when a
    float32 block leaves too many pairs open (the caller redoes it in float64).
    """
    device = fw.x.device
    c = bounds.c
    n_rows, n_real = stop - start, rw.x.shape[0]
    fake_sq = fw.norm[start:stop] ** 2
    real_sq = rw.norm**2
    e_col = 2 * c * (real_sq + float(fake_sq.max())) + bounds.qabs  # >= E_ij in this block
    x = bounds.in_radius(real_r) ** 2 - e_col
    offset = np.where(np.isnan(x), -2.0 * e_col, x - 1.02 * c * np.abs(x))  # A_j
    width = _round_tier(
        (bounds.out_radius(real_r) ** 2 - offset + e_col + c * np.abs(offset)) * (1 + 2.0**-40), tier, "up"
    )
    bias = (rw.sq.double().cpu().numpy() - offset).astype(np.float32 if tier is _F32 else np.float64)
    w = torch.addmm(torch.from_numpy(bias).to(device).unsqueeze(0), fw.x[start:stop], rw.x.T, beta=1.0, alpha=-2.0)
    w.add_(fw.sq[start:stop].unsqueeze(1))

    # one scalar threshold for all columns but the widest 1%, which are scanned separately
    cap = float(np.partition(width, (99 * (n_real - 1)) // 100)[(99 * (n_real - 1)) // 100])
    wf, wr, wv = _nonzero_slices(w < cap, w)
    wide = np.flatnonzero(width > cap)
    if wide.size:
        wide_t = torch.from_numpy(wide).to(device)
        sub = w[:, wide_t]
        lim = torch.from_numpy(width[wide]).to(device=device, dtype=w.dtype)
        xf, xr, xv = _nonzero_slices((sub >= cap) & (sub < lim.unsqueeze(0)), sub)
        wf, wr, wv = np.concatenate([wf, xf]), np.concatenate([wr, wide[xr]]), np.concatenate([wv, xv])
    sure = wv < 0
    sure_f, sure_r = wf[sure] + start, wr[sure]
    open_f, open_r = wf[~sure & (wv < width[wr])] + start, wr[~sure & (wv < width[wr])]
    if not want_counts:
        # precision and coverage only: a pair matters if its fake row or its real column is open
        row_done = np.zeros(n_rows, dtype=bool)
        row_done[sure_f - start] = True
        col_done = stats.real_covered.copy()
        col_done[sure_r] = True
        keep = ~row_done[open_f - start] | ~col_done[open_r]
        open_f, open_r = open_f[keep], open_r[keep]
    open_p = np.ones(open_f.size, dtype=bool)
    open_rc = np.zeros(open_f.size, dtype=bool)
    recalled = np.empty(0, dtype=np.int64)

    if fake_r is not None:
        # recall: q' = w + A_j estimates dhat^2 within E_ij + 3c|A_j|; row thresholds
        a32 = torch.from_numpy(offset.astype(bias.dtype)).to(device)
        q = w.add_(a32.unsqueeze(0))
        col_terms = 2 * c * float(real_sq.max()) + bounds.qabs + 3 * c * float(np.abs(offset).max())
        r_in = _round_tier(bounds.in_radius(fake_r[start:stop]) ** 2 - 2 * c * fake_sq - col_terms, tier, "down")
        r_out = _round_tier(bounds.out_radius(fake_r[start:stop]) ** 2 + 2 * c * fake_sq + col_terms, tier, "up")
        r_out_t = torch.from_numpy(r_out).to(device=device, dtype=w.dtype)
        rf, rr, rv = _nonzero_slices(q < r_out_t.unsqueeze(1), q)
        sure_rec = rv < r_in[rf]
        recalled = np.unique(rr[sure_rec])
        col_done = stats.real_recalled.copy()
        col_done[recalled] = True
        keep = ~sure_rec & ~col_done[rr]
        rec_f, rec_r = rf[keep] + start, rr[keep]
        # merge the two open lists into unique pairs with flags
        key_p = open_f.astype(np.int64) * n_real + open_r
        key_r = rec_f.astype(np.int64) * n_real + rec_r
        keys, inverse = np.unique(np.concatenate([key_p, key_r]), return_inverse=True)
        open_p = np.zeros(keys.size, dtype=bool)
        open_p[inverse[: key_p.size]] = True
        open_rc = np.zeros(keys.size, dtype=bool)
        open_rc[inverse[key_p.size :]] = True
        open_f, open_r = keys // n_real, keys % n_real
    del w

    if tier is _F32 and open_f.size > max(_FALLBACK_MIN_PAIRS, n_rows * n_real // 256):
        return None
    return _BlockResult(sure_f, sure_r, recalled, open_f, open_r, open_p, open_rc)
