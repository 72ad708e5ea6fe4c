"""Coverage and precision: shares of real balls and of generated images (DIG In, Decomposed DIG)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.intervals.resampling import (_bootstrap_counts, _check_confidence, _check_method,
                                                       _check_resamples, _from_replicates, _membership, _normal, _score,
                                                       _subsample_masks, jackknife_se_df)
from t2i_fairness.metrics.intervals.tails import _z, agresti_coull, share_effective_size
from t2i_fairness.metrics.intervals.value import Interval

__all__ = ["COVERAGE_METHODS", "PRECISION_METHODS", "coverage_interval", "precision_interval"]


COVERAGE_METHODS: tuple[str, ...] = (
    "jackknife_wilson",
    "jackknife_wilson_df",
    "jackknife",
    "half_sampling",
    "subsampling",
    "bootstrap_se",
    "percentile",
    "basic",
    "bca",
)


PRECISION_METHODS: tuple[str, ...] = ("wilson", "agresti_coull", "clopper_pearson", "jeffreys", "wald", "percentile")


def _coverage_of(weights: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Coverage of each weighted resample: weights (B, n_fake) >= 0, member (n_fake, n_real) float32."""
    return ((weights.astype(np.float32) @ member) > 0).mean(axis=1)


def _coverage_jackknife(member: np.ndarray) -> np.ndarray:
    """Delete-one values: removing fake i uncovers exactly the balls it alone covers."""
    counts = member.sum(axis=0)
    alone = member[:, counts == 1].sum(axis=1)
    return (np.count_nonzero(counts) - alone) / member.shape[1]


