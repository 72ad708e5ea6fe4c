"""CIS image fidelity: tiled composites, the score's degradation slope over K, Inception Score and FID."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from t2i_fairness.metrics.cis.prompts import _check_pos_int



def tile_composite(images: Sequence[object], tile_size: int = 224, background: tuple[int, int, int] = (0, 0, 0)):
    """Tile single-component images into one near-square RGB grid of square tiles (MCID-style check).

    Example:
        >>> from PIL import Image
        >>> tile_composite([Image.new("RGB", (40, 30), c) for c in ("red", "green", "blue")], tile_size=16).size
        (32, 32)
    """
    from PIL import Image, ImageOps

    tile_size = _check_pos_int("tile_size", tile_size)
    items = list(images)
    if not items:
        raise ValueError("`images` must hold at least one image, but got none")
    cols = math.ceil(math.sqrt(len(items)))
    rows = math.ceil(len(items) / cols)
    canvas = Image.new("RGB", (cols * tile_size, rows * tile_size), tuple(background))
    for i, item in enumerate(items):
        if isinstance(item, np.ndarray):
            item = Image.fromarray(item)
        if not isinstance(item, Image.Image):
            raise TypeError(f"`images[{i}]` must be a PIL image or a numpy array, but got {type(item).__name__}")
        tile = ImageOps.fit(item.convert("RGB"), (tile_size, tile_size), method=Image.Resampling.BICUBIC)
        canvas.paste(tile, ((i % cols) * tile_size, (i // cols) * tile_size))
    return canvas


def degradation_slope(ks: Sequence[float], values: Sequence[float], relative_to: str | None = None) -> float:
    """Least-squares slope of ``values`` against ``ks``: the change per added component.

    For IS/FID pass ``relative_to="mean"`` or ``"first"``.

    Example:
        >>> round(degradation_slope([1, 2, 4, 8], [1.0, 0.90, 0.76, 0.67]), 4)
        -0.0448
    """
    x = np.asarray(ks, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"`ks` and `values` must be 1-D of equal length, but got shapes {x.shape} and {y.shape}")
    if np.unique(x).size < 2:
        raise ValueError(f"`ks` must hold at least two distinct values, but got {x.tolist()}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("`ks` and `values` must be finite")
    choices = (None, "first", "mean")
    if relative_to not in choices:
        raise ValueError(f"`relative_to` must be one of {choices}, but got {relative_to!r}")
    if relative_to is not None:
        ref = y[0] if relative_to == "first" else y.mean()
        if ref == 0:
            raise ValueError(f"cannot normalise by {relative_to!r} value 0")
        y = y / ref
    xc = x - x.mean()
    return float(np.sum(xc * (y - y.mean())) / np.sum(xc**2))


def _check_probs(probs: object) -> np.ndarray:
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"`probs` must have shape (images, classes) with both > 0, but got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("`probs` must be finite and non-negative")
    sums = p.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > 1e-3:
        raise ValueError(
            f"`probs` rows must sum to 1 (class probabilities, e.g. a softmax), but row {worst} sums to {sums[worst]:.6g}"
        )
    return p


def inception_score_splits(probs: object, splits: int = 1) -> np.ndarray:
    """Inception Score ``exp(mean_x KL(p(y|x) || p(y)))`` of each of ``splits`` consecutive chunks."""
    from scipy.special import rel_entr

    p = _check_probs(probs)
    splits = _check_pos_int("splits", splits)
    if splits > p.shape[0]:
        raise ValueError(f"`splits` must be at most the number of images ({p.shape[0]}), but got {splits}")
    scores = []
    for chunk in np.array_split(p, splits):
        marginal = chunk.mean(axis=0, keepdims=True)
        kl = rel_entr(chunk, marginal).sum(axis=1)
        scores.append(math.exp(float(kl.mean())))
    return np.asarray(scores)


def inception_score(probs: object, splits: int = 1) -> float:
    """Inception Score: the mean of :func:`inception_score_splits`."""
    return float(np.mean(inception_score_splits(probs, splits)))


def gaussian_statistics(features: object) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of feature rows, as FID fits them (``ddof=1``, float64)."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"`features` must have shape (images, dim) with at least 2 images, but got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("`features` must be finite, but contains NaN or infinity")
    return x.mean(axis=0), np.atleast_2d(np.cov(x, rowvar=False))


def frechet_distance(mu1: object, sigma1: object, mu2: object, sigma2: object) -> float:
    """Fréchet distance ``||mu1 - mu2||^2 + tr(S1) + tr(S2) - 2 tr((S1 S2)^(1/2))`` (Heusel et al. 2017).

    Example:
        >>> import numpy as np
        >>> frechet_distance([0.0, 0.0], np.eye(2), [3.0, 4.0], np.eye(2))
        25.0
    """
    m1, m2 = np.asarray(mu1, dtype=np.float64), np.asarray(mu2, dtype=np.float64)
    s1, s2 = np.atleast_2d(np.asarray(sigma1, dtype=np.float64)), np.atleast_2d(np.asarray(sigma2, dtype=np.float64))
    if m1.ndim != 1 or m1.shape != m2.shape:
        raise ValueError(f"`mu1` and `mu2` must be 1-D of equal length, but got shapes {m1.shape} and {m2.shape}")
    d = m1.shape[0]
    if s1.shape != (d, d) or s2.shape != (d, d):
        raise ValueError(f"`sigma1` and `sigma2` must have shape ({d}, {d}), but got {s1.shape} and {s2.shape}")
    if not all(np.all(np.isfinite(a)) for a in (m1, m2, s1, s2)):
        raise ValueError("means and covariances must be finite")
    w, v = np.linalg.eigh((s1 + s1.T) / 2)
    root1 = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
    middle = root1 @ s2 @ root1
    tr_covmean = float(np.sqrt(np.clip(np.linalg.eigvalsh((middle + middle.T) / 2), 0.0, None)).sum())
    diff = m1 - m2
    value = float(diff @ diff + np.trace(s1) + np.trace(s2) - 2.0 * tr_covmean)
    return max(value, 0.0)


def frechet_inception_distance(features_a: object, features_b: object) -> float:
    """FID between two sets of feature rows (e.g. InceptionV3 2048-d pool features)."""
    mu1, s1 = gaussian_statistics(features_a)
    mu2, s2 = gaussian_statistics(features_b)
    if mu1.shape != mu2.shape:
        raise ValueError(f"`features_a` and `features_b` must have the same width, but got {mu1.shape[0]} and {mu2.shape[0]}")
    return frechet_distance(mu1, s1, mu2, s2)
