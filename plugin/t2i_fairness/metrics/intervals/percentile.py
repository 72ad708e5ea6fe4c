"""A mean over groups of a low percentile (DIG In's Object Consistency) and its normal-theory moments."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import ClassVar, Mapping, Sequence

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.intervals.resampling import (_check_confidence, _check_method, _check_resamples, _finite_1d,
                                                       _from_replicates, _normal)
from t2i_fairness.metrics.intervals.value import Interval

__all__ = ["PERCENTILE_METHODS", "PercentileMean", "normal_percentile_mean", "normal_percentile_variance",
           "percentile_mean_interval", "percentile_variance"]


PERCENTILE_METHODS: tuple[str, ...] = (
    "jackknife_t",
    "jackknife",
    "smoothed_se",
    "bootstrap_se",
    "smoothed_percentile",
    "percentile",
    "basic",
    "bca",
    "half_sampling",
)


def _groups(scores: Mapping[str, object] | Sequence[object], name: str, min_size: int) -> list[np.ndarray]:
    if isinstance(scores, Mapping):
        items = [(str(k), v) for k, v in scores.items()]
    elif isinstance(scores, np.ndarray) and scores.ndim == 2:
        items = [(str(i), row) for i, row in enumerate(scores)]
    elif isinstance(scores, (str, bytes)) or not isinstance(scores, Sequence):
        raise ValueError(f"`{name}` must map group names to 1-D scores (or be a sequence of them), but got {type(scores).__name__}")
    else:
        items = [(str(i), v) for i, v in enumerate(scores)]
    if not items:
        raise ValueError(f"`{name}` holds no group")
    return [_finite_1d(f"{name}[{k!r}]", v, min_size) for k, v in items]


def _position(n: int, q: float) -> tuple[int, float]:
    """numpy's linear percentile of n sorted values: ``(1 - g) x[j] + g x[j + 1]`` (0-indexed)."""
    h = (n - 1) * q / 100.0
    j = min(int(math.floor(h)), n - 1)
    return j, h - j


def _loo_percentile_variance(sorted_x: np.ndarray, q: float) -> np.ndarray:
    """Delete-one jackknife variance of ``np.percentile(., q)`` for sorted rows (..., n), exactly.

    Deleting sorted value ``i`` leaves ``n - 1`` values whose percentile sits at ``j, g`` of
    :func:`_position` (n - 1): it equals ``(1-g) x[j] + g x[j+1]`` when ``i > j + 1``,
    ``(1-g) x[j] + g x[j+2]`` when ``i == j + 1`` and ``(1-g) x[j+1] + g x[j+2]`` when ``i <= j``.
    """
    n = sorted_x.shape[-1]
    j, g = _position(n - 1, q)

    def at(k: int) -> np.ndarray:
        return sorted_x[..., min(k, n - 1)]

    values = np.stack([(1 - g) * at(j) + g * at(j + 1), (1 - g) * at(j) + g * at(j + 2),
                       (1 - g) * at(j + 1) + g * at(j + 2)], axis=-1)
    counts = np.array([n - j - 2, 1, j + 1], dtype=np.float64)
    mean = (values * counts).sum(axis=-1) / n
    return (n - 1) / n * (((values - mean[..., None]) ** 2) * counts).sum(axis=-1)


def percentile_variance(x, percentile: float = 10.0) -> np.ndarray:
    """``jackknife_t``'s variance of one group's ``percentile``: the exact delete-one jackknife variance, floored at
    its normal-theory value; vectorised over leading axes of ``x`` (``(..., n)``).
    """
    x = np.asarray(x, dtype=np.float64)
    q = float(percentile)
    jack = _loo_percentile_variance(np.sort(x, axis=-1), q)
    return np.maximum(jack, np.var(x, axis=-1, ddof=1) * normal_percentile_variance(x.shape[-1], q))


def _normal_order_statistics(n: int):
    """The grid, the density of the ``r``-th of ``n`` standard normal order statistics (1-indexed) on it, and the
    trapezoid integral over it: what :func:`normal_percentile_variance` and :func:`normal_percentile_mean` read."""
    z = np.linspace(-12.0, 12.0, 48001)
    dz = z[1] - z[0]
    phi = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    with np.errstate(divide="ignore"):
        log_cdf, log_sf = np.log(_special.ndtr(z)), np.log(_special.ndtr(-z))

    def integral(y: np.ndarray) -> float:
        return float(np.sum(y[1:] + y[:-1]) * 0.5 * dz)

    def density(r: int) -> np.ndarray:
        logc = _special.gammaln(n + 1) - _special.gammaln(r) - _special.gammaln(n - r + 1)
        return np.exp(logc + (r - 1) * log_cdf + (n - r) * log_sf) * phi

    return z, density, integral