def coverage_interval(membership: object, *, method: str = "jackknife_wilson_df", confidence: float = 0.95,
                      n_resamples: int = 1000, seed: int = 0) -> Interval:
    """Interval for coverage, the share of real balls that hold at least one generated image.

    Generated images are the random units; the real balls are fixed. A resample only loses distinct images, so
    the bootstrap cannot cover: the default reads the exact delete-one jackknife variance as an effective number
    of balls ``c (1 - c) / var`` (capped at ``n_real``) and takes Wilson's score interval there, counting the
    variance's degrees of freedom in the test's trials (Korn & Graubard 1998; docs/calibration.md).

    Args:
        membership: boolean ``(n_fake, n_real)``: generated image ``i`` lies in real ``j``'s ball.
        method: one of :data:`COVERAGE_METHODS`.

    Example:
        >>> m = np.zeros((6, 4), dtype=bool)
        >>> m[0, 0] = m[1, 1] = m[2, 1] = True       # ball 0 held by image 0 alone, ball 1 twice
        >>> iv = coverage_interval(m)
        >>> iv.estimate, round(iv.se, 4), iv.n_effective, round(iv.df, 2)
        (0.5, 0.25, 4.0, 1.43)
        >>> coverage_interval(m, method="percentile", seed=1).as_tuple()   # the biased one
        (0.25, 0.5)
    """
    member = _membership(membership)
    method = _check_method(method, COVERAGE_METHODS)
    confidence = _check_confidence(confidence)
    n_resamples = _check_resamples(n_resamples)
    n, r = member.shape
    if n < 2 or r < 1:
        raise ValueError(f"`membership` must have at least 2 generated rows and 1 real column, but got shape {member.shape}")
    estimate = float(member.any(axis=0).mean())
    if method in ("jackknife", "jackknife_wilson", "jackknife_wilson_df"):
        se, kish = jackknife_se_df(_coverage_jackknife(member))
        if method == "jackknife":
            return _normal(method, estimate, se, confidence, n, clip=(0.0, 1.0))
        n_eff = share_effective_size(estimate, se, float(r), True)  # at most the r balls: never more independent
        df = kish if method == "jackknife_wilson_df" else None
        # n_eff is capped at the r real balls and the far tail's trials at n_eff, at any number of generated images
        return dataclasses.replace(_score(method, estimate, n_eff, confidence, n, df=df), trials_cap=int(r))
    rng = np.random.default_rng(seed)
    fmember = member.astype(np.float32)
    if method in ("half_sampling", "subsampling"):
        m = max(1, n // 2)
        reps = _coverage_of(_subsample_masks(rng, n, m, n_resamples), fmember)
        if method == "half_sampling":
            se = math.sqrt(m / (n - m) * float(np.var(reps, ddof=1)))
            return _normal(method, estimate, se, confidence, n, clip=(0.0, 1.0))
        alpha = (1.0 - confidence) / 2.0
        roots = math.sqrt(m) * (reps - estimate)
        q_low, q_high = np.quantile(roots, [alpha, 1.0 - alpha])
        low, high = estimate - q_high / math.sqrt(n), estimate - q_low / math.sqrt(n)
        low, high = (min(max(float(v), 0.0), 1.0) for v in (low, high))
        return Interval(estimate, low, high, method, confidence, n)
    reps = _coverage_of(_bootstrap_counts(rng, n, n_resamples), fmember)
    jack = _coverage_jackknife(member) if method == "bca" else None
    return _from_replicates(method, estimate, reps, confidence, n, jack, clip=(0.0, 1.0))


def precision_interval(membership: object, *, n_missing: int = 0, method: str = "wilson", confidence: float = 0.95,
                       n_resamples: int = 1000, seed: int = 0) -> Interval:
    """Interval for precision, the share of generated images inside the real manifold.

    A binomial proportion over ``n = rows + n_missing`` images given the reference (pass the de-duplicated rows
    when duplicates were removed). ``wilson`` (the default) sets ``n_effective = n``, so :meth:`Interval.se_at` is
    the score test's; the other :data:`PRECISION_METHODS` are the usual alternatives.

    Args:
        membership: boolean ``(n_scored, n_real)`` membership, or a 1-D boolean ``inside`` per scored image.
        n_missing: generated images without a feature; each counts as outside.

    Example:
        >>> inside = np.r_[np.ones(30, bool), np.zeros(10, bool)]
        >>> iv = precision_interval(inside)
        >>> iv.estimate, round(iv.low, 4), round(iv.high, 4)
        (0.75, 0.5981, 0.8581)
        >>> precision_interval(inside, n_missing=10).estimate
        0.6
    """
    m = np.asarray(membership)
    if m.ndim == 2:
        inside = _membership(m).any(axis=1)
    elif m.ndim == 1:
        inside = _membership(m[:, None], "membership (1-D inside vector)")[:, 0]
    else:
        raise ValueError(f"`membership` must be (n_scored, n_real) or (n_scored,), but got shape {m.shape}")
    if isinstance(n_missing, bool) or not isinstance(n_missing, (int, np.integer)) or n_missing < 0:
        raise ValueError(f"`n_missing` must be a non-negative integer, but got {n_missing!r}")
    method = _check_method(method, PRECISION_METHODS)
    confidence = _check_confidence(confidence)
    n = int(inside.size + n_missing)
    if n < 1:
        raise ValueError("precision needs at least one generated image, but `membership` has 0 rows and `n_missing` is 0")
    k = int(np.count_nonzero(inside))
    p = k / n
    z = _z(confidence)
    alpha = 1.0 - confidence
    if method == "percentile":
        rng = np.random.default_rng(seed)
        values = np.r_[inside.astype(np.float64), np.zeros(n_missing)]
        counts = _bootstrap_counts(rng, n, _check_resamples(n_resamples))
        reps = counts @ values / n
        return _from_replicates(method, p, reps, confidence, n)
    se = math.sqrt(p * (1.0 - p) / n)
    if method == "wald":
        return _normal(method, p, se, confidence, n, clip=(0.0, 1.0))
    if method == "wilson":
        return _score(method, p, float(n), confidence, n)
    if method == "agresti_coull":
        p_t, se_t = agresti_coull(k, n, confidence)
        low, high = p_t - z * se_t, p_t + z * se_t
    elif method == "clopper_pearson":
        low = float(_special.betaincinv(k, n - k + 1, alpha / 2.0)) if k > 0 else 0.0
        high = float(_special.betaincinv(k + 1, n - k, 1.0 - alpha / 2.0)) if k < n else 1.0
    else:  # jeffreys
        low = float(_special.betaincinv(k + 0.5, n - k + 0.5, alpha / 2.0)) if k > 0 else 0.0
        high = float(_special.betaincinv(k + 0.5, n - k + 0.5, 1.0 - alpha / 2.0)) if k < n else 1.0
    low, high = max(low, 0.0), min(high, 1.0)
    return Interval(p, float(low), float(high), method, confidence, n, se if method == "agresti_coull" else None)
