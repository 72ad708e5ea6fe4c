"""Exact binomial tails and limits of a share, normal and t tails, and a test's p-value from its limits."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import special as _special
from scipy import stats as _stats

__all__ = ["P_FLOOR", "agresti_coull", "invert_limit", "normal_tail", "share_effective_size", "share_limit",
           "share_limits", "share_power", "share_tail", "share_trials", "upper_quantile", "upper_quantiles"]


def _z(confidence: float) -> float:
    return float(_special.ndtri(0.5 + confidence / 2.0))


#: The smallest p-value a sampled measurement reports: the tails in float64 underflow beyond it, and a
#: sample never gives certainty (a p of exactly 0).
P_FLOOR = 1e-300


def upper_quantile(alpha: float, df: float | None = None) -> float:
    """The one-sided upper ``alpha`` quantile of the standard normal (``df`` None or infinite) or of Student's t,
    accurate down to ``alpha = 1e-300`` (a closed-form tail where scipy's inverse gives up).

    Example:
        >>> round(upper_quantile(0.025), 4), round(upper_quantile(0.025, 3), 4), f"{upper_quantile(1e-300, 3):.3e}"
        (1.96, 3.1824, '1.033e+100')
    """
    a = float(alpha)
    if df is None or not math.isfinite(df):
        return float(-_special.ndtri(a))
    q = float(-_special.stdtrit(df, a))  # scipy's t.ppf, without its per-call argument checks (80 times faster)
    if math.isfinite(q):  # (<= 0 from alpha = 1/2 on: that is the quantile)
        return q
    # P(T > t) ~ c t^-df with c = Gamma((df+1)/2) df^((df-2)/2) / (sqrt(pi) Gamma(df/2))
    log_c = (_special.gammaln((df + 1) / 2) + (df - 2) / 2 * math.log(df) - 0.5 * math.log(math.pi)
             - _special.gammaln(df / 2))
    return float(math.exp((log_c - math.log(a)) / df))


def _t_density_at_0(df: float) -> float:
    """Student's t density at 0 (``scipy.stats.t.pdf(0, df)``)."""
    return math.exp(_special.gammaln((df + 1) / 2) - _special.gammaln(df / 2)) / math.sqrt(df * math.pi)


def _check_alpha(alpha: object) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"`alpha` must be in (0, 1), but got {alpha!r}")
    return a


def share_tail(successes, trials, bound, direction: str):
    """Exact one-sided binomial p-value of "the share meets ``bound``": ``P(X <= x)`` (``min``) or ``P(X >= x)``
    (``max``), ``X ~ Binomial(trials, bound)``; continuous in both counts (an effective size works, Korn &
    Graubard 1998), vectorised, never below :data:`P_FLOOR`.

    Example:
        >>> float(share_tail(6, 6, 0.5, "max")), float(share_tail(6, 6, 0.5, "min"))     # 6 of 6 against 0.5
        (0.015625, 1.0)
    """
    x, n, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (successes, trials, bound)))
    x = np.clip(x, 0.0, n)
    out = np.ones(x.shape)
    if direction == "min":  # P(X <= x) = I_{1-b}(n - x, x + 1)
        live = (x < n) & (b > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            v = _special.betainc(np.where(live, n - x, 1.0), x + 1.0, np.clip(1.0 - b, 0.0, 1.0))
        out = np.where(live, np.where(b >= 1, 0.0, v), 1.0)
    elif direction == "max":  # P(X >= x) = I_b(x, n - x + 1)
        live = (x > 0) & (b < 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            v = _special.betainc(np.where(live, x, 1.0), n - x + 1.0, np.clip(b, 0.0, 1.0))
        out = np.where(live, np.where(b <= 0, 0.0, v), 1.0)
    else:
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    out = np.clip(out, P_FLOOR, 1.0)
    return out if out.ndim else float(out)


def share_limit(successes, trials, alpha, side: str):
    """Clopper and Pearson's exact one-sided limit of a share at level ``alpha``, vectorised and continuous in the
    counts: it excludes a bound exactly where :func:`share_tail` there is at most ``alpha``.

    Example:
        >>> round(float(share_limit(0, 6, 0.025, "high")), 4), round(float(share_limit(45, 60, 0.025, "low")), 4)
        (0.4593, 0.6214)
    """
    if side in ("low", "high") and np.ndim(successes) == 0 and np.ndim(trials) == 0 and np.ndim(alpha) == 0:
        return _share_limit_one(float(successes), float(trials), float(alpha), side)
    x, n, a = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (successes, trials, alpha)))
    x = np.clip(x, 0.0, n)
    with np.errstate(invalid="ignore"):  # the branch np.where leaves out may be NaN (1 - NaN): not a result
        return _share_limit(x, n, a, side)