@functools.lru_cache(maxsize=256)
def normal_percentile_variance(n: int, percentile: float) -> float:
    """Variance of ``np.percentile(z, percentile)`` for ``n`` i.i.d. standard normal values, by numerical integration
    of the order statistics' densities (relative error below 1e-6): the floor of :func:`percentile_mean_interval`.

    Example:
        >>> round(normal_percentile_variance(2, 50.0), 6)    # the mean of two: 1/2
        0.5
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`n` must be a positive integer, but got {n!r}")
    if not 0.0 <= float(percentile) <= 100.0:
        raise ValueError(f"`percentile` must be in [0, 100], but got {percentile!r}")
    j, g = _position(int(n), float(percentile))
    r = j + 1  # 1-indexed order statistic
    n = int(n)
    z, density, integral = _normal_order_statistics(n)
    dz = z[1] - z[0]
    phi = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    with np.errstate(divide="ignore"):
        log_cdf, log_sf = np.log(_special.ndtr(z)), np.log(_special.ndtr(-z))

    f1 = density(r)
    m1 = integral(z * f1)
    v1 = integral(z * z * f1) - m1 * m1
    if g == 0.0 or r + 1 > n:
        return v1
    f2 = density(r + 1)
    m2 = integral(z * f2)
    v2 = integral(z * z * f2) - m2 * m2
    # E[Z_(r) Z_(r+1)] = c * int x phi(x) Phi(x)^(r-1) H(x) dx,  H(x) = int_x^inf y phi(y) S(y)^(n-r-1) dy
    inner = z * phi * np.exp((n - r - 1) * log_sf)
    tail = np.r_[np.cumsum(((inner[1:] + inner[:-1]) * 0.5 * dz)[::-1])[::-1], 0.0]
    logc = _special.gammaln(n + 1) - _special.gammaln(r) - _special.gammaln(n - r)
    cross = integral(np.exp(logc + (r - 1) * log_cdf) * z * phi * tail) - m1 * m2
    return float((1 - g) ** 2 * v1 + g * g * v2 + 2 * g * (1 - g) * cross)


def _silverman(x: np.ndarray) -> float:
    sd = float(np.std(x, ddof=1))
    iqr = float(np.subtract(*np.percentile(x, [75, 25]))) / 1.349
    spread = min(sd, iqr) if iqr > 0 else sd
    return 0.9 * spread * x.size ** (-0.2)


def _loo_values(x: np.ndarray, q: float) -> np.ndarray:
    n = x.size
    keep = ~np.eye(n, dtype=bool)
    return np.percentile(np.broadcast_to(x, (n, n))[keep].reshape(n, n - 1), q, axis=1)


@functools.lru_cache(maxsize=1024)
def normal_percentile_mean(n: int, percentile: float) -> float:
    """Expectation of ``np.percentile(z, percentile)`` for ``n`` i.i.d. standard normal values (numerical
    integration as in :func:`normal_percentile_variance`): a low percentile's moves with ``n``.

    Example:
        >>> round(normal_percentile_mean(2, 10.0), 4)   # 0.9 min + 0.1 max
        -0.4514
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`n` must be a positive integer, but got {n!r}")
    if not 0.0 <= float(percentile) <= 100.0:
        raise ValueError(f"`percentile` must be in [0, 100], but got {percentile!r}")
    n = int(n)
    j, g = _position(n, float(percentile))
    z, density, integral = _normal_order_statistics(n)
    mean = (1.0 - g) * integral(z * density(j + 1))
    if g > 0:
        mean += g * integral(z * density(j + 2))
    return float(mean)


@dataclass(frozen=True)
class PercentileMean(Interval):
    """The mean over groups of each group's sample percentile (DIG In Object Consistency) with what its drift needs:
    each group's size and sample standard deviation. A low sample percentile's expectation moves with the images
    (:func:`normal_percentile_mean`), so a look's estimate is not ``N``'s: :meth:`drift` is the expected move, for
    normal scores with the groups' standard deviations, which ``--t2i-sequential``'s curtailment counts."""

    percentile: float = 10.0
    sizes: tuple[int, ...] = ()
    sds: tuple[float, ...] = ()
    models_drift: ClassVar[bool] = True  # its expectation's move toward N is modelled (:meth:`drift`)
    df_structural: ClassVar[bool] = True  # one degree of freedom per group: the same at N

    def drift(self, fraction: float) -> float:
        """The expected move of the estimate toward ``N`` (the look's size over ``fraction``):
        ``mean_g sd_g (m(n_g / fraction) - m(n_g))``, ``m`` :func:`normal_percentile_mean`.

        Example:
            >>> pm = PercentileMean(0.3, 0.2, 0.4, "jackknife_t", 0.95, 24, se=0.02, df=2, sizes=(12, 12), sds=(0.02, 0.03))
            >>> round(pm.drift(0.25), 4)
            -0.0036
        """
        t = float(fraction)
        if not self.sizes or not 0.0 < t <= 1.0:
            return 0.0
        moves = [sd * (normal_percentile_mean(max(n, int(round(n / t))), self.percentile)
                       - normal_percentile_mean(n, self.percentile)) for n, sd in zip(self.sizes, self.sds)]
        return float(sum(moves) / len(moves))


