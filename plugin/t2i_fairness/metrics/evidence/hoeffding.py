"""An absolute value bounded by Hoeffding's inequality (word-level influence)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.intervals import P_FLOOR, Interval

__all__ = ["Hoeffding", "hoeffding_tail"]


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

    @property
    def basis(self) -> str:
        return "law-free"  # Hoeffding's inequality holds for any law of the bounded values

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