def _share_limit(x: np.ndarray, n: np.ndarray, a: np.ndarray, side: str):
    known = n > 1e-12  # no trials (a share whose few clusters say nothing at this level): the whole range
    if side == "high":  # 1 - u solves I_{1-u}(n - x, x + 1) = alpha: the same lower quantile, mirrored
        live = (x < n) & known
        out = np.where(live, 1.0 - _beta_low_quantile(a, np.where(live, n - x, 1.0), x + 1.0), 1.0)
    elif side == "low":
        live = (x > 0) & known
        out = np.where(live, _beta_low_quantile(a, np.where(live, x, 1.0), np.where(live, n - x, 0.0) + 1.0), 0.0)
    else:
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    out = np.clip(out, 0.0, 1.0)
    return out if out.ndim else float(out)


def _share_limit_one(x: float, n: float, a: float, side: str) -> float:
    """:func:`share_limit` of one share: the same formulas on floats, without numpy's array machinery (about ten
    times faster: a worst-of gate over a thousand CIS components asks for thousands of limits per look)."""
    x = min(max(x, 0.0), n)
    known = n > 1e-12
    if side == "high":
        out = 1.0 - _beta_low_quantile_one(a, n - x, x + 1.0) if (x < n and known) else 1.0
    else:
        out = _beta_low_quantile_one(a, x, n - x + 1.0) if (x > 0 and known) else 0.0
    return min(max(out, 0.0), 1.0)


def _beta_low_quantile_one(p: float, a: float, b: float) -> float:
    """:func:`_beta_low_quantile` of one quantile."""
    v = float(_special.betaincinv(a, b, p))
    if math.isfinite(v):
        return v
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        return float(np.exp((np.log(p) + np.log(a) + _special.betaln(a, b)) / a))


def _beta_low_quantile(p, a, b):
    """The ``p`` quantile of Beta(a, b) for small ``p`` too: scipy's inverse gives NaN below about 1e-200,
    where ``I_x(a, b) ~ x^a / (a B(a, b))`` is exact to float precision, so ``x = (p a B(a, b))^(1/a)``."""
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        v = _special.betaincinv(a, b, p)
        tail = np.exp((np.log(p) + np.log(a) + _special.betaln(a, b)) / a)
    return np.where(np.isfinite(v), v, tail)


def upper_quantiles(alpha, df=None) -> np.ndarray:
    """:func:`upper_quantile` over arrays of levels and degrees of freedom (``inf``: the normal quantile)."""
    a = np.asarray(alpha, dtype=np.float64)
    if df is None:
        return -_special.ndtri(a)
    a, d = np.broadcast_arrays(a, np.asarray(df, dtype=np.float64))
    finite = np.isfinite(d)
    q = np.where(finite, -_special.stdtrit(np.where(finite, d, 1.0), a), -_special.ndtri(a))
    far = ~np.isfinite(q)
    if far.any():
        q[far] = [upper_quantile(x, y) for x, y in zip(a[far], d[far])]
    return q


