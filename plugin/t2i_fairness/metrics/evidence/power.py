"""A gate's power at its own test: the normal model's helpers, the smallest miss caught, the images needed."""

from __future__ import annotations

import math

from scipy import special as _special

from t2i_fairness.metrics.intervals import Interval, agresti_coull, upper_quantile

__all__ = ["images_for_power", "minimum_detectable"]


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
