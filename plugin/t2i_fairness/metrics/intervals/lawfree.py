"""Law-free bounds on a mean of units in [0, 1]: Hoeffding-Bernoulli, Maurer-Pontil and betting (``betting``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.intervals.betting import TUNED_LEVEL, betting_limit, betting_limits, betting_p_value

__all__ = ["BoundedUnits", "betting_limit", "bounded_mean_limit", "bounded_mean_tail"]


def _kl_bernoulli(x, b):
    """``KL(Bernoulli(x) || Bernoulli(b))`` elementwise (``0 log 0 = 0``; ``inf`` where ``b`` is 0 or 1 and
    ``x`` is not)."""
    x, b = np.asarray(x, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _special.xlogy(x, x) - _special.xlogy(x, b) + _special.xlogy(1.0 - x, 1.0 - x) - _special.xlogy(1.0 - x, 1.0 - b)
    return np.where(np.isnan(out), np.inf, np.maximum(out, 0.0))


def bounded_mean_tail(mean, var, n, bound, direction: str):
    """One-sided p-value of "the mean of ``n`` independent values in [0, 1] meets ``bound``", free of their law: twice
    the smaller of Hoeffding's relative-entropy bound (1963) and Maurer and Pontil's empirical Bernstein bound
    (2009), which reads the units' sample variance ``var``. Vectorised over ``mean``, ``var`` and ``n``.

    Example:
        >>> round(float(bounded_mean_tail(0.0, 0.0, 140, 0.05, "min")), 4)   # 140 prompts that all saw nothing
        0.0015
    """
    mean, var, n, bound = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (mean, var, n, bound)))
    if direction not in ("min", "max"):
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    if direction == "max":  # H0 theta <= bound: the same test on 1 - values
        mean, bound = 1.0 - mean, 1.0 - bound
    gap = bound - mean  # > 0: the sample falls short of the bound
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p_kl = np.exp(-n * _kl_bernoulli(np.clip(mean, 0.0, 1.0), np.clip(bound, 0.0, 1.0)))
        a = 7.0 / (3.0 * np.maximum(n - 1.0, 1e-12))
        b = np.sqrt(2.0 * np.maximum(var, 0.0) / n)
        root = (-b + np.sqrt(b * b + 4.0 * a * np.maximum(gap, 0.0))) / (2.0 * a)  # sqrt(ln(2/d)) at the gap
        p_eb = 2.0 * np.exp(-root * root)
    p = np.minimum(1.0, 2.0 * np.minimum(p_kl, p_eb))
    return np.where((gap > 0) & (n >= 2), p, 1.0)


@dataclass(frozen=True)
class BoundedUnits:
    """What a test free of the units' law needs: ``n`` independent unit values in [0, 1] (each prompt's
    share), their mean and sample variance; ``values``, the units themselves in their draw order. With
    ``values`` the test is the hedged betting one (:func:`betting_p_value` and its limits); without
    (a planning copy, :meth:`Interval.scaled`), Hoeffding's and Maurer-Pontil's (:func:`bounded_mean_tail`)."""

    n: int
    mean: float
    var: float
    values: tuple | None = dataclasses.field(default=None, repr=False, compare=False)

    def p_value(self, bound: float, direction: str) -> float:
        if self.values is not None:
            return float(betting_p_value(self.values, bound, direction))
        return float(bounded_mean_tail(self.mean, self.var, self.n, bound, direction))

    def limit(self, alpha: float, side: str) -> float:
        """The one-sided limit at level ``alpha``: where :meth:`p_value` crosses ``alpha`` (:func:`betting_limits`
        with the p-value's bets), else :func:`bounded_mean_limit`."""
        if self.values is not None:
            return float(betting_limits(self.values, alpha, side, tuned=TUNED_LEVEL))
        return float(bounded_mean_limit(self.mean, self.var, self.n, alpha, side))

    def distance(self, alpha: float) -> float:
        """How far the betting test's limit lies from the mean at ``alpha``: measured on ``values``, else the
        bets' normal approximation ``sqrt(2 var log(1 / alpha) / n)``."""
        if self.values is not None:
            return float(self.mean - betting_limits(self.values, alpha, "low", tuned=TUNED_LEVEL))
        return math.sqrt(2.0 * max(self.var, 0.0) * math.log(1.0 / alpha) / max(self.n, 1))


def bounded_mean_limit(mean, var, n, alpha, side: str, *, steps: int = 60):
    """The one-sided limit of :func:`bounded_mean_tail`'s test (vectorised): the nearer of Maurer and Pontil's
    closed form and Hoeffding's relative-entropy limit (``steps`` bisections), each at half the level; 0 or 1
    where nothing is rejected (fewer than 2 units).

    Example:
        >>> round(float(bounded_mean_limit(0.5, 0.02, 1000, 1e-4, "low")), 3)  # t on 999 df: 0.483
        0.455
    """
    if side not in ("low", "high"):
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    mean, var, n, alpha = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (mean, var, n, alpha)))
    if side == "high":  # theta >= b on the values is theta' <= 1 - b on 1 - values
        return 1.0 - bounded_mean_limit(1.0 - mean, var, n, alpha, "low", steps=steps)
    m = np.clip(mean, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        big_l = np.log(4.0 / alpha)  # Maurer-Pontil at alpha / 2, its own p doubled: 4 exp(-r^2) <= alpha
        eb = mean - (7.0 * big_l / (3.0 * np.maximum(n - 1.0, 1e-12)) + np.sqrt(2.0 * np.maximum(var, 0.0) * big_l / n))
        target = np.log(2.0 / alpha) / n  # Hoeffding at alpha / 2: KL(m || b) >= ln(2 / alpha) / n
    if m.size == 1:
        kl = np.asarray(_kl_low_limit(float(m.ravel()[0]), float(target.ravel()[0]), steps)).reshape(m.shape)
    else:
        lo, hi = np.zeros_like(m), m.copy()
        for _ in range(steps):
            mid = 0.5 * (lo + hi)
            rejected = _kl_bernoulli(m, mid) >= target
            lo, hi = np.where(rejected, mid, lo), np.where(rejected, hi, mid)
        kl = lo
    out = np.clip(np.maximum(kl, eb), 0.0, m)
    return np.where(n >= 2, out, 0.0)


def _kl_low_limit(m: float, target: float, steps: int) -> float:
    """The largest ``b`` in ``[0, m]`` (to ``m 2^-steps``) with ``KL(m || b) >= target``; 0 if none."""
    lo, hi = 0.0, m
    for _ in range(steps):
        b = 0.5 * (lo + hi)
        kl = (m * math.log(m / b) if m > 0.0 else 0.0) + ((1.0 - m) * math.log((1.0 - m) / (1.0 - b)) if m < 1.0 else 0.0)
        if kl >= target:
            lo = b
        else:
            hi = b
    return lo


def _bounded_power(units: BoundedUnits, bound: float, truth: float, direction: str, alpha: float) -> float:
    """The law-free test's power at ``truth``: the units' mean, normal with their variance, beyond the
    distance the betting test needs at ``alpha`` (:meth:`BoundedUnits.distance`, its variance held)."""
    se = math.sqrt(max(units.var, 0.0) / max(units.n, 1))
    d = units.distance(alpha)
    gap = (bound - truth) if direction == "min" else (truth - bound)  # how far the truth misses
    if se <= 0:
        return float(gap > d)
    return float(_special.ndtr((gap - d) / se))
