"""Shared statistics helpers: Hoeffding half-widths and a seeded percentile bootstrap.

For ``sum_s w_s * mean(sample_s)`` of values in [0, 1], Hoeffding's half-width at confidence
``1 - delta`` is ``sqrt(log(2 / delta) / 2 * sum_s w_s^2 / n_s)``, valid at any sample size.
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
    """``numpy.quantile`` (linear) at ``(1 -+ confidence) / 2``, defined where values are infinite."""
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
    """Hoeffding half-width of ``sum_s weights[s] * mean(sample_s)`` for independent samples in [0, 1].

    Example:
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
    """Hoeffding half-width ``sqrt(log(2/delta) / (2 n))`` of a mean of ``n`` values in [0, 1]."""
    return hoeffding_half_width_combination([1.0], [_check_count("n", n)], delta)


def hoeffding_half_width_difference(n1: int, n2: int, delta: float = 0.05) -> float:
    """Hoeffding half-width ``sqrt(log(2/delta) / 2 * (1/n1 + 1/n2))`` of ``mean(A) - mean(B)``."""
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
    """Seeded percentile-bootstrap interval ``(low, high)`` of a statistic of independent samples (stratified).

    Args:
        samples: a sequence of 1-D samples (a single sample is ``[values]``).
        statistic: vectorised, one ``(n_resamples, n_s)`` array per sample to ``(n_resamples,)``,
            e.g. ``lambda a, b: a.mean(axis=-1) - b.mean(axis=-1)``.
        name: what is bootstrapped (e.g. the gate id), put at the start of error messages.

    Example:
        >>> import numpy as np
        >>> x = np.r_[np.zeros(50), np.ones(50)]
        >>> lo, hi = percentile_bootstrap([x], lambda a: a.mean(axis=-1), seed=1)
        >>> bool(0.3 < lo < 0.5 < hi < 0.7)
        True
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
    """Seeded percentile-bootstrap interval of ``statistic(indices)`` over ``n_units`` resampled units.

    For statistics that do not vectorise; ``strata`` keeps every group's size.

    Args:
        return_replicates: also return the replicate values (for a bootstrap p-value).
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
