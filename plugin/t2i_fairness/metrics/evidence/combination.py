"""Linear combinations of independent terms (MOVER) and Fieller ratios of two statistics of the same prompts."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special as _special
from scipy import stats as _stats

from t2i_fairness.metrics.evidence.power import _normal_power, _se
from t2i_fairness.metrics.evidence.selection import _display
from t2i_fairness.metrics.intervals import P_FLOOR, Interval, invert_limit, upper_quantile

__all__ = ["Combination", "FiellerRatio", "combination", "fieller_ratio", "mover_limit"]


def mover_limit(estimates, lows, highs, weights, side: str, *, bounds: tuple[float, float] = (-math.inf, math.inf)):
    """MOVER's one-sided limit of ``sum_i w_i theta_i`` from each term's limits at the same level (Zou & Donner
    2008), held within ``bounds``: the combination stays skewed as its parts are. Terms run along the first
    axis; further axes (simulated runs) broadcast.

    Example:
        >>> round(mover_limit([0.7, 0.5], [0.6, 0.42], [0.8, 0.58], [1.0, -1.0], "low"), 4)  # 0.2 - hypot(.1, .08)
        0.0719
    """
    e, lo, hi = (np.asarray(v, dtype=np.float64) for v in (estimates, lows, highs))
    w = np.asarray(weights, dtype=np.float64).reshape((-1,) + (1,) * (e.ndim - 1))
    centre = np.sum(w * e, axis=0)
    wl, wh = w * lo, w * hi
    if side == "low":
        out = centre - np.sqrt(np.sum((w * e - np.minimum(wl, wh)) ** 2, axis=0))
    elif side == "high":
        out = centre + np.sqrt(np.sum((np.maximum(wl, wh) - w * e) ** 2, axis=0))
    else:
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    out = np.minimum(np.maximum(out, bounds[0]), bounds[1])
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class Combination(Interval):
    """``sum_i w_i theta_i`` of independent terms, by MOVER (each term's own limits at ``alpha``)."""

    terms: tuple[Interval, ...] = ()
    weights: tuple[float, ...] = ()
    bounds: tuple[float, float] = (-math.inf, math.inf)

    def limit(self, alpha: float, side: str) -> float:
        return self._mover(lambda t, s: t.limit(alpha, s), side)

    def _mover(self, term_limit, side: str) -> float:
        """MOVER over ``term_limit(term, side)`` of each term, held within :attr:`bounds`."""
        lo = [term_limit(t, "low") for t in self.terms]
        hi = [term_limit(t, "high") for t in self.terms]
        return mover_limit([t.estimate for t in self.terms], lo, hi, self.weights, side, bounds=self.bounds)

    def futility_limit(self, alpha: float, side: str) -> float:
        """The limit the futility rule reads: MOVER over each term's own :meth:`Interval.futility_limit`; the gate's
        test keeps :meth:`limit`.
        """
        return self._mover(lambda t, s: t.futility_limit(alpha, s), side)

    def p_value(self, bound: float, direction: str) -> float:
        return invert_limit(self.limit, float(bound), direction)

    def se_at(self, value: float) -> float | None:
        return float(math.sqrt(sum((w * _se(t)) ** 2 for w, t in zip(self.weights, self.terms))))

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        sel = max([getattr(t, "selection", 1) for t in self.terms])  # a WorstOf term tests at alpha / G
        # each term at the trials its own test has at this level (a CIS_K of 4 prompts has t_3's, not z's)
        se = math.sqrt(sum((w * _se(t, alpha / sel)) ** 2 for w, t in zip(self.weights, self.terms)))
        return _normal_power(effect, se, alpha / sel)

    def scaled(self, factor: float) -> "Combination":
        return _display(dataclasses.replace(self, terms=tuple(t.scaled(factor) for t in self.terms),
                                            n_units=int(math.ceil(self.n_units * factor))))

    def record(self) -> dict:
        return {**super().record(), "weights": list(self.weights), "terms": [t.record() for t in self.terms]}


def combination(terms: Sequence[Interval], weights: Sequence[float], *, confidence: float = 0.95,
                method: str = "linear combination (MOVER)", bounds: tuple[float, float] = (-math.inf, math.inf)
                ) -> Combination:
    """``sum_i w_i theta_i`` of independent estimates with their own intervals (:class:`Combination`), limits
    clipped to ``bounds``: a least-squares slope over independent samples, or a difference of two worst groups.

    Example:
        >>> from t2i_fairness.metrics.intervals import Interval
        >>> a = Interval(0.7, 0.6, 0.8, "t", 0.95, 40, se=0.05)
        >>> b = Interval(0.5, 0.42, 0.58, "t", 0.95, 30, se=0.04)
        >>> c = combination([a, b], [1.0, -1.0])
        >>> round(c.estimate, 4), round(c.low, 4), round(c.high, 4)     # 0.2 -+ 1.96 hypot(.05, .04)
        (0.2, 0.0745, 0.3255)
    """
    if not terms or len(terms) != len(weights):
        raise ValueError(f"`terms` and `weights` must be non-empty and of equal length, but got {len(terms)} "
                         f"and {len(weights)}")
    w = tuple(float(x) for x in weights)
    if not all(math.isfinite(x) for x in w):
        raise ValueError(f"`weights` must be finite, but got {list(weights)}")
    value = float(sum(x * t.estimate for x, t in zip(w, terms)))
    ev = Combination(value, 0.0, 0.0, method, float(confidence), min(t.n_units for t in terms),
                     terms=tuple(terms), weights=w, bounds=bounds)
    return _display(ev)


@dataclass(frozen=True)
class FiellerRatio(Interval):
    """``num / den`` of two statistics of the same units (paired), tested as the linear hypothesis
    ``num - r den`` with its delete-one jackknife standard error and Student's t on ``G - 1`` degrees
    of freedom: Fieller's interval, which needs no delta method and is exact for normal statistics."""

    num: float = 0.0
    den: float = 1.0
    s_nn: float = 0.0
    s_nd: float = 0.0
    s_dd: float = 0.0

    def _t(self, alpha: float) -> float:
        return upper_quantile(alpha, self.df)

    def _se_r(self, r: float) -> float:
        return math.sqrt(max(self.s_nn - 2 * r * self.s_nd + r * r * self.s_dd, 0.0))

    def limit(self, alpha: float, side: str) -> float:
        if alpha < self.p_floor:
            return -math.inf if side == "low" else math.inf
        t2 = self._t(alpha) ** 2
        a = self.den**2 - t2 * self.s_dd
        b = self.num * self.den - t2 * self.s_nd
        c = self.num**2 - t2 * self.s_nn
        disc = b * b - a * c
        if a <= 0 or disc < 0:  # the denominator is not known to be away from 0: unbounded
            return -math.inf if side == "low" else math.inf
        root = math.sqrt(disc)
        return float((b - root) / a if side == "low" else (b + root) / a)

    def p_value(self, bound: float, direction: str) -> float:
        sign = 1.0 if direction == "min" else -1.0
        d = sign * (self.num - float(bound) * self.den)
        se = self._se_r(float(bound))
        if se <= 0:
            return 1.0 if d >= 0 else P_FLOOR
        cdf = _stats.t.cdf if self.df is not None else (lambda x: _special.ndtr(x))
        p = float(cdf(d / se, self.df)) if self.df is not None else float(cdf(d / se))
        return min(max(p, P_FLOOR, self.p_floor), 1.0)

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        if alpha < self.p_floor:
            return 0.0
        se = self._se_r(float(bound)) / max(abs(self.den), 1e-12)
        if not se > 0:
            return 0.0
        return float(_special.ndtr(float(effect) / se - self._t(alpha)))

    def se_at(self, value: float) -> float | None:
        return self._se_r(float(value)) / max(abs(self.den), 1e-12)

    def scaled(self, factor: float) -> "FiellerRatio":
        f = float(factor)
        return _display(dataclasses.replace(self, s_nn=self.s_nn / f, s_nd=self.s_nd / f, s_dd=self.s_dd / f,
                                            n_units=int(math.ceil(self.n_units * f))))


def fieller_ratio(num_jackknife: Sequence[float], den_jackknife: Sequence[float], num: float, den: float, *,
                  confidence: float = 0.95) -> FiellerRatio:
    """``num / den`` with Fieller's test from the two statistics' delete-one-unit jackknife values (the same unit
    left out of both, so their covariance is kept).

    Example:
        >>> f = fieller_ratio([0.5, 0.52, 0.48, 0.5], [0.8, 0.82, 0.78, 0.8], 0.5, 0.8)
        >>> round(f.estimate, 4), f.df, f.p_value(0.9, "min") < 0.01
        (0.625, 3.0, True)
    """
    jn, jd = np.asarray(num_jackknife, dtype=np.float64), np.asarray(den_jackknife, dtype=np.float64)
    if jn.ndim != 1 or jn.shape != jd.shape or jn.size < 2:
        raise ValueError(f"the jackknife values must be two 1-D arrays of equal length >= 2, but got {jn.shape} "
                         f"and {jd.shape}")
    if not (np.isfinite(jn).all() and np.isfinite(jd).all() and math.isfinite(num) and math.isfinite(den)):
        raise ValueError("the statistics and their jackknife values must be finite")
    g = jn.size
    cn, cd = jn - jn.mean(), jd - jd.mean()
    k = (g - 1) / g
    ev = FiellerRatio(float(num / den) if den != 0 else math.nan, 0.0, 0.0,
                      "ratio by Fieller's theorem (delete-one jackknife, t)", float(confidence), g,
                      df=float(g - 1), num=float(num), den=float(den), s_nn=k * float(cn @ cn),
                      s_nd=k * float(cn @ cd), s_dd=k * float(cd @ cd))
    ev = dataclasses.replace(ev, se=ev.se_at(ev.estimate) if math.isfinite(ev.estimate) else None)
    return _display(ev)
