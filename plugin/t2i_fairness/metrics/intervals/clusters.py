"""Means and statistics over sampled prompts (cluster resampling) and over fixed prompts (stratified)."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from t2i_fairness.metrics.intervals.lawfree import BoundedUnits
from t2i_fairness.metrics.intervals.resampling import (_bootstrap_counts, _check_confidence, _check_method,
                                                       _check_resamples, _finite_1d, _from_replicates, _normal, _score)
from t2i_fairness.metrics.intervals.tails import share_effective_size
from t2i_fairness.metrics.intervals.value import Interval

__all__ = ["CLUSTER_METHODS", "CLUSTER_STATISTIC_METHODS", "STRATIFIED_METHODS", "cluster_bootstrap_interval",
           "cluster_mean_interval", "cluster_share_runs", "stratified_mean_interval"]


CLUSTER_METHODS: tuple[str, ...] = ("auto", "wilson", "t", "percentile", "basic", "bootstrap_se", "bca")


CLUSTER_STATISTIC_METHODS: tuple[str, ...] = ("t", "percentile", "basic", "bootstrap_se", "bca")


STRATIFIED_METHODS: tuple[str, ...] = ("t", "percentile", "basic", "bootstrap_se")


def _cluster_index(clusters: object, n: int) -> tuple[np.ndarray, int]:
    labels = np.asarray(clusters)
    if labels.ndim != 1 or labels.size != n:
        raise ValueError(f"`clusters` must hold one label per value ({n}), but got shape {labels.shape}")
    _, codes = np.unique(labels.astype(str) if labels.dtype.kind == "O" else labels, return_inverse=True)
    return codes.ravel(), int(codes.max()) + 1 if codes.size else 0


def cluster_mean_interval(values: object, clusters: object, *, weighting: str = "image", method: str = "auto",
                          confidence: float = 0.95, n_resamples: int = 1000, seed: int = 0,
                          law_free: bool = True) -> Interval:
    """Interval for a mean of per-image values when the prompts (clusters) were sampled.

    Prompts are the units. ``weighting="image"``: the pooled mean; ``"cluster"``: the mean of prompt means. ``t``:
    a cluster-robust standard error on ``G - 1`` degrees of freedom. ``wilson`` (``auto`` for values in [0, 1]):
    Korn and Graubard's score interval at the effective size of that error; with ``law_free`` it also holds
    free of the prompts' law (:attr:`Interval.bounded`: a betting test on the prompts' shares in their order, each
    prompt weighted alike whatever its image count, so a missing image keeps the law-free side).

    Args:
        values: 1-D per-image values; ``clusters``: one prompt label per value.
        method: one of :data:`CLUSTER_METHODS`.

    Example:
        >>> values, prompts = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0], ["a", "a", "b", "b", "c", "c"]
        >>> iv = cluster_mean_interval(values, prompts, method="t")
        >>> round(iv.estimate, 4), iv.df, round(iv.se, 4)
        (0.5, 2, 0.2887)
        >>> iv = cluster_mean_interval(values, prompts)   # wilson; 3 prompts: the law-free side excludes nothing
        >>> iv.method, round(iv.low, 4), round(iv.high, 4)
        ('wilson', 0.0, 1.0)
    """
    y = _finite_1d("values", values)
    codes, g = _cluster_index(clusters, y.size)
    if g < 2:
        raise ValueError(f"cluster intervals need at least 2 clusters (prompts), but got {g}")
    if weighting not in ("image", "cluster"):
        raise ValueError(f"unknown `weighting` {weighting!r}; choose from ['image', 'cluster']")
    method = _check_method(method, CLUSTER_METHODS)
    if method == "auto":
        method = "wilson" if (y.min() >= 0.0 and y.max() <= 1.0) else "t"
    confidence = _check_confidence(confidence)
    sums = np.bincount(codes, weights=y, minlength=g)
    sizes = np.bincount(codes, minlength=g).astype(np.float64)
    if weighting == "cluster":
        sums, sizes = sums / sizes, np.ones(g)
    estimate = float(sums.sum() / sizes.sum())
    if method in ("t", "wilson"):
        resid = sums - estimate * sizes
        se = math.sqrt(g / (g - 1) * float(np.sum(resid**2))) / float(sizes.sum())
        if method == "t":
            return _normal(method, estimate, se, confidence, g, df=g - 1)
        if y.min() < 0.0 or y.max() > 1.0:
            raise ValueError(
                f"method 'wilson' needs values in [0, 1] (shares), but `values` range over [{y.min()!r}, {y.max()!r}]"
            )
        n_eff = share_effective_size(estimate, se, float(y.size), bool(np.isin(y, (0.0, 1.0)).all()))
        # the few-prompts correction (z / t_{G-1})^2 is applied at each level (Interval.trials), not stored
        interval = _score(method, estimate, n_eff, confidence, g, df=g - 1)
        if not law_free:
            return interval
        means = np.bincount(codes, weights=y, minlength=g) / np.bincount(codes, minlength=g)  # each prompt's share
        units = BoundedUnits(g, float(means.mean()), float(means.var(ddof=1)), values=tuple(means.tolist()))
        tail = (1.0 - confidence) / 2.0  # displayed: the wider of Wilson's and the law-free limits
        return dataclasses.replace(interval, bounded=units, low=min(interval.low, units.limit(tail, "low")),
                                   high=max(interval.high, units.limit(tail, "high")))
    rng = np.random.default_rng(seed)
    w = _bootstrap_counts(rng, g, _check_resamples(n_resamples)).astype(np.float64)
    reps = (w @ sums) / (w @ sizes)
    jack = None
    if method == "bca":
        jack = (sums.sum() - sums) / (sizes.sum() - sizes)
    return _from_replicates(method, estimate, reps, confidence, g, jack)


def cluster_share_runs(sums, images: int, binary, *, multiplicity=None) -> dict[str, np.ndarray]:
    """:func:`cluster_mean_interval`'s ``wilson`` statistics of many simulated runs at once: ``sums`` holds each
    run's per-prompt sums of ``images`` values in [0, 1] (last axis; with ``multiplicity``, distinct sums and
    their counts). Returns the estimate, standard error, effective size, df and the prompts' shares' count, mean
    and variance, and (without ``multiplicity``) the shares in their order, from which :func:`share_limits` and
    :func:`betting_limits` (tuned for :data:`TUNED_LEVEL`) give :meth:`Interval.limit`.

    Example:
        >>> iv = cluster_mean_interval([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], ["a", "a", "b", "b", "c", "c"])
        >>> runs = cluster_share_runs(np.array([[1.0, 0.0, 2.0]]), 2, True)
        >>> bool(runs["estimate"][0] == iv.estimate), bool(runs["n_effective"][0] == iv.n_effective)
        (True, True)
    """
    sums = np.asarray(sums, dtype=np.float64)
    if multiplicity is None:
        m = np.ones(sums.shape)
    else:
        m = np.asarray(multiplicity, dtype=np.float64)
        sums = np.broadcast_to(sums, m.shape)
    g = m.sum(axis=-1)
    n_img = g * images
    est = (m * sums).sum(axis=-1) / n_img
    rss = (m * (sums - est[..., None] * images) ** 2).sum(axis=-1)
    se = np.sqrt(g / (g - 1) * rss) / n_img
    shares = sums / images
    mean = (m * shares).sum(axis=-1) / g
    var = (m * (shares - mean[..., None]) ** 2).sum(axis=-1) / (g - 1)
    out = {"estimate": est, "se": se, "n_effective": share_effective_size(est, se, n_img, binary),
           "df": g - 1, "units": g, "mean": mean, "var": var}
    if multiplicity is None:  # the prompts in their order: what the betting side reads (betting_p_value)
        out["shares"] = shares
    return out


def cluster_bootstrap_interval(statistic: Callable[[np.ndarray], float], clusters: object, *, method: str = "t",
                               confidence: float = 0.95, n_resamples: int = 200, seed: int = 0) -> Interval:
    """Interval for any statistic of images grouped by sampled prompts (prompts resampled).

    ``statistic(indices)`` maps an int array of image indices to a number (``arange(n)``: the estimate). ``t``:
    the delete-one-prompt jackknife on ``G - 1`` degrees of freedom; see :data:`CLUSTER_STATISTIC_METHODS`.

    Example:
        >>> y = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
        >>> iv = cluster_bootstrap_interval(lambda idx: y[idx].mean(), ["a", "a", "b", "b", "c", "c"])
        >>> round(iv.estimate, 4), round(iv.se, 4), iv.df
        (0.5, 0.2887, 2)
    """
    labels = np.asarray(clusters)
    codes, g = _cluster_index(labels, labels.size)
    if g < 2:
        raise ValueError(f"cluster intervals need at least 2 clusters (prompts), but got {g}")
    method = _check_method(method, CLUSTER_STATISTIC_METHODS)
    confidence = _check_confidence(confidence)
    order = np.argsort(codes, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(codes, minlength=g))[:-1])
    estimate = float(statistic(np.arange(codes.size)))
    if not math.isfinite(estimate):
        raise ValueError(f"`statistic` is not finite on the full sample: {estimate!r}")
    jack = None
    if method in ("t", "bca"):
        jack = np.array([float(statistic(np.concatenate(members[:c] + members[c + 1 :]))) for c in range(g)])
    if method == "t":
        se = math.sqrt((g - 1) / g * float(np.sum((jack - jack.mean()) ** 2)))
        return _normal(method, estimate, se, confidence, g, df=g - 1)
    rng = np.random.default_rng(seed)
    n_resamples = _check_resamples(n_resamples)
    draws = rng.integers(0, g, size=(n_resamples, g))
    reps = np.array([float(statistic(np.concatenate([members[c] for c in row]))) for row in draws])
    return _from_replicates(method, estimate, reps, confidence, g, jack)


def stratified_mean_interval(values: object, strata: object | None = None, *, weighting: str = "stratum",
                             method: str = "t", confidence: float = 0.95, n_resamples: int = 1000,
                             seed: int = 0) -> Interval:
    """Interval for a mean of per-image scores over fixed prompts (strata), images resampled within each.

    ``weighting="stratum"``: the mean of prompt means; ``"image"``: the pooled mean. ``t``: the stratified standard
    error with Welch-Satterthwaite degrees of freedom; ``strata=None`` is one stratum.

    Example:
        >>> iv = stratified_mean_interval([0.2, 0.4, 0.6, 0.8], ["p", "p", "q", "q"])
        >>> round(iv.estimate, 4), round(iv.se, 4), iv.df
        (0.5, 0.0707, 2.0)
    """
    y = _finite_1d("values", values, 2)
    if strata is None:
        codes, s_count, names = np.zeros(y.size, dtype=np.int64), 1, np.array(["all"])
    else:
        labels = np.asarray(strata)
        if labels.ndim != 1 or labels.size != y.size:
            raise ValueError(f"`strata` must hold one label per value ({y.size}), but got shape {labels.shape}")
        names, codes = np.unique(labels.astype(str), return_inverse=True)
        codes = codes.ravel()
        s_count = names.size
    if weighting not in ("stratum", "image"):
        raise ValueError(f"unknown `weighting` {weighting!r}; choose from ['stratum', 'image']")
    method = _check_method(method, STRATIFIED_METHODS)
    confidence = _check_confidence(confidence)
    sizes = np.bincount(codes, minlength=s_count)
    small = np.flatnonzero(sizes < 2)
    if small.size:
        raise ValueError(f"stratum {str(names[small[0]])!r} has {int(sizes[small[0]])} value(s); every stratum needs at least 2")
    means = np.bincount(codes, weights=y, minlength=s_count) / sizes
    weights = np.full(s_count, 1.0 / s_count) if weighting == "stratum" else sizes / sizes.sum()
    estimate = float(weights @ means)
    if method == "t":
        var_s = np.bincount(codes, weights=(y - means[codes]) ** 2, minlength=s_count) / (sizes - 1)
        a = weights**2 * var_s / sizes
        total = float(a.sum())
        denom = float(np.sum(a**2 / (sizes - 1)))
        df = total**2 / denom if denom > 0 else math.inf
        return _normal(method, estimate, math.sqrt(total), confidence, int(y.size), df=df)
    rng = np.random.default_rng(seed)
    n_resamples = _check_resamples(n_resamples)
    reps = np.zeros(n_resamples)
    for s in range(s_count):
        ys = y[codes == s]
        reps += weights[s] * ys[rng.integers(0, ys.size, size=(n_resamples, ys.size))].mean(axis=1)
    return _from_replicates(method, estimate, reps, confidence, int(y.size))
