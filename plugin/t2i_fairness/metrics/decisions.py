"""Gate decisions: one-sided p-values, error control across gates, three verdicts, power, bounds.

H0 is "the model meets the bound" (``min``: at least; ``max``: at most), tested at the boundary.
docs/decisions.md explains the verdicts, the adjustments and the limits of the power formulas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import special as _special
from scipy import stats as _stats

from t2i_fairness.metrics.intervals import Interval

__all__ = [
    "ADJUSTMENTS",
    "DIRECTIONS",
    "GateLevel",
    "HypothesisTest",
    "VERDICTS",
    "UncertaintyBound",
    "adjust_p_values",
    "bound_from_estimate",
    "decide",
    "decide_test",
    "fails",
    "gate_level",
    "level_text",
    "minimum_detectable_effect",
    "p_value_bootstrap",
    "p_value_interval",
    "p_value_normal",
    "power_at",
    "required_sample_size",
]

DIRECTIONS: tuple[str, ...] = ("min", "max")
ADJUSTMENTS: tuple[str, ...] = ("holm", "bh", "none")
VERDICTS: tuple[str, ...] = ("pass", "fail", "inconclusive")


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------


def _finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a finite number, but got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"`{name}` must be finite, but got {value!r}")
    return v


def _non_negative(name: str, value: object) -> float:
    v = _finite(name, value)
    if v < 0:
        raise ValueError(f"`{name}` must be >= 0, but got {value!r}")
    return v


def _direction(direction: object) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"`direction` must be one of {list(DIRECTIONS)}, but got {direction!r}")
    return str(direction)


def _probability(name: str, value: object) -> float:
    v = _finite(name, value)
    if not (0.0 < v < 1.0):
        raise ValueError(f"`{name}` must be in (0, 1), but got {value!r}")
    return v


def _family_size(family_size: object) -> int:
    if isinstance(family_size, bool) or not isinstance(family_size, (int, np.integer)) or family_size < 1:
        raise ValueError(f"`family_size` must be a positive integer, but got {family_size!r}")
    return int(family_size)


def _sign(direction: str) -> float:
    """+1 when larger values pass (min gate), -1 when smaller values pass (max gate)."""
    return 1.0 if direction == "min" else -1.0


# --------------------------------------------------------------------------------------------
# p-values
# --------------------------------------------------------------------------------------------


def p_value_normal(estimate: float, se: float, bound: float, direction: str, *, df: float | None = None) -> float:
    """One-sided p-value of H0 "the model meets ``bound``": ``p = F((estimate - bound) / se)`` for ``min``.

    ``F`` is the normal CDF or Student's t on ``df``; ``se == 0``: ``p`` is 1 or 0.

    Example:
        >>> round(p_value_normal(0.30, 0.05, 0.40, "min"), 4), round(p_value_normal(0.30, 0.05, 0.40, "max"), 4)
        (0.0228, 0.9772)
    """
    estimate, bound = _finite("estimate", estimate), _finite("bound", bound)
    se = _non_negative("se", se)
    sign = _sign(_direction(direction))
    margin = sign * (estimate - bound)
    if se == 0.0:
        return 1.0 if margin >= 0 else 0.0
    t = margin / se
    if df is None or (isinstance(df, float) and math.isinf(df)):
        return float(_special.ndtr(t))
    df = _finite("df", df)
    if df <= 0:
        raise ValueError(f"`df` must be > 0, but got {df!r}")
    return float(_stats.t.cdf(t, df))


def p_value_interval(interval: Interval, bound: float, direction: str) -> float:
    """One-sided p-value of a gate from an :class:`~t2i_fairness.metrics.intervals.Interval`.

    Uses :meth:`Interval.se_at` at the bound and its ``df``, so at ``confidence = 1 - 2 alpha`` the
    bound lies outside the interval on the failing side exactly when ``p < alpha``.
    """
    if not isinstance(interval, Interval):
        raise ValueError(f"`interval` must be an Interval, but got {type(interval).__name__}")
    se = interval.se_at(_finite("bound", bound))
    if se is None:
        raise ValueError(
            f"interval method {interval.method!r} has no standard error; use p_value_bootstrap with its replicates"
        )
    p = p_value_normal(interval.estimate, se, bound, direction, df=interval.df)
    if interval.bounded is not None:  # a cluster share's law-free test: the interval's wider end is its
        p = max(p, interval.bounded.p_value(bound, direction))
    return p


def p_value_bootstrap(estimate: float, replicates: Sequence[float] | np.ndarray, bound: float, direction: str) -> float:
    """One-sided p-value from bootstrap replicates (shift construction), never below ``1 / (B + 1)``.

    ``min``: ``p = (1 + #{theta*_b - estimate <= estimate - bound}) / (B + 1)`` (``>=`` for ``max``).
    """
    estimate, bound = _finite("estimate", estimate), _finite("bound", bound)
    sign = _sign(_direction(direction))
    reps = np.asarray(replicates, dtype=np.float64)
    if reps.ndim != 1 or reps.size == 0:
        raise ValueError(f"`replicates` must be a non-empty 1-D array, but got shape {reps.shape}")
    if not np.isfinite(reps).all():
        raise ValueError(f"`replicates` holds {int((~np.isfinite(reps)).sum())} non-finite value(s)")
    deviations = sign * (reps - estimate)
    extreme = int(np.count_nonzero(deviations <= sign * (estimate - bound)))
    return (1.0 + extreme) / (reps.size + 1.0)


# --------------------------------------------------------------------------------------------
# multiplicity
# --------------------------------------------------------------------------------------------


def adjust_p_values(p_values: Sequence[float] | np.ndarray, method: str = "holm") -> np.ndarray:
    """Adjusted p-values across a run's gates: Holm (default), Benjamini-Hochberg or none.

    Example:
        >>> adjust_p_values([0.01, 0.04, 0.03, 0.5]).round(4).tolist()
        [0.04, 0.09, 0.09, 0.5]
        >>> adjust_p_values([0.01, 0.04, 0.03, 0.5], "bh").round(4).tolist()
        [0.04, 0.0533, 0.0533, 0.5]
    """
    if method not in ADJUSTMENTS:
        raise ValueError(f"`method` must be one of {list(ADJUSTMENTS)}, but got {method!r}")
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"`p_values` must be 1-D, but got shape {p.shape}")
    bad = np.flatnonzero(~(np.isfinite(p) & (p >= 0.0) & (p <= 1.0)))
    if bad.size:
        raise ValueError(f"`p_values[{int(bad[0])}]` must be a probability in [0, 1], but got {p[bad[0]]!r}")
    m = p.size
    if m == 0 or method == "none":
        return p.copy()
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    if method == "holm":
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
    else:
        adjusted = np.minimum.accumulate(np.minimum(1.0, m * ranked / np.arange(1, m + 1))[::-1])[::-1]
    out = np.empty(m)
    out[order] = adjusted
    return out


# --------------------------------------------------------------------------------------------
# verdicts
# --------------------------------------------------------------------------------------------


def decide(estimate: float, bound: float, direction: str, p_adjusted: float, alpha: float = 0.05) -> str:
    """The gate's verdict: ``"pass"`` (meets the bound), ``"fail"`` (misses, ``p_adjusted <= alpha``), or ``"inconclusive"``.

    Example:
        >>> decide(0.31, 0.30, "min", 0.9), decide(0.29, 0.30, "min", 0.4), decide(0.20, 0.30, "min", 0.001)
        ('pass', 'inconclusive', 'fail')
    """
    estimate, bound = _finite("estimate", estimate), _finite("bound", bound)
    sign = _sign(_direction(direction))
    p = _finite("p_adjusted", p_adjusted)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"`p_adjusted` must be in [0, 1], but got {p_adjusted!r}")
    alpha = _probability("alpha", alpha)
    if fails(estimate, bound, direction, p=p, level=alpha):
        return "fail"
    return "pass" if sign * (estimate - bound) >= 0 else "inconclusive"


def fails(estimate, bound, direction: str, *, p=None, level: float | None = None, limit=None):
    """Whether a gate fails: its estimate misses the bound AND the evidence says so, either ``p <= level`` or
    the confidence limit (at the level, on the passing side) beyond the bound. Arrays broadcast, so a bench's
    size simulation over many runs applies the rule :func:`decide` applies to one gate.

    Example:
        >>> fails(np.array([0.2, 0.29, 0.31]), 0.3, "min", p=np.array([1e-5, 1e-5, 0.9]), level=1e-4).tolist()
        [True, True, False]
        >>> bool(fails(0.4, 0.3, "max", limit=0.32)), bool(fails(0.4, 0.3, "max", limit=0.28))
        (True, False)
    """
    sign = _sign(_direction(direction))
    estimate, bound = np.asarray(estimate, dtype=float), np.asarray(bound, dtype=float)
    if (p is None) == (limit is None) or (p is not None and level is None):
        raise ValueError("give `p` with `level`, or `limit`")
    misses = sign * (estimate - bound) < 0
    if p is not None:
        return misses & (np.asarray(p, dtype=float) <= level)
    return misses & (sign * (np.asarray(limit, dtype=float) - bound) < 0)


@dataclass(frozen=True)
class HypothesisTest:
    """A gate whose statistic is itself a test (CIS order invariance): its own H0 and p-value, no bound.

    ``resolution``: the smallest p-value the method can report (``1 / (B + 1)``), or ``None``.
    ``power``: the test's power against the effect it states, when it has one: ``{"power", "effect",
    "level", "floor", "units", "miss"}`` (``floor``: the smallest p-value the design can give over
    ``units`` prompts; ``miss``: the effect in words).
    """

    p_value: float
    null: str
    method: str
    statistic: float
    resolution: float | None = None
    power: dict | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        p = _finite("p_value", self.p_value)
        if not 0.0 < p <= 1.0:
            raise ValueError(f"`p_value` of a sampled test must be in (0, 1], but got {self.p_value!r}")

    def record(self) -> dict:
        """The fields as plain values, for a gate record."""
        return {"p_value": float(self.p_value), "null": self.null, "method": self.method,
                "statistic": float(self.statistic), "resolution": self.resolution}


def gate_level(alpha: float, family_size: int, multiplicity: str = "holm") -> float:
    """The level one gate is decided at among ``family_size`` gates: ``alpha / m`` (Holm, BH) or ``alpha``."""
    if multiplicity not in ADJUSTMENTS:
        raise ValueError(f"`multiplicity` must be one of {ADJUSTMENTS}, but got {multiplicity!r}")
    return alpha / max(1, int(family_size)) if multiplicity in ("holm", "bh") else alpha


def level_text(alpha: float, family_size: int, multiplicity: str = "holm") -> str:
    """How a message names :func:`gate_level`: ``'alpha 0.05 over 475 gate(s), holm first step'``."""
    if multiplicity == "none":
        return f"alpha {alpha:g}, no adjustment"
    return f"alpha {alpha:g} over {family_size} gate(s), {multiplicity} first step"


@dataclass(frozen=True)
class GateLevel:
    """The run's per-gate level, made once per run: :func:`gate_level` as ``value``, :func:`level_text` as ``text``.

    Example:
        >>> level = GateLevel(0.05, 475)
        >>> round(level.value, 9), level.text
        (0.000105263, 'alpha 0.05 over 475 gate(s), holm first step')
        >>> GateLevel(0.05, 475, "none").value
        0.05
    """

    alpha: float = 0.05
    family_size: int = 1
    multiplicity: str = "holm"
    value: float = field(init=False)
    text: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", gate_level(self.alpha, self.family_size, self.multiplicity))
        object.__setattr__(self, "text", level_text(self.alpha, self.family_size, self.multiplicity))

    @classmethod
    def of(cls, options, family_size: int = 1) -> "GateLevel":
        """The level of a run with these options (``alpha``, ``multiplicity``) over ``family_size`` gates."""
        return cls(options.alpha, max(1, int(family_size)), options.multiplicity)


def decide_test(p_value: float, alpha: float, threshold: float) -> str:
    """The verdict of a hypothesis-test gate: ``fail`` at ``p <= threshold``, ``pass`` at ``p > alpha``, else inconclusive."""
    p = _finite("p_value", p_value)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"`p_value` must be in [0, 1], but got {p_value!r}")
    alpha = _probability("alpha", alpha)
    threshold = _finite("threshold", threshold)
    if not 0.0 < threshold <= alpha:
        raise ValueError(f"`threshold` must be in (0, alpha = {alpha:g}], but got {threshold!r}")
    if p <= threshold:
        return "fail"
    return "inconclusive" if p <= alpha else "pass"


# --------------------------------------------------------------------------------------------
# power and sample size
# --------------------------------------------------------------------------------------------


def _level(alpha: float, family_size: int) -> float:
    """:func:`gate_level` (Holm's first step) of checked arguments."""
    return gate_level(_probability("alpha", alpha), _family_size(family_size))


def minimum_detectable_effect(se: float, *, alpha: float = 0.05, power: float = 0.8, family_size: int = 1) -> float:
    """Smallest shift past the bound detected with ``power``: ``(z_{1 - alpha / family_size} + z_power) * se``.

    Example:
        >>> round(minimum_detectable_effect(0.01), 5)          # (1.645 + 0.842) * 0.01
        0.02486
    """
    se = _non_negative("se", se)
    level = _level(alpha, family_size)
    power = _probability("power", power)
    return float((_special.ndtri(1.0 - level) + _special.ndtri(power)) * se)


def power_at(effect: float, se: float, *, alpha: float = 0.05, family_size: int = 1) -> float:
    """Probability ``Phi(effect / se - z_{1 - alpha / family_size})`` that a gate fails ``effect`` past the bound."""
    effect = _finite("effect", effect)
    se = _non_negative("se", se)
    if se == 0:
        raise ValueError("`se` must be > 0 to compute power")
    level = _level(alpha, family_size)
    return float(_special.ndtr(effect / se - _special.ndtri(1.0 - level)))


def required_sample_size(
    effect: float,
    se: float,
    n: int,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    family_size: int = 1,
    design_effect: float = 1.0,
) -> int:
    """Sample size at which a shift of ``effect`` is detected with ``power``.

    ``n' = ceil(design_effect * n * ((z_{1 - alpha'} + z_power) * se / effect)^2)``, ``se`` measured at ``n``.

    Example:
        >>> mde = minimum_detectable_effect(0.01)       # what n = 6 images detect
        >>> required_sample_size(mde, 0.01, 6), required_sample_size(mde / 2, 0.01, 6)  # half: 4x the images
        (6, 24)
    """
    effect = _finite("effect", effect)
    if effect <= 0:
        raise ValueError(f"`effect` must be > 0, but got {effect!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`n` must be a positive integer, but got {n!r}")
    design_effect = _finite("design_effect", design_effect)
    if design_effect <= 0:
        raise ValueError(f"`design_effect` must be > 0, but got {design_effect!r}")
    mde = minimum_detectable_effect(se, alpha=alpha, power=power, family_size=family_size)
    needed = design_effect * int(n) * (mde / effect) ** 2
    # a relative tolerance so that an effect equal to the MDE at n gives back n, not n + 1
    return max(1, int(math.ceil(needed * (1.0 - 1e-9))))


# --------------------------------------------------------------------------------------------
# bounds an equivalent model passes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UncertaintyBound:
    """A bound written from a measurement: ``margin = |estimate - bound| = z * sqrt(se^2 + se_rerun^2)``."""

    bound: float
    direction: str
    estimate: float
    se: float
    se_rerun: float
    margin: float
    pass_probability: float
    z: float

    def record(self) -> dict[str, float | str]:
        """The fields a thresholds file records beside the bound (plain floats and strings)."""
        return {
            "bound": self.bound,
            "direction": self.direction,
            "estimate": self.estimate,
            "se": self.se,
            "se_rerun": self.se_rerun,
            "margin": self.margin,
            "pass_probability": self.pass_probability,
        }


def bound_from_estimate(
    estimate: float,
    se: float,
    direction: str,
    *,
    pass_probability: float = 0.95,
    se_rerun: float | None = None,
    df: float | None = None,
) -> UncertaintyBound:
    """The bound an equivalent model (same model, new seeds) meets with probability ``pass_probability``.

    ``bound = estimate - z * sqrt(se^2 + se_rerun^2)`` for ``min`` (``+`` for ``max``).

    Args:
        se_rerun: the standard error of the run to be gated; ``None`` means ``se``.
        df: degrees of freedom of ``se`` (``None``: the normal quantile).

    Example:
        >>> b = bound_from_estimate(0.80, 0.02, "min")
        >>> round(b.bound, 4), round(b.margin, 4), b.pass_probability
        (0.7535, 0.0465, 0.95)
    """
    estimate = _finite("estimate", estimate)
    se = _non_negative("se", se)
    se_rerun = se if se_rerun is None else _non_negative("se_rerun", se_rerun)
    direction = _direction(direction)
    p = _finite("pass_probability", pass_probability)
    if not 0.5 <= p < 1.0:
        raise ValueError(f"`pass_probability` must be in [0.5, 1), but got {pass_probability!r}")
    if df is not None and (isinstance(df, bool) or not df > 0):
        raise ValueError(f"`df` must be positive (or None), but got {df!r}")
    z = float(_special.ndtri(p)) if df is None or math.isinf(df) else float(_stats.t.ppf(p, df))
    margin = z * math.hypot(se, se_rerun)
    bound = estimate - _sign(direction) * margin
    return UncertaintyBound(float(bound), direction, estimate, se, se_rerun, float(margin), p, z)