def percentile_mean_interval(scores: Mapping[str, object] | Sequence[object], *, percentile: float = 10.0,
                             method: str = "jackknife_t", confidence: float = 0.95, n_resamples: int = 1000,
                             seed: int = 0) -> Interval:
    """Interval for the mean over groups of each group's ``percentile`` (DIG In Object Consistency).

    Images are the random units within each fixed group. The default ``jackknife_t`` takes each group's exact
    delete-one jackknife variance, floored at the normal-theory variance for the group's standard deviation
    (:func:`normal_percentile_variance`), with a t quantile on one degree of freedom per group: resampling a
    percentile of 6-60 values under-covers (docs/calibration.md).

    Args:
        scores: group -> 1-D per-image scores (or a sequence of arrays), at least 2 finite values each.
        percentile: in [0, 100].
        method: one of :data:`PERCENTILE_METHODS`.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> scores = {"bag": rng.normal(0.3, 0.02, 12), "stove": rng.normal(0.25, 0.03, 12)}
        >>> iv = percentile_mean_interval(scores)
        >>> round(iv.estimate, 4), iv.low < iv.estimate < iv.high, iv.df, iv.n_units
        (0.2501, True, 2, 24)
    """
    arrays = _groups(scores, "scores", 2)
    if isinstance(percentile, bool) or not isinstance(percentile, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(percentile) <= 100.0:
        raise ValueError(f"`percentile` must be a number in [0, 100], but got {percentile!r}")
    q = float(percentile)
    method = _check_method(method, PERCENTILE_METHODS)
    confidence = _check_confidence(confidence)
    n_resamples = _check_resamples(n_resamples)
    k = len(arrays)
    n_units = int(sum(a.size for a in arrays))
    estimate = math.fsum(float(np.percentile(a, q)) for a in arrays) / k
    if method == "jackknife":
        var = np.array([float(_loo_percentile_variance(np.sort(a), q)) for a in arrays])
        return _normal(method, estimate, math.sqrt(var.sum()) / k, confidence, n_units)
    if method == "jackknife_t":
        var = np.array([float(percentile_variance(a, q)) for a in arrays])
        iv = _normal(method, estimate, math.sqrt(var.sum()) / k, confidence, n_units, df=k)
        return PercentileMean(**{f.name: getattr(iv, f.name) for f in dataclasses.fields(iv)}, percentile=q,
                              sizes=tuple(int(a.size) for a in arrays),
                              sds=tuple(float(np.std(a, ddof=1)) for a in arrays))
    rng = np.random.default_rng(seed)
    if method == "half_sampling":
        var = 0.0
        for a in arrays:
            m = max(1, a.size // 2)
            keys = rng.random((n_resamples, a.size))
            sub = np.take_along_axis(np.broadcast_to(a, keys.shape), np.argsort(keys, axis=1)[:, :m], axis=1)
            var += m / (a.size - m) * float(np.var(np.percentile(sub, q, axis=1), ddof=1))
        return _normal(method, estimate, math.sqrt(var) / k, confidence, n_units)
    smooth = method.startswith("smoothed")
    reps = np.zeros(n_resamples)
    for a in arrays:
        draws = a[rng.integers(0, a.size, size=(n_resamples, a.size))]
        if smooth:
            h = _silverman(a)
            s2 = float(np.var(a, ddof=1))
            if h > 0 and s2 > 0:
                mean = float(a.mean())
                draws = mean + (draws - mean + h * rng.standard_normal(draws.shape)) / math.sqrt(1.0 + h * h / s2)
        reps += np.percentile(draws, q, axis=1)
    reps /= k
    if smooth:
        inner = "bootstrap_se" if method == "smoothed_se" else "percentile"
        iv = _from_replicates(inner, estimate, reps, confidence, n_units)
        return Interval(iv.estimate, iv.low, iv.high, method, confidence, n_units, iv.se, iv.df)
    jack = None
    if method == "bca":
        total = estimate * k
        jack = np.concatenate([(total - float(np.percentile(a, q)) + _loo_values(a, q)) / k for a in arrays])
    return _from_replicates(method, estimate, reps, confidence, n_units, jack)