def share_trials(n_effective, alpha, df=None):
    """A share's effective trials at one-sided level ``alpha``: ``n_effective``, times ``(z_alpha / t_{df,
    alpha})^2`` where its variance has ``df`` degrees of freedom (Korn & Graubard 1998); arrays broadcast.

    Example:
        >>> round(share_trials(100.0, 0.001, 9), 2)
        51.72
    """
    if np.ndim(n_effective) == 0 and np.ndim(alpha) == 0 and np.ndim(df) == 0:
        n = float(n_effective)
        if df is None or not math.isfinite(df):
            return n
        z, t = upper_quantile(alpha), upper_quantile(alpha, df)
        if abs(t) < 1e-9:  # alpha = 1/2: both quantiles 0, their ratio the ratio of the densities at 0
            return n * (_t_density_at_0(df) * math.sqrt(2.0 * math.pi)) ** 2  # over the normal density at 0
        return n * (z / t) ** 2
    n = np.asarray(n_effective, dtype=np.float64) + np.zeros(np.shape(alpha))
    if df is None:
        return n
    d = np.asarray(df, dtype=np.float64)
    z, t = upper_quantiles(alpha), upper_quantiles(alpha, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (z / t) ** 2
    half = np.abs(t) < 1e-9
    if half.any():
        ratio = np.where(half, np.vectorize(share_trials, otypes=[float])(1.0, alpha, d), ratio)
    return np.where(np.isfinite(d), n * ratio, n)


def share_limits(estimate, n_effective, alpha, side: str, df=None):
    """A share's one-sided limit at level ``alpha`` (:meth:`Interval.limit` without a law-free part), vectorised
    over simulated runs: Clopper and Pearson's at :func:`share_trials` trials.

    Example:
        >>> share_limits(np.array([0.75, 0.5]), np.array([60.0, 60.0]), 0.025, "low", df=np.array([9, 59])).round(4).tolist()
        [0.5987, 0.3653]
    """
    n = share_trials(n_effective, alpha, df)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return share_limit(estimate * n, n, alpha, side)


def normal_tail(estimate, se, bound, direction: str, df=None, *, p_floor=0.0):
    """One-sided p-value of "the true value meets ``bound``" for an estimate with standard error ``se``: the t tail
    on ``df`` (normal where ``None``), never below ``p_floor``; vectorised over runs.

    Example:
        >>> round(normal_tail(0.45, 0.02, 0.5, "min", 3), 5), round(normal_tail(0.55, 0.02, 0.5, "min"), 5)
        (0.04385, 0.99379)
    """
    if direction not in ("min", "max"):
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    sign = 1.0 if direction == "min" else -1.0
    margin = sign * (np.asarray(estimate, dtype=np.float64) - bound)
    se = np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = margin / se
        if df is None:
            p = _special.ndtr(z)
        else:
            d = np.asarray(df, dtype=np.float64)
            finite = np.isfinite(d)
            p = np.where(finite, _stats.t.cdf(z, np.where(finite, d, 1.0)), _special.ndtr(z))
    p = np.where(se <= 0, np.where(margin >= 0, 1.0, P_FLOOR), p)
    p = np.minimum(np.maximum(np.maximum(p, P_FLOOR), p_floor), 1.0)
    return float(p) if p.ndim == 0 else p


def share_power(trials: float, bound: float, truth: float, direction: str, alpha: float, *,
                integer: bool = False) -> float:
    """The chance that :func:`share_tail` rejects at ``alpha`` when the true share is ``truth``: the test's
    critical count at the bound (a whole number for a binomial, ``integer=True``), then the binomial there.

    Example:
        >>> round(share_power(60, 0.9, 0.8, "min", 1e-4, integer=True), 4)  # P(Bin(60, 0.8) <= 43)
        0.0772
    """
    n, b = float(trials), float(bound)
    t = min(max(float(truth), 0.0), 1.0)
    if direction == "max":  # mirror: successes <-> failures
        return share_power(n, 1.0 - b, 1.0 - t, "min", alpha, integer=integer)
    if not n > 0 or share_tail(0.0, n, b, "min") > alpha:
        return 0.0
    if integer:
        ks = np.arange(int(round(n)) + 1)
        crit = int(ks[share_tail(ks, n, b, "min") <= alpha].max())
        return float(_stats.binom.cdf(crit, int(round(n)), t))
    from scipy.optimize import brentq

    top = n * (1.0 - 1e-12)
    if share_tail(top, n, b, "min") <= alpha:
        return 1.0
    crit = brentq(lambda x: float(share_tail(x, n, b, "min")) - alpha, 0.0, top, xtol=1e-10 * max(1.0, n))
    return float(share_tail(crit, n, t, "min")) if t > 0 else 1.0


def invert_limit(limit: Callable[[float, str], float], bound: float, direction: str) -> float:
    """The p-value of a test given by its one-sided limits: the smallest level in ``[P_FLOOR, 1/2]`` whose limit
    excludes ``bound`` (1 where none does); the limits must move toward the estimate as ``alpha`` grows.

    Example:
        >>> from t2i_fairness.metrics.intervals import Interval
        >>> round(invert_limit(Interval(0.5, 0.4, 0.6, "t", 0.95, 12, se=0.05).limit, 0.6, "min"), 6)   # Phi(-2)
        0.02275
    """
    side = "high" if direction == "min" else "low"
    bound = float(bound)

    def excluded(log_a: float) -> bool:  # bisection on the decision itself: limits may be clipped or flat
        v = limit(math.exp(log_a), side)
        return v < bound if direction == "min" else v > bound

    lo, hi = math.log(P_FLOOR), math.log(0.5)
    if not excluded(hi):
        return 1.0
    if excluded(lo):
        return P_FLOOR
    for _ in range(64):  # log-levels to about 4e-17 of the 690 searched: p to relative 1e-15
        mid = 0.5 * (lo + hi)
        if excluded(mid):
            hi = mid
        else:
            lo = mid
    return float(math.exp(hi))


def agresti_coull(successes: float, trials: float, confidence: float = 0.95) -> tuple[float, float]:
    """Agresti and Coull's adjusted share ``(x + z^2/2) / (n + z^2)`` and its standard error: neither is 0 at a
    share of 0 or 1 (``successes`` may be fractional).

    Example:
        >>> [round(v, 4) for v in agresti_coull(18, 18)]
        [0.9121, 0.0606]
    """
    z2 = _z(confidence) ** 2
    n_t = float(trials) + z2
    p_t = (float(successes) + z2 / 2.0) / n_t
    return p_t, math.sqrt(p_t * (1.0 - p_t) / n_t)


def share_effective_size(estimate, se, n_images, binary):
    """Korn and Graubard's effective size ``p (1 - p) / se^2`` of a share of ``n_images`` images (``n_images`` where
    ``se`` is 0; capped there when every value is 0 or 1; at least 1). Arrays broadcast.

    Example:
        >>> share_effective_size(0.5, 0.0625, 60.0, False), share_effective_size(0.5, 0.0625, 60.0, True)
        (64.0, 60.0)
    """
    if all(np.ndim(v) == 0 for v in (estimate, se, n_images, binary)):
        n_eff = n_images if se == 0 else estimate * (1.0 - estimate) / se**2
        if binary:
            n_eff = min(n_eff, n_images)
        return max(n_eff, 1.0)
    est, se = np.asarray(estimate, dtype=np.float64), np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(se == 0, n_images, est * (1.0 - est) / se**2)
    return np.maximum(np.where(binary, np.minimum(n_eff, n_images), n_eff), 1.0)
