"""Small shared statistics helpers: Hoeffding half-widths and a seeded percentile bootstrap.

Both work on estimates built from means of bounded per-image values (for example a 0/1
indicator "this image shows a woman", or a per-image score in [0, 1]).

Hoeffding (distribution-free, valid for any sample size)
    For independent variables ``X_j`` with ``a_j <= X_j <= b_j``, Hoeffding's inequality gives
    ``P(|sum X_j - E sum X_j| >= t) <= 2 exp(-2 t^2 / sum (b_j - a_j)^2)``.  An estimate
    ``sum_s w_s * mean(sample_s)`` of per-image values in [0, 1] is such a sum: each image of
    sample ``s`` contributes a term of range ``|w_s| / n_s``, so ``sum (b_j - a_j)^2 =
    sum_s w_s^2 / n_s`` and, at confidence ``1 - delta``, the half-width is::

        t = sqrt(log(2 / delta) / 2 * sum_s w_s^2 / n_s)

    A single mean (``w = [1]``) gives the textbook ``sqrt(log(2/delta) / (2 n))``; a difference
    of two means (``w = [1, -1]``) gives ``sqrt(log(2/delta) / 2 * (1/n1 + 1/n2))``.

Percentile bootstrap
    Each sample (stratum) is resampled with replacement independently, the statistic is
    recomputed on every resample, and the interval is the ``(1 - confidence)/2`` and
    ``(1 + confidence)/2`` percentiles of the resampled statistics.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

__all__ = [
    "hoeffding_half_width",
    "hoeffding_half_width_combination",
    "hoeffding_half_width_difference",
    "index_bootstrap",
    "percentile_bootstrap",
]


def _named(name: str | None) -> str:
    """Message prefix naming what is bootstrapped (a gate id), or nothing."""
    return f"{name}: " if name else ""


def _percentile_interval(values: np.ndarray, confidence: float, name: str | None) -> tuple[float, float]:
    """``numpy.quantile`` (linear) at ``(1 -+ confidence) / 2``, defined where values are infinite.

    Linear interpolation between two equal infinities gives ``inf - inf = NaN``; there the
    quantile is that infinity (both neighbours agree).  Between ``-inf`` and ``+inf`` it is
    undefined and an error.
    """
    alpha = (1.0 - float(confidence)) / 2.0
    qs = [alpha, 1.0 - alpha]
    with np.errstate(invalid="ignore"):
        out = np.quantile(values, qs)
    for j in np.flatnonzero(np.isnan(out)):
        below = np.quantile(values, qs[j], method="lower")
        above = np.quantile(values, qs[j], method="higher")
        if below != above:
            raise ValueError(
                f"{_named(name)}the {qs[j]:.3g} quantile of the resampled statistic lies between "
                f"{below} and {above}: undefined"
            )
        out[j] = below
    return float(out[0]), float(out[1])


def _check_no_nan_statistic(values: np.ndarray, name: str | None) -> None:
    bad = np.flatnonzero(np.isnan(values))
    if bad.size:
        raise ValueError(
            f"{_named(name)}`statistic` returned NaN on {bad.size} of {values.size} bootstrap "
            f"resamples (first: resample {int(bad[0])}); the interval would be NaN: make the "
            "statistic defined on every resample or leave the interval out"
        )


def _check_delta(delta: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)):
        raise TypeError(f"`delta` must be a float in (0, 1), but got {delta!r}")
    if not 0.0 < float(delta) < 1.0:
        raise ValueError(f"`delta` must be in (0, 1) (confidence is 1 - delta), but got {delta!r}")
    return float(delta)


def _check_count(name: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"`{name}` must be a positive integer, but got {n!r}")
    if n < 1:
        raise ValueError(f"`{name}` must be a positive integer, but got {n!r}")
    return int(n)


def hoeffding_half_width_combination(
    weights: Sequence[float], counts: Sequence[int], delta: float = 0.05
) -> float:
    """Hoeffding half-width of ``sum_s weights[s] * mean(sample_s)`` for values in [0, 1].

    The samples must be independent of each other and hold i.i.d. values in [0, 1]; sample
    ``s`` has ``counts[s]`` values.  With probability at least ``1 - delta`` the estimate is
    within ``sqrt(log(2 / delta) / 2 * sum_s weights[s]**2 / counts[s])`` of its expectation
    (Hoeffding's inequality applied to all values at once; see the module docstring).

    Args:
        weights: coefficient of each sample mean in the estimate.
        counts: number of values behind each sample mean (positive integers).
        delta: the bound fails with probability at most ``delta``; confidence is ``1 - delta``.

    Returns:
        The half-width ``t`` (0.0 when every weight is zero).

    Raises:
        ValueError: if ``weights`` and ``counts`` differ in length or are empty, a weight is
            not finite, a count is not positive, or ``delta`` is outside (0, 1).
        TypeError: if a count is not an integer.

    Example:
        >>> round(hoeffding_half_width_combination([1.0], [100]), 4)
        0.1358
        >>> round(hoeffding_half_width_combination([0.5, 0.5, -0.5, -0.5], [100, 100, 100, 100]), 4)
        0.1358
    """
    delta = _check_delta(delta)
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"`weights` must be a non-empty 1-D sequence, but got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"`weights` must be finite, but got {list(w)}")
    if len(counts) != w.size:
        raise ValueError(
            f"`weights` and `counts` must have the same length, but got {w.size} and {len(counts)}"
        )
    n = np.array([_check_count(f"counts[{i}]", c) for i, c in enumerate(counts)], dtype=float)
    return math.sqrt(math.log(2.0 / delta) / 2.0 * float(np.sum(w**2 / n)))


def hoeffding_half_width(n: int, delta: float = 0.05) -> float:
    """Hoeffding half-width ``sqrt(log(2/delta) / (2 n))`` of a mean of ``n`` values in [0, 1].

    Args:
        n: number of i.i.d. values in [0, 1].
        delta: failure probability; confidence is ``1 - delta``.

    Raises:
        ValueError: if ``n < 1`` or ``delta`` is outside (0, 1).
        TypeError: if ``n`` is not an integer.

    Example:
        >>> round(hoeffding_half_width(100), 4)
        0.1358
        >>> hoeffding_half_width(400) / hoeffding_half_width(100)
        0.5
    """
    return hoeffding_half_width_combination([1.0], [_check_count("n", n)], delta)


def hoeffding_half_width_difference(n1: int, n2: int, delta: float = 0.05) -> float:
    """Hoeffding half-width of ``mean(A) - mean(B)`` for independent samples of values in [0, 1].

    Equals ``sqrt(log(2/delta) / 2 * (1/n1 + 1/n2))``.  This is Hoeffding's inequality applied
    to all ``n1 + n2`` values at once; it is tighter than a union bound over the two means
    (``sqrt(log(4/delta)/2) * (1/sqrt(n1) + 1/sqrt(n2))``) and than
    ``sqrt(log(2/delta)/2) * (1/sqrt(n1) + 1/sqrt(n2))``.

    Args:
        n1: number of values behind the first mean.
        n2: number of values behind the second mean.
        delta: failure probability; confidence is ``1 - delta``.

    Raises:
        ValueError: if a count is not positive or ``delta`` is outside (0, 1).
        TypeError: if a count is not an integer.

    Example:
        >>> round(hoeffding_half_width_difference(100, 100), 4)
        0.1921
        >>> hoeffding_half_width_difference(400, 400) / hoeffding_half_width_difference(100, 100)
        0.5
    """
    return hoeffding_half_width_combination(
        [1.0, -1.0], [_check_count("n1", n1), _check_count("n2", n2)], delta
    )


def percentile_bootstrap(
    samples: Sequence[Sequence[float]] | Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    name: str | None = None,
) -> tuple[float, float]:
    """Seeded percentile-bootstrap interval of a statistic of one or more independent samples.

    Each sample holds one value per unit (image, prompt, ...) and is resampled with
    replacement independently of the others (a stratified bootstrap).  ``statistic`` is called
    once, vectorised: it receives one array per sample, of shape ``(n_resamples, n_s)``, and must
    reduce over the last axis, returning shape ``(n_resamples,)`` -- e.g.
    ``lambda a, b: a.mean(axis=-1) - b.mean(axis=-1)``.

    Args:
        samples: a sequence of 1-D samples (a single sample is ``[values]``).
        statistic: vectorised statistic as described above.
        n_resamples: number of bootstrap resamples.
        confidence: coverage of the interval, in (0, 1).
        seed: seed for ``numpy.random.default_rng``; equal seeds give equal intervals.
        name: what is bootstrapped (e.g. the gate id), put at the start of error messages.

    Returns:
        ``(low, high)`` percentiles of the resampled statistic.

    Raises:
        ValueError: if there are no samples, a sample is empty or not 1-D, a sample holds NaN
            (the message names ``name``, the sample and the positions), ``n_resamples < 1``,
            ``confidence`` is outside (0, 1), or ``statistic`` returns the wrong shape or NaN
            on some resample (infinities are allowed: a ratio may legitimately be infinite).

    Example:
        >>> import numpy as np
        >>> ones = np.ones(20)
        >>> percentile_bootstrap([ones], lambda a: a.mean(axis=-1))
        (1.0, 1.0)
        >>> x = np.r_[np.zeros(50), np.ones(50)]
        >>> lo, hi = percentile_bootstrap([x], lambda a: a.mean(axis=-1), seed=1)
        >>> bool(0.3 < lo < 0.5 < hi < 0.7)
        True
        >>> percentile_bootstrap([[0.5, float("nan")]], lambda a: a.mean(axis=-1), name="test_cis[k2]")
        Traceback (most recent call last):
        ...
        ValueError: test_cis[k2]: `samples[0]` holds NaN at positions [1] (1 of 2 values); the bootstrap interval would be NaN
    """
    if isinstance(samples, np.ndarray) and samples.ndim == 1:
        raise ValueError(
            "`samples` must be a sequence of samples; wrap a single 1-D sample as `[values]`"
        )
    arrays = [np.asarray(s, dtype=float) for s in samples]
    if not arrays:
        raise ValueError("`samples` must contain at least one sample, but got none")
    for i, a in enumerate(arrays):
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"{_named(name)}`samples[{i}]` must be a non-empty 1-D sample, but got shape {a.shape}")
        bad = np.flatnonzero(np.isnan(a))
        if bad.size:
            shown = bad[:10].tolist()
            raise ValueError(
                f"{_named(name)}`samples[{i}]` holds NaN at positions {shown}{' ...' if bad.size > 10 else ''} "
                f"({bad.size} of {a.size} values); the bootstrap interval would be NaN"
            )
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"`n_resamples` must be a positive integer, but got {n_resamples!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must be in (0, 1), but got {confidence!r}")

    rng = np.random.default_rng(seed)
    resampled = [a[rng.integers(0, a.size, size=(int(n_resamples), a.size))] for a in arrays]
    values = np.asarray(statistic(*resampled), dtype=float)
    if values.shape != (int(n_resamples),):
        raise ValueError(
            "`statistic` must reduce over the last axis and return shape "
            f"({int(n_resamples)},), but returned shape {values.shape}"
        )
    _check_no_nan_statistic(values, name)
    return _percentile_interval(values, confidence, name)


def index_bootstrap(
    statistic: Callable[[np.ndarray], float],
    n_units: int,
    *,
    strata: Sequence[object] | None = None,
    n_resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    name: str | None = None,
    return_replicates: bool = False,
) -> tuple[float, float] | tuple[tuple[float, float], np.ndarray]:
    """Seeded percentile-bootstrap interval of any statistic of a set of units (images, prompts).

    Each resample draws ``n_units`` unit indices with replacement (within each stratum when
    ``strata`` labels are given, so every group keeps its size) and calls ``statistic(indices)``.
    Use it when the statistic is not vectorisable (a percentile per object, a k-NN membership).

    Args:
        statistic: maps an int array of unit indices to a number.
        n_units: how many units there are.
        strata: optional label per unit; resampling stays within each label.
        n_resamples: number of resamples (B).
        confidence: coverage of the interval, in (0, 1).
        seed: equal seeds give equal intervals.
        name: what is bootstrapped (e.g. the gate id), put at the start of error messages.
        return_replicates: also return the ``n_resamples`` replicate values (for a bootstrap p-value).

    Raises:
        ValueError: ``n_units < 1``, ``n_resamples < 1``, ``confidence`` outside (0, 1),
            ``strata`` of the wrong length, or ``statistic`` returning NaN on some resample
            (the message names ``name``; infinities are allowed).

    Example:
        >>> x = np.r_[np.zeros(50), np.ones(50)]
        >>> lo, hi = index_bootstrap(lambda idx: x[idx].mean(), 100, seed=1)
        >>> bool(0.3 < lo < 0.5 < hi < 0.7)
        True
        >>> index_bootstrap(lambda idx: float("nan"), 3, n_resamples=5, name="test_region_coverage[x]")
        Traceback (most recent call last):
        ...
        ValueError: test_region_coverage[x]: `statistic` returned NaN on 5 of 5 bootstrap resamples (first: resample 0); the interval would be NaN: make the statistic defined on every resample or leave the interval out
    """
    if n_units < 1:
        raise ValueError(f"{_named(name)}n_units must be >= 1, got {n_units}")
    if n_resamples < 1:
        raise ValueError(f"{_named(name)}n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"{_named(name)}confidence must be in (0, 1), got {confidence}")
    if strata is not None and len(strata) != n_units:
        raise ValueError(f"{_named(name)}strata has {len(strata)} labels for {n_units} units")
    rng = np.random.default_rng(seed)
    groups = [np.arange(n_units)]
    if strata is not None:
        labels = np.asarray([str(s) for s in strata])
        groups = [np.flatnonzero(labels == lab) for lab in dict.fromkeys(labels)]
    values = np.empty(n_resamples)
    for b in range(n_resamples):
        idx = np.concatenate([g[rng.integers(0, len(g), len(g))] for g in groups])
        values[b] = statistic(idx)
    _check_no_nan_statistic(values, name)
    interval = _percentile_interval(values, confidence, name)
    return (interval, values) if return_replicates else interval
