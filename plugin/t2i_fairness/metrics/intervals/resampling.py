"""Argument checks and the resampling machinery the estimands share (bootstrap, jackknife, BCa, score)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.intervals.tails import _z
from t2i_fairness.metrics.intervals.value import Interval

__all__ = ["jackknife_se_df"]


def _check_confidence(confidence: object) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)):
        raise ValueError(f"`confidence` must be a float in (0, 1), but got {confidence!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must be in (0, 1), but got {confidence!r}")
    return float(confidence)


def _check_resamples(n_resamples: object, minimum: int = 2) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < minimum:
        raise ValueError(f"`n_resamples` must be an integer >= {minimum}, but got {n_resamples!r}")
    return int(n_resamples)


def _check_method(method: object, choices: tuple[str, ...]) -> str:
    if method not in choices:
        raise ValueError(f"unknown `method` {method!r}; choose from {list(choices)}")
    return str(method)


def _finite_1d(name: str, values: object, min_size: int = 1) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must hold real numbers, but got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1 or arr.size < min_size:
        raise ValueError(f"`{name}` must be 1-D with at least {min_size} value(s), but got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(f"`{name}` holds a non-finite value {arr[bad[0]]!r} at index {int(bad[0])}")
    return arr


def _membership(membership: object, name: str = "membership") -> np.ndarray:
    m = np.asarray(membership)
    if m.dtype != bool:
        if m.dtype.kind not in "biu" or (m.size and not np.isin(m, (0, 1)).all()):
            raise ValueError(f"`{name}` must be a boolean (n_fake, n_real) matrix, but got dtype {m.dtype}")
        m = m.astype(bool)
    if m.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D (n_fake, n_real) matrix, but got shape {m.shape}")
    return m


def _bootstrap_counts(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """(B, n) multiplicities of an ordinary bootstrap (n draws with replacement from n units)."""
    idx = rng.integers(0, n, size=(n_resamples, n))
    flat = idx + n * np.arange(n_resamples)[:, None]
    return np.bincount(flat.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)


def _subsample_masks(rng: np.random.Generator, n: int, m: int, n_resamples: int) -> np.ndarray:
    """(B, n) 0/1 masks of ``m`` units drawn without replacement."""
    keys = rng.random((n_resamples, n))
    chosen = np.argpartition(keys, m - 1, axis=1)[:, :m] if m < n else np.tile(np.arange(n), (n_resamples, 1))
    mask = np.zeros((n_resamples, n), dtype=np.float32)
    np.put_along_axis(mask, chosen, 1.0, axis=1)
    return mask


def _normal(method: str, estimate: float, se: float, confidence: float, n_units: int, df: float | None = None,
            clip: tuple[float, float] | None = None) -> Interval:
    q = float(_special.stdtrit(df, 0.5 + confidence / 2.0)) if df is not None and math.isfinite(df) else _z(confidence)
    low, high = estimate - q * se, estimate + q * se
    if clip is not None:
        low, high = (min(max(float(v), clip[0]), clip[1]) for v in (low, high))
    return Interval(float(estimate), float(low), float(high), method, confidence, n_units, float(se), df)


def _score(method: str, estimate: float, n_eff: float, confidence: float, n_units: int,
           df: float | None = None) -> Interval:
    """Wilson's score interval for a proportion ``estimate`` worth ``n_eff`` independent trials; with ``df``
    (a variance estimated from few clusters) at ``n_eff (z / t_df)^2`` trials (Korn & Graubard 1998), the
    interval recording the unadjusted ``n_eff`` and ``df`` (its limits at other levels adjust again)."""
    z = _z(confidence)
    shown = n_eff
    if df is not None:
        shown = max(n_eff * (z / float(_special.stdtrit(df, 0.5 + confidence / 2.0))) ** 2, 1e-9)
    interval = _wilson(method, estimate, shown, confidence, n_units, z)
    if df is None:
        return interval

    return dataclasses.replace(interval, n_effective=float(n_eff), df=float(df),
                               se=math.sqrt(estimate * (1.0 - estimate) / n_eff))


def _wilson(method: str, estimate: float, n_eff: float, confidence: float, n_units: int, z: float) -> Interval:
    centre = (estimate + z * z / (2.0 * n_eff)) / (1.0 + z * z / n_eff)
    half = z / (1.0 + z * z / n_eff) * math.sqrt(estimate * (1.0 - estimate) / n_eff + z * z / (4.0 * n_eff**2))
    se = math.sqrt(estimate * (1.0 - estimate) / n_eff)
    # the score interval always holds the estimate; say so exactly at 0 and 1 (rounding)
    low, high = min(max(centre - half, 0.0), estimate), max(min(centre + half, 1.0), estimate)
    return Interval(float(estimate), float(low), float(high), method, confidence, n_units, se, None, n_eff)


def _from_replicates(
    method: str,
    estimate: float,
    replicates: np.ndarray,
    confidence: float,
    n_units: int,
    jackknife: np.ndarray | None = None,
    clip: tuple[float, float] | None = None,
) -> Interval:
    """percentile / basic / bootstrap_se / bca interval from bootstrap replicates of the statistic."""
    alpha = (1.0 - confidence) / 2.0
    if method == "bootstrap_se":
        return _normal(method, estimate, float(np.std(replicates, ddof=1)), confidence, n_units, clip=clip)
    if method == "percentile":
        low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    elif method == "basic":
        q_low, q_high = np.quantile(replicates, [alpha, 1.0 - alpha])
        low, high = 2.0 * estimate - q_high, 2.0 * estimate - q_low
    elif method == "bca":
        low, high = _bca(estimate, replicates, jackknife, alpha)
    else:  # pragma: no cover - callers check the method
        raise ValueError(f"unknown method {method!r}")
    if clip is not None:
        low, high = (min(max(float(v), clip[0]), clip[1]) for v in (low, high))
    return Interval(float(estimate), float(low), float(high), method, confidence, n_units)


def _bca(estimate: float, replicates: np.ndarray, jackknife: np.ndarray | None, alpha: float) -> tuple[float, float]:
    """Efron's bias-corrected and accelerated percentile interval (Efron & Tibshirani 1993, ch. 14)."""
    b = replicates.size
    share = (np.count_nonzero(replicates < estimate) + 0.5 * np.count_nonzero(replicates == estimate)) / b
    share = min(max(share, 0.5 / b), 1.0 - 0.5 / b)
    z0 = float(_special.ndtri(share))
    acc = 0.0
    if jackknife is not None and jackknife.size > 1:
        d = jackknife.mean() - jackknife
        denom = float(np.sum(d**2)) ** 1.5
        acc = float(np.sum(d**3)) / (6.0 * denom) if denom > 0 else 0.0
    levels = []
    for a in (alpha, 1.0 - alpha):
        za = float(_special.ndtri(a))
        levels.append(float(_special.ndtr(z0 + (z0 + za) / (1.0 - acc * (z0 + za)))))
    low, high = np.quantile(replicates, levels)
    return float(low), float(high)


def jackknife_se_df(jack):
    """The delete-one jackknife's standard error and Kish's effective degrees of freedom ``(sum d^2)^2 / sum d^4``
    (at least 1) from the delete-one values ``jack``; ``(runs, n)`` arrays give arrays.

    Example:
        >>> [round(v, 4) for v in jackknife_se_df(np.array([0.25, 0.5, 0.5, 0.5, 0.5, 0.5]))]
        [0.2083, 1.4286]
    """
    jack = np.asarray(jack, dtype=np.float64)
    n = jack.shape[-1]
    if jack.ndim == 1:
        d2 = (jack - jack.mean()) ** 2
        se = math.sqrt((n - 1) / n * float(np.sum(d2)))
        return se, (1.0 if se == 0 else max(1.0, float(np.sum(d2)) ** 2 / float(np.sum(d2**2))))
    d2 = (jack - jack.mean(axis=-1, keepdims=True)) ** 2
    se = np.sqrt((n - 1) / n * d2.sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se == 0, 1.0, np.maximum(1.0, d2.sum(axis=-1) ** 2 / (d2**2).sum(axis=-1)))
    return se, df
