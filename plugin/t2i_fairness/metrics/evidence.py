"""Evidence for a gate whose value is more than one share: the worst of G groups, the spread or ratio of groups,
linear combinations, Fieller ratios and Hoeffding bounds.

Each class is an :class:`~t2i_fairness.metrics.intervals.Interval` whose ``limit``, ``p_value``, ``power`` and
``scaled`` count what the gate really tests. Limits are exact (a share's are Clopper-Pearson's at its effective
size) and combined by MOVER (Zou & Donner 2008; MOVER-R for ratios), so they stay inside the parameter space.
A selection is counted by Bonferroni: :class:`WorstOf` tests each group at ``alpha / G``, :class:`Pairs` each
ordered pair at ``alpha / (G (G - 1))``. Why and how each is calibrated: ``docs/calibration.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import special as _special
from scipy import stats as _stats

from t2i_fairness.metrics.intervals import P_FLOOR, Interval, agresti_coull, invert_limit, upper_quantile

__all__ = [
    "Combination",
    "FiellerRatio",
    "Hoeffding",
    "Pairs",
    "WorstOf",
    "combination",
    "fieller_ratio",
    "hoeffding_tail",
    "images_for_power",
    "minimum_detectable",
    "mover_limit",
    "pair_limit",
    "pairs",
    "worst_of",
]


def _tail(alpha: float) -> float:
    """``(1 - confidence) / 2`` as a one-sided level."""
    return float(alpha)


def _se(iv: Interval, alpha: float | None = None) -> float:
    """A term's standard error for power approximations: at its estimate, never 0 for a share
    (Agresti and Coull's at 0 and 1), 0 when nothing is known. With ``alpha``, a share whose variance
    was estimated on few degrees of freedom counts the trials its own test has at that level
    (:meth:`Interval.trials`), so its stated power is that test's, not a normal test's."""
    se = iv.se_at(iv.estimate)
    se = 0.0 if se is None or not math.isfinite(se) else float(se)
    if iv.n_effective:
        n = float(iv.n_effective)
        if alpha is not None and iv.df is not None and math.isfinite(iv.df):
            n = max(float(iv.trials(alpha)), 1e-12)
            e = min(max(iv.estimate, 0.0), 1.0)
            se = max(se, math.sqrt(e * (1.0 - e) / n))
        se = max(se, agresti_coull(min(max(iv.estimate, 0.0), 1.0) * n, n)[1])
    return se


def _normal_power(effect: float, se: float, alpha: float) -> float:
    if not se > 0 or not math.isfinite(se):
        return 0.0
    return float(_special.ndtr(float(effect) / se - upper_quantile(alpha)))


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


def _display(evidence: Interval) -> Interval:
    """``evidence`` with its displayed interval: its limits at ``(1 - confidence) / 2`` each side."""
    a = (1.0 - evidence.confidence) / 2.0
    return dataclasses.replace(evidence, low=float(evidence.limit(a, "low")), high=float(evidence.limit(a, "high")))


def _check_groups(groups: Mapping[str, Interval] | Sequence[Interval], minimum: int) -> tuple[tuple[str, ...], tuple[Interval, ...]]:
    items = list(groups.items()) if isinstance(groups, Mapping) else [(str(i), g) for i, g in enumerate(groups)]
    if len(items) < minimum:
        raise ValueError(f"`groups` must hold at least {minimum} interval(s), but got {len(items)}")
    for label, iv in items:
        if not isinstance(iv, Interval):
            raise ValueError(f"group {label!r} must be an Interval, but got {type(iv).__name__}")
    return tuple(str(k) for k, _ in items), tuple(v for _, v in items)


# --------------------------------------------------------------------------------------------
# the worst of G groups
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorstOf(Interval):
    """The worst of G groups' values (``worst="min"``: the lowest), the selection counted: its limit is the worst
    of the groups' limits at ``alpha / G``, its p-value ``min(1, G min_g p_g)``, its power the least of the groups'.
    """

    labels: tuple[str, ...] = ()
    groups: tuple[Interval, ...] = ()
    worst: str = "min"
    total: int | None = None  # the groups the worst is picked from when only some are measured here

    @property
    def selection(self) -> int:
        """How many groups the worst was picked from (the Bonferroni factor): every group of the gate, also
        those a sequential run no longer measures (``total``)."""
        return max(len(self.groups), int(self.total or 0))

    def open_groups(self, bound: float, direction: str, beta: float, delta: float) -> tuple[str, ...]:
        """The groups whose one-sided limit at ``beta`` does not clear ``bound - delta`` (``+`` for ``max``): those a
        sequential run still measures. Each group at ``beta`` itself: the futility promise counts no selection.

        Example:
            >>> import numpy as np
            >>> from t2i_fairness.metrics.intervals import precision_interval
            >>> g = {r: precision_interval(np.r_[np.ones(k, bool), np.zeros(400 - k, bool)]) for r, k in
            ...      [("a", 390), ("b", 300)]}
            >>> worst_of(g).open_groups(0.8, "min", 0.002, 0.05)
            ('b',)
        """
        side = "low" if direction == "min" else "high"
        clear = (lambda v: v > bound - delta) if direction == "min" else (lambda v: v < bound + delta)
        return tuple(label for label, g in zip(self.labels, self.groups) if not clear(g.futility_limit(beta, side)))

    @property
    def worst_label(self) -> str:
        pick = min if self.worst == "min" else max
        return self.labels[pick(range(len(self.groups)), key=lambda i: self.groups[i].estimate)]

    def _worst_group(self) -> Interval:
        return self.groups[self.labels.index(self.worst_label)]

    def limit(self, alpha: float, side: str) -> float:
        pick = min if self.worst == "min" else max
        return float(pick(g.limit(alpha / self.selection, side) for g in self.groups))

    def futility_limit(self, alpha: float, side: str) -> float:
        """The limit the futility rule reads: toward the worst, the worst of the groups' own limits at ``alpha`` (the
        true worst is one fixed group's value, so no selection is counted); away from it, :meth:`limit`.

        Example:
            >>> import numpy as np
            >>> from t2i_fairness.metrics.intervals import precision_interval
            >>> g = {r: precision_interval(np.r_[np.ones(k, bool), np.zeros(400 - k, bool)]) for r, k in
            ...      [("a", 390), ("b", 300), ("c", 310)]}
            >>> w = worst_of(g)
            >>> w.futility_limit(0.01, "low") == g["b"].limit(0.01, "low") > w.limit(0.01, "low")
            True
        """
        pick = min if self.worst == "min" else max
        if (self.worst == "min") != (side == "low"):
            return self.limit(alpha, side)
        return float(pick(g.futility_limit(alpha, side) for g in self.groups))

    def p_value(self, bound: float, direction: str) -> float:
        if (self.worst == "min") == (direction == "min"):
            p = min(g.p_value(bound, direction) for g in self.groups)
            return min(1.0, max(P_FLOOR, self.selection * p))
        return invert_limit(self.limit, float(bound), direction)

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        return float(min(g.power(bound, direction, effect, alpha / self.selection) for g in self.groups))

    def se_at(self, value: float) -> float | None:
        return self._worst_group().se_at(value)

    def scaled(self, factor: float) -> "WorstOf":
        return _display(dataclasses.replace(self, groups=tuple(g.scaled(factor) for g in self.groups),
                                            n_units=int(math.ceil(self.n_units * factor))))

    def record(self) -> dict:
        w = self._worst_group()
        return {**super().record(), "selection": self.selection, "worst": self.worst_label,
                "worst_group": w.record()}


def worst_of(groups: Mapping[str, Interval] | Sequence[Interval], *, worst: str = "min",
             confidence: float = 0.95, total: int | None = None) -> WorstOf:
    """The worst group's value with its selection counted (:class:`WorstOf`).

    Args:
        groups: label -> the group's :class:`Interval`.
        worst: ``"min"`` (the lowest value is the worst) or ``"max"``.
        total: the gate's number of groups when ``groups`` holds only those still measured (a sequential run's
            open groups): the Bonferroni factor stays the gate's.

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> g = {r: precision_interval(np.r_[np.ones(k, bool), np.zeros(60 - k, bool)])
        ...      for r, k in [("africa", 45), ("europe", 57), ("asia", 55)]}
        >>> w = worst_of(g)
        >>> w.estimate, w.worst_label, w.selection
        (0.75, 'africa', 3)
    """
    labels, ivs = _check_groups(groups, 1)
    if worst not in ("min", "max"):
        raise ValueError(f"`worst` must be 'min' or 'max', but got {worst!r}")
    pick = min if worst == "min" else max
    i = pick(range(len(ivs)), key=lambda j: ivs[j].estimate)
    shares = all(g.is_share for g in ivs)
    ev = WorstOf(float(ivs[i].estimate), 0.0, 0.0, f"worst of {len(ivs)} groups (Bonferroni over the groups)",
                 float(confidence), min(g.n_units for g in ivs), se=ivs[i].se, df=ivs[i].df,
                 n_effective=ivs[i].n_effective if shares else None, labels=labels, groups=ivs, worst=worst,
                 total=total)
    return _display(ev)


# --------------------------------------------------------------------------------------------
# pairs: spreads (best minus worst) and parity (worst / best)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pairs(Interval):
    """Best minus worst (``contrast="difference"``) or worst / best (``"ratio"``) over G groups, as the
    union of the ``G (G - 1)`` ordered pairs' tests (module docstring)."""

    labels: tuple[str, ...] = ()
    groups: tuple[Interval, ...] = ()
    contrast: str = "difference"

    @property
    def selection(self) -> int:
        """The ordered pairs tested (the Bonferroni factor)."""
        g = len(self.groups)
        return g * (g - 1)

    def _group_limits(self, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = alpha / self.selection
        e = np.array([g.estimate for g in self.groups])
        lo = np.array([g.limit(a, "low") for g in self.groups])
        hi = np.array([g.limit(a, "high") for g in self.groups])
        return e, lo, hi

    def pair_limits(self, alpha: float, side: str) -> np.ndarray:
        """``(G, G)`` limits at ``alpha / (G (G - 1))`` of ``theta_g - theta_h`` (difference) or
        ``theta_g / theta_h`` (ratio, MOVER-R); the diagonal is NaN."""
        e, lo, hi = self._group_limits(alpha)
        out = pair_limit(self.contrast, side, e[:, None], lo[:, None], hi[:, None], e[None, :], lo[None, :],
                          hi[None, :])
        np.fill_diagonal(out, np.nan)
        return out

    def limit(self, alpha: float, side: str) -> float:
        lim = self.pair_limits(alpha, side)
        if self.contrast == "difference":  # the spread is the largest pairwise difference
            return float(max(0.0, np.nanmax(lim)))
        return float(min(1.0, max(0.0, np.nanmin(lim))))  # parity is the smallest pairwise ratio

    def p_value(self, bound: float, direction: str) -> float:
        return invert_limit(self.limit, float(bound), direction)

    def _pair_se(self, alpha: float | None = None) -> np.ndarray:
        se = np.array([_se(g, alpha) for g in self.groups])
        if self.contrast == "difference":
            return np.sqrt(se[:, None] ** 2 + se[None, :] ** 2)
        e = np.array([g.estimate for g in self.groups])
        best = max(float(e.max()), 1e-12)  # theta_g - r theta_h per unit of theta_h, at the best group
        return np.sqrt(se[:, None] ** 2 + se[None, :] ** 2) / best

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        se = self._pair_se(alpha / self.selection)
        np.fill_diagonal(se, np.nan)
        return _normal_power(effect, float(np.nanmax(se)), alpha / self.selection)

    def se_at(self, value: float) -> float | None:
        e = np.array([g.estimate for g in self.groups])
        i, j = int(np.argmax(e)), int(np.argmin(e))
        if i == j:
            return float(self._pair_se()[0, 1]) if len(e) > 1 else None
        return float(self._pair_se()[i, j])

    def scaled(self, factor: float) -> "Pairs":
        return _display(dataclasses.replace(self, groups=tuple(g.scaled(factor) for g in self.groups),
                                            n_units=int(math.ceil(self.n_units * factor))))

    def record(self) -> dict:
        return {**super().record(), "selection": self.selection, "contrast": self.contrast}


def pair_limit(contrast: str, side: str, g, gl, gh, h, hl, hh) -> np.ndarray:
    """The limit on ``side`` of ``theta_g - theta_h`` (MOVER) or ``theta_g / theta_h`` (MOVER-R) from each group's
    value and limits; broadcasts over pair tables and simulated runs.
    """
    if contrast == "ratio":
        return _mover_ratio(g, gl, gh, h, hl, hh, side)
    if side == "low":
        return (g - h) - np.sqrt((g - gl) ** 2 + (hh - h) ** 2)
    return (g - h) + np.sqrt((gh - g) ** 2 + (h - hl) ** 2)


def _mover_ratio(g, gl, gh, h, hl, hh, side: str) -> np.ndarray:
    """MOVER-R limits of ``theta_g / theta_h`` (Donner & Zou 2012), vectorised; ``inf`` where the
    denominator's limit reaches 0 (the ratio is then unbounded on that side)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a denominator's limit near 0: inf
        if side == "high":
            disc = (g * h) ** 2 - gh * hl * (2 * g - gh) * (2 * h - hl)
            den = hl * (2 * h - hl)
            out = (g * h + np.sqrt(np.maximum(disc, 0.0))) / den
            bad = (hl <= 0) | (den <= 0) | (disc < 0)
            return np.where(bad, np.inf, out)
        disc = (g * h) ** 2 - gl * hh * (2 * g - gl) * (2 * h - hh)
        den = hh * (2 * h - hh)
        out = (g * h - np.sqrt(np.maximum(disc, 0.0))) / den
        bad = (den <= 0) | (disc < 0) | (gl <= 0)
        return np.where(bad, 0.0, np.maximum(out, 0.0))


def pairs(groups: Mapping[str, Interval] | Sequence[Interval], *, contrast: str = "difference",
          confidence: float = 0.95) -> Pairs:
    """Best minus worst (``contrast="difference"``) or worst / best (``"ratio"``) of ``groups``, every ordered
    pair counted (:class:`Pairs`).

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> g = [precision_interval(np.r_[np.ones(k, bool), np.zeros(6 - k, bool)]) for k in (6, 0)]
        >>> s = pairs(g)
        >>> s.estimate, round(s.low, 3), s.high, s.selection     # 6/6 minus 0/6: inside [0, 1]
        (1.0, 0.267, 1.0, 2)
    """
    labels, ivs = _check_groups(groups, 2)
    if contrast not in ("difference", "ratio"):
        raise ValueError(f"`contrast` must be 'difference' or 'ratio', but got {contrast!r}")
    e = [g.estimate for g in ivs]
    best, worst = max(e), min(e)
    if contrast == "difference":
        value, method = best - worst, f"best minus worst of {len(ivs)} groups (MOVER, Bonferroni over ordered pairs)"
    else:
        value = 1.0 if best <= 0 else worst / best
        method = f"worst / best of {len(ivs)} groups (MOVER-R, Bonferroni over ordered pairs)"
    ev = Pairs(float(value), 0.0, 0.0, method, float(confidence), min(g.n_units for g in ivs),
               labels=labels, groups=ivs, contrast=contrast)
    return _display(ev)


# --------------------------------------------------------------------------------------------
# linear combinations of independent terms
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# a ratio of two statistics of the same prompts (Fieller)
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# an absolute value bounded by Hoeffding's inequality
# --------------------------------------------------------------------------------------------


def hoeffding_tail(excess, variance_proxy):
    """:class:`Hoeffding`'s p-value for an estimate ``excess`` beyond the bound: ``2 exp(-2 t^2 / V)`` within
    ``[P_FLOOR, 1]``. Floats give a float, arrays (simulated runs) an array.

    Example:
        >>> round(hoeffding_tail(0.2, 0.02), 6), hoeffding_tail(np.array([-0.1, 0.2]), 0.02).round(6).tolist()
        (0.036631, [1.0, 0.036631])
    """
    if np.ndim(excess) == 0 and np.ndim(variance_proxy) == 0:
        t, v = float(excess), float(variance_proxy)
        if t <= 0 or v <= 0:
            return 1.0 if t <= 0 else P_FLOOR
        return float(min(1.0, max(P_FLOOR, 2.0 * math.exp(-2.0 * t * t / v))))
    t, v = np.broadcast_arrays(np.asarray(excess, dtype=np.float64), np.asarray(variance_proxy, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p = np.minimum(1.0, np.maximum(P_FLOOR, 2.0 * np.exp(-2.0 * t * t / v)))
    return np.where(t <= 0, 1.0, np.where(v <= 0, P_FLOOR, p))


@dataclass(frozen=True)
class Hoeffding(Interval):
    """``|I|`` where ``I`` is a weighted sum of independent means of [0, 1] values: ``P(|I_hat - I| >= t)
    <= 2 exp(-2 t^2 / V)``, ``V = sum_s w_s^2 / n_s`` (Hoeffding 1963). The displayed interval is the
    caller's (from ``I``'s two-sided interval); limits and p-values at any level come from ``V``."""

    variance_proxy: float = 0.0
    upper: float = 1.0  # the largest |I| possible

    def _half(self, alpha: float) -> float:
        return math.sqrt(self.variance_proxy * math.log(2.0 / alpha) / 2.0)

    def limit(self, alpha: float, side: str) -> float:
        if side == "low":
            return max(0.0, self.estimate - self._half(alpha))
        return min(self.upper, self.estimate + self._half(alpha))

    def p_value(self, bound: float, direction: str) -> float:
        t = (self.estimate - float(bound)) if direction == "max" else (float(bound) - self.estimate)
        return hoeffding_tail(t, self.variance_proxy)

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        # the estimate's standard deviation is at most sqrt(V) / 2 (Bernoulli values); the test rejects
        # beyond the bound by the Hoeffding half-width at alpha
        sd = math.sqrt(self.variance_proxy) / 2.0
        if not sd > 0:
            return 0.0
        return float(_special.ndtr((float(effect) - self._half(alpha)) / sd))

    def se_at(self, value: float) -> float | None:
        return math.sqrt(self.variance_proxy) / 2.0

    def critical_distance(self, bound: float, alpha: float, df: float | None = None) -> float:
        """The test's own: Hoeffding's half-width at ``alpha`` (wider than ``z_alpha`` times ``sqrt(V) / 2``).

        Example:
            >>> h = Hoeffding.from_half_width(0.3, 0.1358, (0.1642, 0.4358), 100)
            >>> round(h.critical_distance(0.5, 1e-4), 4), round(3.719 * h.se_at(0.5), 4)
            (0.2225, 0.1859)
        """
        return self._half(alpha)

    def scaled(self, factor: float) -> "Hoeffding":
        return dataclasses.replace(self, variance_proxy=self.variance_proxy / float(factor),
                                   n_units=int(math.ceil(self.n_units * factor)))

    def record(self) -> dict:
        return {**super().record(), "variance_proxy": self.variance_proxy}

    @classmethod
    def from_half_width(cls, estimate: float, half_width: float, interval: tuple[float, float], n_units: int, *,
                        confidence: float = 0.95, upper: float = 1.0, method: str = "Hoeffding") -> "Hoeffding":
        """From the half-width ``h`` of ``I``'s two-sided Hoeffding interval at ``confidence``:
        ``V = 2 h^2 / log(2 / (1 - confidence))``.

        Example:
            >>> h = Hoeffding.from_half_width(0.3, 0.1358, (0.1642, 0.4358), 100)    # 100 values, 95%
            >>> round(h.variance_proxy, 4), round(h.p_value(0.1, "max"), 4)        # 2 exp(-2 * 0.04 * 100)
            (0.01, 0.0007)
        """
        v = 2.0 * float(half_width) ** 2 / math.log(2.0 / (1.0 - confidence))
        return cls(float(estimate), float(interval[0]), float(interval[1]), method, float(confidence), int(n_units),
                   se=math.sqrt(v) / 2.0, variance_proxy=v, upper=upper)


# --------------------------------------------------------------------------------------------
# power as a plan: the smallest detectable miss, the images for a target power
# --------------------------------------------------------------------------------------------


def minimum_detectable(evidence: Interval, bound: float, direction: str, alpha: float, *, power: float = 0.8,
                       largest: float = 1e6) -> float | None:
    """The smallest miss of ``bound`` the gate's test at level ``alpha`` catches with probability ``power``
    (``None`` when no miss up to ``largest`` is caught that often).

    Example:
        >>> from t2i_fairness.metrics.intervals import Interval
        >>> round(minimum_detectable(Interval(0.5, 0.4, 0.6, "z", 0.95, 100, se=0.01), 0.5, "min", 0.05), 5)
        0.02486
    """
    from scipy.optimize import brentq

    def gap(effect: float) -> float:
        return evidence.power(bound, direction, effect, alpha) - power

    hi = 1e-6
    while gap(hi) < 0:
        hi *= 2.0
        if hi > largest:
            return None
    if hi <= 1e-6:
        return hi
    return float(brentq(gap, hi / 2.0, hi, xtol=1e-9 * max(1.0, hi)))


def images_for_power(evidence: Interval, bound: float, direction: str, effect: float, alpha: float, *,
                     power: float = 0.8, largest: float = 1e4) -> float | None:
    """The factor ``f`` of today's images at which the test catches a miss of ``effect`` with probability ``power``
    (``evidence.scaled(f)``; 1 when already there; ``None`` beyond ``largest``).

    Example:
        >>> from t2i_fairness.metrics.intervals import Interval
        >>> iv = Interval(0.5, 0.4, 0.6, "z", 0.95, 100, se=0.02)
        >>> round(images_for_power(iv, 0.5, "min", 0.02486, 0.05), 2)     # half the se: four times the images
        4.0
    """
    from scipy.optimize import brentq

    def gap(f: float) -> float:
        return evidence.scaled(f).power(bound, direction, effect, alpha) - power

    if gap(1.0) >= 0:
        return 1.0
    hi = 2.0
    while gap(hi) < 0:
        hi *= 2.0
        if hi > largest:
            return None
    return float(brentq(gap, hi / 2.0, hi, xtol=1e-6))
