"""Law-free bounds on a mean of units in [0, 1]: Hoeffding-Bernoulli, Maurer-Pontil and betting."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.intervals.tails import _check_alpha

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


def betting_limit(values, alpha: float, side: str, *, steps: int = 50) -> float:
    """One-sided limit of the mean of independent values in [0, 1], free of their law, by betting (Waudby-Smith &
    Ramdas 2023).

    ``"low"``: the smallest ``m`` whose betting test of "mean <= m" (predictable plug-in bets on the values in the
    order given, Ville's inequality) does not reject at ``alpha``; ``"high"``: the same on ``1 - values``. The bets
    use the values' spread, so it is narrower than :func:`bounded_mean_limit` at tens of units.

    Example:
        >>> x = np.tile([0.25, 0.5, 0.75], 40)                       # 120 prompt shares, mean 0.5
        >>> round(betting_limit(x, 0.001, "low"), 3), round(float(bounded_mean_limit(0.5, x.var(ddof=1), 120,
        ...                                                                          0.001, "low")), 3)
        (0.427, 0.328)
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    alpha = _check_alpha(alpha)
    if side not in ("low", "high"):
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    if x.size == 0 or not np.all((x >= 0.0) & (x <= 1.0)):
        raise ValueError("`values` must be a non-empty array of values in [0, 1]")
    if side == "high":
        return 1.0 - betting_limit(1.0 - x, alpha, "low", steps=steps)
    n, log_target = x.size, math.log(1.0 / alpha)
    t = np.arange(1, n + 1)
    before = np.r_[0.5, (0.5 + np.cumsum(x)) / (t + 1)][:-1]  # the running mean before each value
    var = np.r_[0.25, (0.25 + np.cumsum((x - before) ** 2)) / (t + 1)][:-1]
    bet = np.sqrt(2.0 * log_target / (n * var))

    def rejects(m: float) -> bool:
        capital = np.cumsum(np.log1p(np.minimum(bet, 0.5 / m) * (x - m)))
        return bool(capital.max() >= log_target)

    lo, hi = 1e-12, float(x.mean())
    if not rejects(lo):
        return 0.0
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return hi


@dataclass(frozen=True)
class BoundedUnits:
    """What a test free of the units' law needs: ``n`` independent unit values in [0, 1] (each prompt's
    share), their mean and sample variance (:func:`bounded_mean_tail`); ``values``, the units themselves in
    their draw order, for the betting limit ``--t2i-sequential``'s futility rule reads
    (:meth:`Interval.futility_limit`)."""

    n: int
    mean: float
    var: float
    values: tuple | None = dataclasses.field(default=None, repr=False, compare=False)

    def p_value(self, bound: float, direction: str) -> float:
        return float(bounded_mean_tail(self.mean, self.var, self.n, bound, direction))

    def limit(self, alpha: float, side: str) -> float:
        """The one-sided limit at level ``alpha`` (:func:`bounded_mean_limit`)."""
        return float(bounded_mean_limit(self.mean, self.var, self.n, alpha, side))


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
    critical value the test needs at ``alpha`` (its variance held at the measured one)."""
    side = "high" if direction == "min" else "low"  # a min gate fails when its upper limit is below the bound
    crit = _bounded_critical(units, bound, alpha, direction)
    se = math.sqrt(max(units.var, 0.0) / max(units.n, 1))
    if not math.isfinite(crit):
        return 0.0
    if se <= 0:
        return float((truth < crit) if side == "high" else (truth > crit))
    z = (crit - truth) / se if side == "high" else (truth - crit) / se
    return float(_special.ndtr(z))


def _bounded_critical(units: BoundedUnits, bound: float, alpha: float, direction: str, steps: int = 60) -> float:
    """The mean at which the law-free test of ``bound`` starts to reject at ``alpha`` (``-inf``/``inf``: never)."""
    def rejects(m: float) -> bool:
        return float(bounded_mean_tail(m, units.var, units.n, bound, direction)) <= alpha

    edge = 0.0 if direction == "min" else 1.0
    if not rejects(edge):
        return -math.inf if direction == "min" else math.inf
    lo, hi = (edge, bound) if direction == "min" else (bound, edge)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if rejects(mid) == (direction == "min"):
            lo = mid
        else:
            hi = mid
    return lo if direction == "min" else hi
