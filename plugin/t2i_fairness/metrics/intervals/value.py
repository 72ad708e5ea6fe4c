"""The :class:`Interval` value: an estimate, its two-sided interval and the gate's test at any level."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

from scipy import special as _special

from t2i_fairness.metrics.intervals.lawfree import BoundedUnits, _bounded_power, betting_limit
from t2i_fairness.metrics.intervals.tails import (P_FLOOR, _check_alpha, invert_limit, normal_tail, share_limits,
                                                  share_power, share_tail, share_trials, upper_quantile)

__all__ = ["BASES", "Interval", "bound_cannot_fail", "floor_to_units"]

#: what a test can rest on, from the strongest guarantee to the weakest (:attr:`Interval.basis`)
BASES = ("exact", "law-free", "design-based", "normal-theory")


def bound_cannot_fail(direction: str, bound: float | None, uncertainty: dict | None) -> bool:
    """Whether a bound can never be missed: a share's ``min`` bound at or below 0, or ``max`` at or above 1 (the
    update flow writes one where the model measured the edge itself; the summary says so).

    Example:
        >>> bound_cannot_fail("min", -0.1, {"n_effective": 18.0}), bound_cannot_fail("min", -0.1, {"n_effective": None})
        (True, False)
    """
    if bound is None or not uncertainty or uncertainty.get("n_effective") is None:
        return False
    return bound <= 0.0 if direction == "min" else bound >= 1.0


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval, what it was computed from, and the gate's one-sided test at any level.

    Attributes:
        estimate, low, high: the statistic on the full sample and its interval at ``confidence``.
        method: the method's name; ``n_units``: the resampled units behind it (images or prompts).
        se, df: the standard error and t degrees of freedom of a normal or t interval (``None``: none, normal).
        n_effective: a share's effective number of trials (a score interval); :meth:`se_at` is then the score
            test's standard error at a value.
        p_floor: the smallest p-value the design supports free of its units' law (``2^-G`` over ``G`` prompts,
            :func:`floor_to_units`); the test never fails below it.
        bounded: for a mean of units in [0, 1], their count, mean and variance: the test also holds free of their
            law (the larger p-value, the wider limit, the smaller power; docs/calibration.md).
        trials_cap: the most trials a share's limits can ever count (a coverage's real balls), or ``None``.

    Example:
        >>> iv = Interval(0.5, 0.4, 0.6, "wald", 0.95, 100, se=0.05)
        >>> iv.as_tuple(), iv.contains(0.45), iv.se_at(0.3)
        ((0.4, 0.6), True, 0.05)
        >>> round(Interval(0.5, 0.4, 0.6, "wilson", 0.95, 100, se=0.05, n_effective=100).se_at(0.3), 4)
        0.0458
    """

    estimate: float
    low: float
    high: float
    method: str
    confidence: float
    n_units: int
    se: float | None = None
    df: float | None = None
    n_effective: float | None = None
    p_floor: float = 0.0
    bounded: BoundedUnits | None = None
    trials_cap: int | None = None

    def as_tuple(self) -> tuple[float, float]:
        """``(low, high)``."""
        return (self.low, self.high)

    def contains(self, value: float) -> bool:
        """Whether ``low <= value <= high``."""
        return bool(self.low <= value <= self.high)

    def record(self) -> dict[str, float | int | str | None]:
        """The fields as plain Python values, for a gate record or report."""
        out = {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "method": self.method,
            "confidence": self.confidence,
            "n_units": self.n_units,
            "se": self.se,
            "df": self.df,
            "n_effective": self.n_effective,
            "basis": self.basis,
        }
        if self.p_floor > 0:
            out["p_floor"] = self.p_floor
        if self.bounded is not None:
            out["law_free_units"] = {"n": self.bounded.n, "mean": self.bounded.mean, "var": self.bounded.var}
        return out

    def se_at(self, value: float) -> float | None:
        """The standard error a test of ``true value == value`` uses: ``se`` for normal and t
        intervals; ``sqrt(value (1 - value) / n_effective)`` for score intervals (the variance
        under that hypothesis, which is what makes the test agree with the interval)."""
        if self.n_effective is not None:
            v = min(max(float(value), 0.0), 1.0)
            return math.sqrt(v * (1.0 - v) / self.n_effective)
        return self.se

    # -- the gate's test: one-sided limits at any level, the p-value, power (docs/calibration.md) --------

    @property
    def is_share(self) -> bool:
        """Whether the value is a share (a score interval: ``n_effective`` set, values in [0, 1])."""
        return self.n_effective is not None

    @property
    def basis(self) -> str:
        """What the gate's test rests on: ``law-free`` (a mean of bounded units, also tested by betting: valid for
        any law of them), ``exact`` (a share's binomial tail), ``design-based`` (a share at its Korn-Graubard
        effective size) or ``normal-theory`` (a normal or t tail on ``se``; its size under skewed laws is measured
        in docs/calibration.md, not guaranteed).

        Example:
            >>> Interval(0.5, 0.4, 0.6, "jackknife_t", 0.95, 60, se=0.05, df=6).basis
            'normal-theory'
        """
        if self.bounded is not None:
            return "law-free"
        if self.is_share:
            return "exact" if self.df is None or not math.isfinite(self.df) else "design-based"
        return "normal-theory"

    def trials(self, alpha: float) -> float:
        """A share's effective number of trials at one-sided level ``alpha``: ``n_effective``, times
        ``(z_alpha / t_{df, alpha})^2`` when its variance was estimated on ``df`` degrees of freedom
        (Korn & Graubard 1998), which shrinks it in the far tail where few clusters say little."""
        return share_trials(self.n_effective, alpha, self.df)

    def limit(self, alpha: float, side: str) -> float:
        """The one-sided limit at level ``alpha`` (``side`` ``"low"`` or ``"high"``): exact for a share
        (Clopper-Pearson at its effective size), ``estimate -+ q se`` otherwise; the wider with a law-free side.

        Example:
            >>> import numpy as np
            >>> from t2i_fairness.metrics.intervals import precision_interval
            >>> iv = precision_interval(np.r_[np.ones(45, bool), np.zeros(15, bool)])   # 45 of 60
            >>> round(iv.limit(0.025, "low"), 4), round(iv.limit(0.025, "high"), 4)
            (0.6214, 0.8528)
        """
        alpha = _check_alpha(alpha)
        if side not in ("low", "high"):
            raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
        if alpha < self.p_floor:  # the design supports no test at this level: it excludes nothing
            return -math.inf if side == "low" else math.inf
        if self.bounded is not None:  # the wider of the two: the test rejects only where both do
            inner = dataclasses.replace(self, bounded=None).limit(alpha, side)
            free = self.bounded.limit(alpha, side)
            return float(min(inner, free) if side == "low" else max(inner, free))
        if self.is_share:
            return float(share_limits(self.estimate, self.n_effective, alpha, side, self.df))
        if self.se is None:
            raise ValueError(f"interval method {self.method!r} has no standard error: no limit at another level")
        q = upper_quantile(alpha, self.df)
        return float(self.estimate - q * self.se if side == "low" else self.estimate + q * self.se)

    def futility_limit(self, alpha: float, side: str) -> float:
        """The one-sided limit the sequential futility rule reads: :meth:`limit`, or, for a mean of bounded units that
        keeps its values, the wider of the interval's own limit and the law-free :func:`betting_limit`.
        """
        if self.bounded is None or self.bounded.values is None:
            return self.limit(alpha, side)
        inner = dataclasses.replace(self, bounded=None).limit(alpha, side)  # checks alpha and side; +-inf below p_floor
        if not math.isfinite(inner):
            return inner
        free = betting_limit(self.bounded.values, alpha, side)
        return float(min(inner, free) if side == "low" else max(inner, free))

    def p_value(self, bound: float, direction: str) -> float:
        """One-sided p-value of "the true value meets ``bound``" (``>=`` for ``min``): a share's exact binomial tail
        (or its limits inverted where its df were estimated), else the normal or t tail; in ``(0, 1]``.

        Example:
            >>> import numpy as np
            >>> from t2i_fairness.metrics.intervals import precision_interval
            >>> round(precision_interval(np.r_[np.ones(45, bool), np.zeros(15, bool)]).p_value(0.9, "min"), 6)
            0.000666
        """
        bound = float(bound)
        if direction not in ("min", "max"):
            raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
        if self.bounded is not None:  # the test rejects where both do: each part's own p, the larger
            inner = dataclasses.replace(self, bounded=None).p_value(bound, direction)
            return min(max(inner, self.bounded.p_value(bound, direction), P_FLOOR, self.p_floor), 1.0)
        if self.is_share and (self.df is None or not math.isfinite(self.df)):
            p = float(share_tail(self.estimate * self.n_effective, self.n_effective, bound, direction))
        elif self.is_share:
            p = invert_limit(self.limit, bound, direction)
        else:
            if self.se is None:
                raise ValueError(f"interval method {self.method!r} has no standard error: no p-value")
            p = normal_tail(self.estimate, self.se, bound, direction, self.df)
        return min(max(p, P_FLOOR, self.p_floor), 1.0)

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        """The chance that the test at ``alpha`` fails a model whose true value misses ``bound`` by ``effect``: exact
        for a share, ``Phi(effect / se - q_alpha)`` otherwise.

        Example:
            >>> import numpy as np
            >>> from t2i_fairness.metrics.intervals import precision_interval
            >>> iv = precision_interval(np.r_[np.ones(54, bool), np.zeros(6, bool)])    # 60 images
            >>> round(iv.power(0.9, "min", 0.10, 1e-4), 3)    # P(Bin(60, 0.8) <= 43)
            0.077
        """
        alpha = _check_alpha(alpha)
        if alpha < self.p_floor:  # no outcome of this design fails at the level
            return 0.0
        sign = 1.0 if direction == "min" else -1.0
        truth = float(bound) - sign * float(effect)
        if self.bounded is not None:
            return min(dataclasses.replace(self, bounded=None).power(bound, direction, effect, alpha),
                       _bounded_power(self.bounded, float(bound), truth, direction, alpha))
        if self.is_share:
            return share_power(self.trials(alpha), float(bound), truth, direction, alpha,
                               integer=self.df is None and float(self.n_effective).is_integer())
        if self.se is None or not self.se > 0:
            return 0.0
        return float(_special.ndtr(float(effect) / self.se - upper_quantile(alpha, self.df)))

    #: whether ``df`` is a count fixed by the design (a t over ``G`` groups) rather than estimated from the data
    df_structural: ClassVar[bool] = False

    def critical_distance(self, bound: float, alpha: float, df: float | None = None) -> float:
        """How far beyond ``bound`` the estimate must lie for the test at this size to fail the gate at ``alpha``
        (the conditional power's model): ``q se`` at the bound, ``q`` the normal or Student t (``df``) quantile."""
        se = self.se_at(float(bound))
        return upper_quantile(alpha, df) * float(se)

    def scaled(self, factor: float) -> "Interval":
        """The same measurement at ``factor`` times the images (variance as ``1 / n``): for planning power."""
        f = float(factor)
        bounded = self.bounded if self.bounded is None else dataclasses.replace(
            self.bounded, n=int(math.ceil(self.bounded.n * f)), values=None)
        return dataclasses.replace(
            self, n_units=int(math.ceil(self.n_units * f)), bounded=bounded,
            se=None if self.se is None else self.se / math.sqrt(f),
            n_effective=None if self.n_effective is None else self.n_effective * f)


def floor_to_units(interval: Interval, units: int) -> Interval:
    """``interval`` with ``p_floor = 2^-units``: a test over ``units`` prompts claims no p-value below a sign-flip
    test's smallest.

    Example:
        >>> iv = floor_to_units(Interval(0.5, 0.4, 0.6, "t", 0.95, 4, se=0.01, df=3), 4)
        >>> iv.p_value(0.9, "min"), iv.power(0.9, "min", 0.1, 1e-4), iv.limit(1e-4, "high")
        (0.0625, 0.0, inf)
    """

    if units < 1:
        raise ValueError(f"`units` must be at least 1, but got {units}")
    return dataclasses.replace(interval, p_floor=max(float(interval.p_floor), 0.5 ** int(units)))
