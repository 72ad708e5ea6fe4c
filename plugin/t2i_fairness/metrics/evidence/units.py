"""Tests over a mean of independent units (prompts) whose values lie in a known range, free of the units' law:
a score's mean over prompts (:class:`UnitMean`) and a ratio of two such means over the same prompts through its
contrast ``num - r den`` (:class:`UnitRatio`), both by :func:`~t2i_fairness.metrics.intervals.betting_limit`.

Any test valid for every law on a range ``[lo, hi]`` pays for the law that puts a little mass at the far edge:
with ``G`` units at level ``alpha`` no such test can fail a mean nearer to the bound than about
``(edge - bound) (1 - alpha^(1 / G))`` (:func:`law_free_reach`), however tight the units' values are.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.evidence.selection import _display
from t2i_fairness.metrics.intervals import NARROW_TRUNCATION, P_FLOOR, Interval, betting_limit, invert_limit
from t2i_fairness.metrics.intervals.tails import _check_alpha

__all__ = ["UnitMean", "UnitRatio", "law_free_reach", "unit_mean", "unit_ratio"]

_SIDES = ("low", "high")


def _side(side: str) -> str:
    if side not in _SIDES:
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    return side


def _direction(direction: str) -> float:
    if direction not in ("min", "max"):
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    return 1.0 if direction == "min" else -1.0


def _check_units(name: str, values: object, value_range: Sequence[float]) -> tuple[np.ndarray, tuple[float, float]]:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 1:
        raise ValueError(f"`{name}` must be a non-empty 1-D array of unit values, but got shape {v.shape}")
    lo, hi = (float(x) for x in value_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"`value_range` of `{name}` must be two finite numbers lo < hi, but got {tuple(value_range)}")
    slack = 1e-9 * (hi - lo)  # float rounding of a cosine mean
    bad = np.flatnonzero(~np.isfinite(v) | (v < lo - slack) | (v > hi + slack))
    if bad.size:
        raise ValueError(f"`{name}` must lie in [{lo:g}, {hi:g}], but unit {int(bad[0])} is {float(v[bad[0]])!r}")
    return np.clip(v, lo, hi), (lo, hi)


def law_free_reach(edge_distance: float, units: int, alpha: float) -> float:
    """The nearest miss below a bound that any test valid for every law of ``units`` values on a range can fail at
    ``alpha``, with every value exactly at the sample mean: ``edge_distance (1 - alpha^(1 / units))``, where
    ``edge_distance`` is from the bound to the range's far edge (the law that puts mass ``1 - alpha^(1 / G)``
    there shows none of it in ``G`` draws with chance ``alpha``).

    Example:
        >>> round(law_free_reach(0.7, 16, 3.49e-5), 3), round(law_free_reach(0.7, 200, 3.49e-5), 3)  # a cosine at 0.3
        (0.331, 0.035)
    """
    return float(edge_distance) * (1.0 - float(alpha) ** (1.0 / int(units)))


@dataclass(frozen=True)
class UnitMean(Interval):
    """The mean of ``G`` independent unit values in ``value_range``, tested free of their law by betting.

    ``values`` in their order (the betting test reads them in sequence); ``se`` is the units' ``sd / sqrt(G)``,
    what power approximations and planning read; ``df`` is ``None`` (no t)."""

    values: tuple = dataclasses.field(default=(), repr=False)
    value_range: tuple[float, float] = (0.0, 1.0)

    def _scaled_values(self) -> np.ndarray:
        lo, hi = self.value_range
        return np.clip((np.asarray(self.values, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)

    def limit(self, alpha: float, side: str) -> float:
        """The betting limit at ``alpha`` mapped back to the range (infinite below ``p_floor``).

        Example:
            >>> m = unit_mean(0.3 + 0.02 * np.sin(np.arange(60)), (-1.0, 1.0))     # 60 prompts' cosines, sd 0.014
            >>> m.limit(1e-4, "high") - m.estimate > law_free_reach(0.7, 60, 1e-4) > 0.011   # the t on 59 df: 0.0072
            True
        """
        alpha, side = _check_alpha(alpha), _side(side)
        if alpha < self.p_floor:
            return -math.inf if side == "low" else math.inf
        lo, hi = self.value_range
        return float(lo + (hi - lo) * betting_limit(self._scaled_values(), alpha, side,
                                                      truncation=NARROW_TRUNCATION))

    def fails(self, bound: float, direction: str, alpha: float) -> bool:
        """Whether the test at ``alpha`` rejects "the mean meets ``bound``" (``>=`` for ``min``): the gate's
        ``p_value(bound) <= alpha`` without its bisection over levels."""
        side = "high" if _direction(direction) > 0 else "low"
        v = self.limit(alpha, side)
        return bool(v < bound if side == "high" else v > bound)

    def p_value(self, bound: float, direction: str) -> float:
        _direction(direction)
        return min(max(invert_limit(self.limit, float(bound), direction), P_FLOOR, self.p_floor), 1.0)

    def _recentred(self, at: float) -> "UnitMean":
        lo, hi = self.value_range
        v = np.clip(np.asarray(self.values, dtype=np.float64) - self.estimate + float(at), lo, hi)
        return dataclasses.replace(self, estimate=float(v.mean()), values=tuple(v))

    def _critical(self, at: float, alpha: float, side: str) -> float:
        """How far from its mean the limit lies for the units, spread as measured, recentred at ``at``."""
        moved = self._recentred(at)
        limit = moved.limit(alpha, side)
        return abs(limit - moved.estimate) if math.isfinite(limit) else math.inf

    def critical_distance(self, bound: float, alpha: float, df: float | None = None) -> float:
        """How far beyond ``bound`` the mean must lie for the test to fail at ``alpha`` (the units recentred on the
        bound: their spread and room to the range's edges as measured)."""
        return min(self._critical(bound, alpha, "high"), self._critical(bound, alpha, "low"))

    def reach(self, bound: float, direction: str, alpha: float) -> float:
        """The nearest miss of ``bound`` any test valid for every law of these units can fail at ``alpha``
        (:func:`law_free_reach` from the bound to the range's edge beyond it)."""
        lo, hi = self.value_range
        edge = hi - float(bound) if _direction(direction) > 0 else float(bound) - lo
        return law_free_reach(max(edge, 0.0), max(len(self.values), 1), _check_alpha(alpha))

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        """``Phi((effect - d) / se)``, ``d`` the test's critical distance with the units recentred at the miss."""
        alpha, sign = _check_alpha(alpha), _direction(direction)
        if alpha < self.p_floor:
            return 0.0
        truth = float(bound) - sign * float(effect)
        d = self._critical(truth, alpha, "high" if sign > 0 else "low")
        if not math.isfinite(d):
            return 0.0
        se = float(self.se or 0.0)
        if se <= 0:
            return float(effect > d)
        return float(_special.ndtr((float(effect) - d) / se))

    def scaled(self, factor: float) -> "UnitMean":
        """The same units at ``factor`` times the images each: their spread around the mean as ``1 / sqrt(factor)``."""
        f = float(factor)
        lo, hi = self.value_range
        v = np.clip(self.estimate + (np.asarray(self.values, dtype=np.float64) - self.estimate) / math.sqrt(f), lo, hi)
        return dataclasses.replace(self, values=tuple(v), n_units=int(math.ceil(self.n_units * f)),
                                   se=None if self.se is None else self.se / math.sqrt(f))

    def record(self) -> dict:
        return {**super().record(), "law_free": {"units": len(self.values), "range": list(self.value_range),
                                                 "test": "betting (Waudby-Smith & Ramdas)"}}


def _unit_mean(values: np.ndarray, value_range: tuple[float, float], confidence: float, method: str) -> UnitMean:
    g = values.size
    se = float(values.std(ddof=1) / math.sqrt(g)) if g >= 2 else 0.0
    return UnitMean(float(values.mean()), 0.0, 0.0, method, float(confidence), g, se=se,
                    values=tuple(float(x) for x in values), value_range=value_range)


def unit_mean(values: Sequence[float], value_range: Sequence[float], *, confidence: float = 0.95,
              limits: bool = True) -> UnitMean:
    """The mean of independent unit values (one per prompt, in the prompt file's order) known to lie in
    ``value_range``, with its betting test, valid for any law of the units (:class:`UnitMean`); ``limits=False``
    leaves the displayed ``low`` and ``high`` NaN (a bench's many runs read only :meth:`UnitMean.fails`).

    Raises:
        ValueError: no values, a value outside the range, or a range that is not ``lo < hi``.

    Example:
        >>> m = unit_mean([0.31, 0.28, 0.35, 0.30] * 8, (-1.0, 1.0))                # 32 prompts' cosines
        >>> round(m.estimate, 3), m.p_value(0.7, "min") < 1e-4, m.p_value(0.4, "min") < 1e-4   # no law-free test can
        (0.31, True, False)
    """
    v, rng = _check_units("values", values, value_range)
    ev = _unit_mean(v, rng, confidence, "mean over prompts by betting (law-free)")
    return _display(ev) if limits else dataclasses.replace(ev, low=math.nan, high=math.nan)


@dataclass(frozen=True)
class UnitRatio(Interval):
    """``mean(num) / mean(den)`` over the same ``G`` units, each unit's pair in ``num_range x den_range``: "the ratio
    meets ``r``" is "the mean contrast ``num - r den`` meets 0" (the denominator positive), whose units lie in a
    range the two ranges give; that contrast is tested by betting (:meth:`contrast`), and the limits are the ``r``
    where the test turns."""

    num_values: tuple = dataclasses.field(default=(), repr=False)
    den_values: tuple = dataclasses.field(default=(), repr=False)
    num_range: tuple[float, float] = (-1.0, 1.0)
    den_range: tuple[float, float] = (-1.0, 1.0)
    num: float = 0.0
    den: float = 1.0

    @property
    def basis(self) -> str:
        return "law-free"  # the contrast's betting test, for any law of the bounded units

    def contrast(self, r: float) -> UnitMean:
        """The units' contrasts ``num - r den`` and their range."""
        n, d = np.asarray(self.num_values, dtype=np.float64), np.asarray(self.den_values, dtype=np.float64)
        corners = [a - r * b for a in self.num_range for b in self.den_range]
        c = np.clip(n - r * d, min(corners), max(corners))
        m = _unit_mean(c, (min(corners), max(corners)), self.confidence, "contrast by betting")
        return dataclasses.replace(m, p_floor=self.p_floor)

    def fails(self, bound: float, direction: str, alpha: float) -> bool:
        """Whether the test at ``alpha`` rejects "the ratio meets ``bound``": its contrast's test of 0."""
        return self.contrast(float(bound)).fails(0.0, direction, alpha)

    def p_value(self, bound: float, direction: str) -> float:
        return self.contrast(float(bound)).p_value(0.0, direction)

    def limit(self, alpha: float, side: str) -> float:
        """The farthest ``r`` on ``side`` of the estimate that the test at ``alpha`` does not reject (bisection on
        the decision; infinite where the denominator is not known to be away from 0)."""
        alpha, side = _check_alpha(alpha), _side(side)
        out = -math.inf if side == "low" else math.inf
        if alpha < self.p_floor or not (self.den > 0 and math.isfinite(self.estimate)):
            return out
        sign = 1.0 if side == "high" else -1.0
        direction = "min" if side == "high" else "max"
        step = max(abs(self.estimate), 1e-3)
        near, far = self.estimate, None
        for k in range(60):
            r = self.estimate + sign * step * 2.0 ** k
            if self.fails(r, direction, alpha):
                far = r
                break
            near = r
        if far is None:
            return out
        for _ in range(40):
            mid = 0.5 * (near + far)
            near, far = (near, mid) if self.fails(mid, direction, alpha) else (mid, far)
        return float(near)

    def se_at(self, value: float) -> float | None:
        return float(self.contrast(float(value)).se or 0.0) / max(abs(self.den), 1e-12)

    def critical_distance(self, bound: float, alpha: float, df: float | None = None) -> float:
        return self.contrast(float(bound)).critical_distance(0.0, alpha) / max(abs(self.den), 1e-12)

    def reach(self, bound: float, direction: str, alpha: float) -> float:
        """:meth:`UnitMean.reach` of the contrast at ``bound``, in ratio units (over the denominator)."""
        return self.contrast(float(bound)).reach(0.0, direction, alpha) / max(abs(self.den), 1e-12)

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        """The contrast's power against ``effect den`` (a ratio miss times the denominator)."""
        if not self.den > 0:
            return 0.0
        return self.contrast(float(bound)).power(0.0, direction, float(effect) * self.den, alpha)

    def scaled(self, factor: float) -> "UnitRatio":
        f = math.sqrt(float(factor))
        n, d = np.asarray(self.num_values, dtype=np.float64), np.asarray(self.den_values, dtype=np.float64)
        n = np.clip(self.num + (n - self.num) / f, *self.num_range)
        d = np.clip(self.den + (d - self.den) / f, *self.den_range)
        return dataclasses.replace(self, num_values=tuple(n), den_values=tuple(d),
                                   n_units=int(math.ceil(self.n_units * float(factor))),
                                   se=None if self.se is None else self.se / f)

    def record(self) -> dict:
        return {**super().record(), "num": self.num, "den": self.den,
                "law_free": {"units": len(self.num_values), "range": [list(self.num_range), list(self.den_range)],
                             "test": "betting on num - r den (Waudby-Smith & Ramdas)"}}


def unit_ratio(num_values: Sequence[float], den_values: Sequence[float], num_range: Sequence[float],
               den_range: Sequence[float], *, confidence: float = 0.95, limits: bool = True) -> UnitRatio:
    """``mean(num) / mean(den)`` of paired unit values (one pair per prompt, same order), tested through its
    contrast by betting, valid for any law of the pairs (:class:`UnitRatio`); ``limits`` as in :func:`unit_mean`.

    Raises:
        ValueError: unequal lengths, no values, or a value outside its range.

    Example:
        >>> den = 0.6 + 0.03 * np.cos(np.arange(40))
        >>> u = unit_ratio(0.5 * den, den, (-1, 1), (-1, 1))                          # CLGC(l) = CLGC(en) / 2
        >>> round(u.estimate, 3), u.p_value(2.0, "min") < 0.01, u.p_value(0.6, "min") < 0.01
        (0.5, True, False)
    """
    n, nr = _check_units("num_values", num_values, num_range)
    d, dr = _check_units("den_values", den_values, den_range)
    if n.shape != d.shape:
        raise ValueError(f"`num_values` and `den_values` must pair the same units, but got {n.size} and {d.size}")
    num, den = float(n.mean()), float(d.mean())
    ev = UnitRatio(num / den if den != 0 else math.nan, 0.0, 0.0, "ratio by betting on its contrast (law-free)",
                   float(confidence), n.size, num_values=tuple(n), den_values=tuple(d), num_range=nr, den_range=dr,
                   num=num, den=den)
    if math.isfinite(ev.estimate):
        ev = dataclasses.replace(ev, se=ev.se_at(ev.estimate))
    return _display(ev) if limits else dataclasses.replace(ev, low=math.nan, high=math.nan)
