"""Gate decisions that mean what they say: one-sided p-values, error control, three verdicts, power, bounds.

A gate holds a measured value against a bound: ``min`` (the value must be at least the bound)
or ``max`` (at most). Everything here is pure arithmetic on numbers the caller measured.

Hypotheses. For every gate, H0 is "the model meets the bound" (``theta >= bound`` for a
``min`` gate, ``theta <= bound`` for ``max``), tested at the boundary ``theta == bound``. A small
p-value is evidence that the true value lies on the failing side. ``theta`` is the value the
indicator takes at the run's sample size on fresh seeds (:mod:`t2i_fairness.metrics.intervals`).

p-values.
    * :func:`p_value_normal`: from an estimate and its standard error (normal, or Student t with
      ``df``): ``Phi((estimate - bound) / se)`` for a ``min`` gate, ``Phi((bound - estimate) / se)``
      for ``max``. :func:`p_value_interval` takes an :class:`~t2i_fairness.metrics.intervals.Interval`
      and uses its standard error at the bound (for score intervals, ``sqrt(b (1 - b) / n_eff)``),
      so ``p < (1 - confidence) / 2`` exactly when the bound lies outside the interval on the
      failing side.
    * :func:`p_value_bootstrap`: from bootstrap replicates, by the shift ("basic") construction:
      under H0 at the boundary the estimate is distributed as ``bound + (theta* - theta_hat)``, so
      for a ``min`` gate ``p = (1 + #{theta* - theta_hat <= theta_hat - bound}) / (B + 1)``
      (Davison & Hinkley 1997, s. 4.4: the +1 keeps the Monte-Carlo test valid).

Error control across a run (:func:`adjust_p_values`). ``holm`` (default) controls the
family-wise error rate (the chance that a run with no regression fails any gate) at ``alpha``
under any dependence between gates; ``bh`` (Benjamini-Hochberg) controls the expected share of
false alarms among the failed gates (valid for independent or positively dependent gates) and
fails more gates; ``none`` leaves each gate at ``alpha``. Adjusted p-values are monotone in the
raw ones and capped at 1; a gate is significant when its adjusted p-value is at most ``alpha``.

Verdicts (:func:`decide`).
    * ``fail``: the estimate is on the failing side of the bound AND the adjusted p-value is at
      most ``alpha``: evidence, after adjustment, that the model misses the bound.
    * ``pass``: the estimate meets the bound (no evidence of a regression; a measurement that
      meets its bound never fails, whatever its p-value).
    * ``inconclusive``: the estimate misses the bound but the evidence is not significant at this
      sample size: the data cannot tell a miss from noise. More images (:func:`required_sample_size`)
      decide it.
    So ``fail`` implies the old ``point`` mode failed too, and ``pass`` is exactly ``point`` passing;
    ``inconclusive`` is the point failures the data do not support.

Power (:func:`minimum_detectable_effect`, :func:`power_at`, :func:`required_sample_size`).
One-sided normal test at level ``alpha / family_size`` (``family_size`` = the number of gates a
Holm adjustment spreads ``alpha`` over; Holm's first step, and so a guarantee for Holm; pass 1 for
``none``). The smallest shift of the true value beyond the bound detected with probability
``power`` is ``(z_{1 - alpha'} + z_{power}) * se``. The sample size needed for a target shift
assumes the variance falls as ``1 / n`` in the unit that grows (images per prompt): exactly true
for means of independent images within fixed prompts; where part of the variance does not shrink
with images per prompt (sampled prompts) or the statistic is not a mean (coverage, percentiles),
``design_effect`` (>= 1) inflates the extrapolated variance. Measured on the coverage worlds of
``bench/bench_interval_coverage.py`` (300 runs each): from 36 to 360 generated images the
standard deviation of coverage times ``sqrt(n)`` moved by factors from 0.1 (coverage saturating
at 1) to 3.0 (low coverage, 50-200 balls: its SE barely shrinks), so for coverage the ``1 / n``
law can be optimistic by up to 9x in variance, and coverage's expectation itself grows with
``n``; a sample-size plan for coverage gates should be checked by re-running at the proposed size.

Bounds from uncertainty (:func:`bound_from_estimate`). A bound written from one run and checked
against a re-run of the same model must allow for the error of both runs: the difference of two
independent estimates has standard error ``sqrt(se^2 + se_rerun^2)`` (``sqrt(2) se`` when the
re-run has the same size), so ``bound = estimate - z_p * sqrt(se^2 + se_rerun^2)`` for a ``min``
gate (``+`` for ``max``) is met by an equivalent model's estimate with probability ``p``
(normal approximation). The margin and the level are returned to be recorded beside the bound.
A hand-set policy floor ("coverage >= 0.30") is a bound as it stands: the gate fails only on
evidence that the true value is below it. A paired comparison with a baseline model on the
same prompts and seeds is the strongest form of a regression bound (the seeds' noise cancels):
test ``delta = candidate - baseline`` against ``-allowed`` with its paired standard error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special as _special
from scipy import stats as _stats

from t2i_fairness.metrics.intervals import Interval

__all__ = [
    "ADJUSTMENTS",
    "DIRECTIONS",
    "HypothesisTest",
    "VERDICTS",
    "UncertaintyBound",
    "adjust_p_values",
    "bound_from_estimate",
    "decide",
    "decide_test",
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
    """One-sided p-value of H0 "the model meets ``bound``" from an estimate and its standard error.

    ``p = F((estimate - bound) / se)`` for a ``min`` gate and ``F((bound - estimate) / se)`` for a
    ``max`` gate, with ``F`` the standard normal CDF, or Student's t CDF on ``df`` degrees of
    freedom. With ``se == 0`` the estimate is taken as exact: ``p = 1`` when it meets the bound
    (equality included) and ``0`` otherwise.

    Args:
        estimate: the measured value.
        se: its standard error (>= 0).
        bound: the gate's bound.
        direction: ``"min"`` or ``"max"``.
        df: degrees of freedom of a t reference distribution; ``None`` for the normal.

    Returns:
        The p-value in [0, 1]; small means evidence of being on the failing side.

    Raises:
        ValueError: a non-finite ``estimate``, ``se`` or ``bound``, a negative ``se``, an
            unknown ``direction`` or ``df <= 0``.

    Example:
        >>> round(p_value_normal(0.30, 0.05, 0.40, "min"), 4)    # 2 SE below a floor
        0.0228
        >>> round(p_value_normal(0.30, 0.05, 0.40, "max"), 4)    # comfortably under a ceiling
        0.9772
        >>> round(p_value_normal(0.30, 0.05, 0.40, "min", df=3), 4)
        0.0697
        >>> p_value_normal(0.5, 0.0, 0.5, "min")
        1.0
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

    Uses the interval's standard error at the bound (:meth:`Interval.se_at`: the score test's
    ``sqrt(b (1 - b) / n_eff)`` for Wilson-type intervals, the plain ``se`` otherwise) and its
    ``df``, so the test agrees with the interval: at ``confidence = 1 - 2 alpha`` the bound lies
    outside the interval on the failing side exactly when ``p < alpha`` (with the law-free test of a
    cluster share, :attr:`Interval.bounded`, the larger of the two p-values, as the interval is the wider).

    Args:
        interval: from one of the normal, t or score methods (``se`` is not ``None``).
        bound: the gate's bound.
        direction: ``"min"`` or ``"max"``.

    Raises:
        ValueError: the interval carries no standard error (a quantile method: use
            :func:`p_value_bootstrap` with its replicates), or as :func:`p_value_normal`.

    Example:
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> iv = precision_interval(np.r_[np.ones(12, bool), np.zeros(28, bool)])   # 12 of 40
        >>> round(p_value_interval(iv, 0.5, "min"), 4)       # score test of p >= 0.5
        0.0057
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
    """One-sided p-value of H0 "the model meets ``bound``" from bootstrap replicates (shift construction).

    Under H0 at the boundary the estimate is distributed as ``bound + (theta* - estimate)``: for
    a ``min`` gate ``p = (1 + #{theta*_b - estimate <= estimate - bound}) / (B + 1)``, for a
    ``max`` gate ``p = (1 + #{theta*_b - estimate >= estimate - bound}) / (B + 1)``. Ties count
    against H0's rejection (conservative); the +1 keeps the Monte-Carlo test valid, so ``p``
    is never below ``1 / (B + 1)``.

    Args:
        estimate: the statistic on the full sample.
        replicates: its bootstrap replicates (finite, at least one).
        bound: the gate's bound.
        direction: ``"min"`` or ``"max"``.

    Raises:
        ValueError: non-finite input, no replicates or an unknown ``direction``.

    Example:
        >>> reps = np.linspace(-1, 1, 201) * 0.1 + 0.5    # estimate 0.5, spread +-0.1
        >>> round(p_value_bootstrap(0.5, reps, 0.5555, "min"), 4)  # deviations <= -0.0555: 45 of 201
        0.2277
        >>> p_value_bootstrap(0.5, reps, 0.9, "min") == 1 / 202    # none: 1 / (B + 1)
        True
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

    With ``p_(1) <= ... <= p_(m)`` sorted:

    * ``holm``: ``max_{j <= i} min(1, (m - j + 1) p_(j))`` (step-down; family-wise error rate);
    * ``bh``: ``min_{j >= i} min(1, m p_(j) / j)`` (step-up; false discovery rate);
    * ``none``: the p-values themselves.

    Results are returned in the input order; ties get equal adjusted values. A gate is
    significant at level ``alpha`` when its adjusted p-value is ``<= alpha``. For the same input,
    ``p <= bh <= holm <= min(1, m p)``.

    Args:
        p_values: one raw p-value per gate, each in [0, 1] (gates without a p-value, e.g.
            undefined ones, are left out by the caller).
        method: ``"holm"``, ``"bh"`` or ``"none"``.

    Returns:
        float64 array of the same length.

    Raises:
        ValueError: an unknown ``method``, a p-value that is not finite or lies outside [0, 1]
            (its index is named), or input that is not 1-D.

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
    """The gate's verdict: ``"pass"``, ``"fail"`` or ``"inconclusive"`` (module docstring).

    ``fail``: the estimate misses the bound and ``p_adjusted <= alpha``; ``pass``: the estimate
    meets the bound (equality passes); ``inconclusive``: the estimate misses the bound without
    significant evidence.

    Args:
        estimate: the measured value.
        bound: the gate's bound (finite).
        direction: ``"min"`` or ``"max"``.
        p_adjusted: the gate's p-value after the run's multiplicity adjustment, in [0, 1].
        alpha: the run's error level, in (0, 1).

    Raises:
        ValueError: non-finite ``estimate`` or ``bound``, ``p_adjusted`` outside [0, 1],
            ``alpha`` outside (0, 1) or an unknown ``direction``.

    Example:
        >>> decide(0.31, 0.30, "min", 0.9)
        'pass'
        >>> decide(0.29, 0.30, "min", 0.4)
        'inconclusive'
        >>> decide(0.20, 0.30, "min", 0.001)
        'fail'
        >>> decide(0.20, 0.30, "max", 0.001)       # under a ceiling: passes
        'pass'
    """
    estimate, bound = _finite("estimate", estimate), _finite("bound", bound)
    sign = _sign(_direction(direction))
    p = _finite("p_adjusted", p_adjusted)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"`p_adjusted` must be in [0, 1], but got {p_adjusted!r}")
    alpha = _probability("alpha", alpha)
    if sign * (estimate - bound) >= 0:
        return "pass"
    return "fail" if p <= alpha else "inconclusive"


@dataclass(frozen=True)
class HypothesisTest:
    """A gate whose statistic is itself a test (CIS order invariance): its own H0 and p-value.

    Such a gate has no bound to hold a value against: it fails when its H0 is rejected at the run's
    adjusted level (:func:`decide_test`), and joins the run's Holm/BH adjustment with ``p_value``.

    Attributes:
        p_value: the test's p-value, in (0, 1] (an exact or Monte Carlo p-value: never 0).
        null: H0 in words ("shuffling the component order changes nothing").
        method: how ``p_value`` was computed.
        statistic: the test statistic.
        resolution: the smallest p-value the method can report (``1 / (B + 1)`` for B Monte Carlo
            resamples; ``None`` for a continuous reference).

    Example:
        >>> HypothesisTest(0.3, "no order effect", "permutation", 1.2, 1e-4).record()["resolution"]
        0.0001
    """

    p_value: float
    null: str
    method: str
    statistic: float
    resolution: float | None = None

    def __post_init__(self) -> None:
        p = _finite("p_value", self.p_value)
        if not 0.0 < p <= 1.0:
            raise ValueError(f"`p_value` of a sampled test must be in (0, 1], but got {self.p_value!r}")

    def record(self) -> dict:
        """The fields as plain values, for a gate record."""
        return {"p_value": float(self.p_value), "null": self.null, "method": self.method,
                "statistic": float(self.statistic), "resolution": self.resolution}


def gate_level(alpha: float, family_size: int, multiplicity: str = "holm") -> float:
    """The level one gate is decided at in a run of ``family_size`` gates: ``alpha / m`` under Holm and
    Benjamini-Hochberg (their first step; the run's step-down completes them), ``alpha`` with no adjustment.

    Example:
        >>> gate_level(0.05, 475), gate_level(0.05, 475, "none"), gate_level(0.05, 0)
        (0.00010526315789473685, 0.05, 0.05)
    """
    if multiplicity not in ADJUSTMENTS:
        raise ValueError(f"`multiplicity` must be one of {ADJUSTMENTS}, but got {multiplicity!r}")
    return alpha / max(1, int(family_size)) if multiplicity in ("holm", "bh") else alpha


def level_text(alpha: float, family_size: int, multiplicity: str = "holm") -> str:
    """How a message names :func:`gate_level`.

    Example:
        >>> level_text(0.05, 475), level_text(0.05, 475, "none")
        ('alpha 0.05 over 475 gate(s), holm first step', 'alpha 0.05, no adjustment')
    """
    if multiplicity == "none":
        return f"alpha {alpha:g}, no adjustment"
    return f"alpha {alpha:g} over {family_size} gate(s), {multiplicity} first step"


def decide_test(p_value: float, alpha: float, threshold: float) -> str:
    """The verdict of a hypothesis-test gate (H0: no effect) at the run's levels.

    ``fail``: ``p <= threshold`` (the run-time level, Holm's and BH's first step ``alpha / m``);
    ``inconclusive``: ``threshold < p <= alpha`` (only a later step of the run's step-down can reject it:
    the session fails the run if the whole adjustment does); ``pass``: ``p > alpha`` (no adjustment
    rejects it: an adjusted p-value is never below the raw one).

    Raises:
        ValueError: ``p_value`` outside [0, 1], ``alpha`` outside (0, 1), ``threshold`` outside (0, alpha].

    Example:
        >>> decide_test(1e-5, 0.05, 0.05 / 400), decide_test(0.01, 0.05, 0.05 / 400), decide_test(0.3, 0.05, 0.05 / 400)
        ('fail', 'inconclusive', 'pass')
    """
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
    return _probability("alpha", alpha) / _family_size(family_size)


def minimum_detectable_effect(se: float, *, alpha: float = 0.05, power: float = 0.8, family_size: int = 1) -> float:
    """Smallest shift of the true value past the bound detected with probability ``power``.

    One-sided normal test at level ``alpha / family_size``: a gate whose true value lies
    ``delta`` beyond its bound (on the failing side) fails with probability
    ``Phi(delta / se - z_{1 - alpha'})``; setting that to ``power`` gives
    ``delta = (z_{1 - alpha'} + z_power) * se``.

    Args:
        se: the gate's standard error at the bound (>= 0).
        alpha: the run's error level, in (0, 1).
        power: target probability of detection, in (0, 1).
        family_size: gates the Holm adjustment spreads ``alpha`` over (1 for ``none``).

    Raises:
        ValueError: non-finite or negative ``se``, ``alpha`` or ``power`` outside (0, 1), or
            ``family_size < 1``.

    Example:
        >>> round(minimum_detectable_effect(0.01), 5)          # (1.645 + 0.842) * 0.01
        0.02486
        >>> round(minimum_detectable_effect(0.01, family_size=100), 5)
        0.04132
    """
    se = _non_negative("se", se)
    level = _level(alpha, family_size)
    power = _probability("power", power)
    return float((_special.ndtri(1.0 - level) + _special.ndtri(power)) * se)


def power_at(effect: float, se: float, *, alpha: float = 0.05, family_size: int = 1) -> float:
    """Probability that a gate fails when its true value lies ``effect`` past the bound.

    ``Phi(effect / se - z_{1 - alpha / family_size})`` (one-sided normal test); ``effect`` is
    measured towards the failing side (``effect = 0`` is the boundary: power ``alpha'``).

    Args:
        effect: shift of the true value past the bound (>= 0 means on the failing side).
        se: standard error (> 0).
        alpha: error level, in (0, 1).
        family_size: gates ``alpha`` is spread over.

    Raises:
        ValueError: non-finite input, ``se <= 0``, ``alpha`` outside (0, 1), ``family_size < 1``.

    Example:
        >>> round(power_at(0.0, 0.01), 4)
        0.05
        >>> round(power_at(minimum_detectable_effect(0.01), 0.01), 4)
        0.8
    """
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
    """Sample size (e.g. images per prompt) at which a shift of ``effect`` is detected with ``power``.

    Assumes the variance at size ``n'`` is ``design_effect * se^2 * n / n'`` (``se`` measured
    at size ``n``): the ``1 / n`` law of means of independent images, inflated by
    ``design_effect`` where the variance shrinks more slowly than that. Solves
    ``minimum_detectable_effect(se(n')) <= effect`` for the smallest integer ``n' >= 1``:
    ``n' = ceil(design_effect * n * ((z_{1 - alpha'} + z_power) * se / effect)^2)``.

    Args:
        effect: the shift that must be detected (> 0), in the indicator's units.
        se: standard error measured at size ``n`` (>= 0).
        n: the size ``se`` was measured at (positive integer), in the unit that would grow.
        alpha: error level, in (0, 1).
        power: target power, in (0, 1).
        family_size: gates ``alpha`` is spread over.
        design_effect: variance inflation of the extrapolation (>= 1 is conservative; > 0).

    Raises:
        ValueError: non-finite input, ``effect <= 0``, ``n < 1``, ``design_effect <= 0``,
            ``alpha`` or ``power`` outside (0, 1).

    Example:
        >>> mde = minimum_detectable_effect(0.01)       # what n = 6 images detect
        >>> required_sample_size(mde, 0.01, 6)
        6
        >>> required_sample_size(mde / 2, 0.01, 6)     # half the effect: four times the images
        24
        >>> required_sample_size(mde / 2, 0.01, 6, design_effect=1.5)
        36
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
    """A bound written from a measurement, with what it was written from (to be recorded).

    Attributes:
        bound: the bound to write.
        direction: ``"min"`` or ``"max"``.
        estimate: the measured value it was written from.
        se: the measurement's standard error.
        se_rerun: the standard error assumed for the run that will be gated.
        margin: ``|estimate - bound| = z * sqrt(se^2 + se_rerun^2)``.
        pass_probability: probability that an equivalent model's estimate meets the bound.
        z: the quantile of ``pass_probability``: normal, or Student's t on ``df`` degrees of freedom
            when the standard error was estimated from few units.

    Example:
        >>> b = bound_from_estimate(0.80, 0.02, "min")
        >>> sorted(b.record())
        ['bound', 'direction', 'estimate', 'margin', 'pass_probability', 'se', 'se_rerun']
    """

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

    A re-run's estimate differs from this one by the errors of both runs, standard error
    ``sqrt(se^2 + se_rerun^2)`` (``sqrt(2) se`` at equal sizes). The bound is
    ``estimate - z * sqrt(se^2 + se_rerun^2)`` for a ``min`` gate and ``+`` for ``max``, with
    ``z = Phi^{-1}(pass_probability)``; under a normal approximation the re-run's estimate meets
    it with probability ``pass_probability`` (and then passes :func:`decide` whatever the
    adjustment). With ``se == 0`` (a deterministic measurement) the bound is the estimate.

    When ``se`` was estimated from few units (``df``: a delete-one-prompt jackknife over 4 prompts
    has 3), ``z`` is Student's t quantile on ``df`` degrees of freedom instead: the difference of two
    estimates over an estimated standard error is t-distributed, so this is the classical prediction
    bound for a new measurement, and a normal quantile would be met far less often than
    ``pass_probability`` says (re-drawn 4-prompt IndicTTI measurements met z-bounds at 0.99 in 56 of
    64 null checks of the calibration benchmark's quick run).

    Args:
        estimate: the measured value (finite).
        se: its standard error (finite, >= 0).
        direction: ``"min"`` or ``"max"``.
        pass_probability: in [0.5, 1): the chance an equivalent model's estimate meets the bound.
        se_rerun: the standard error of the run to be gated; ``None`` means ``se`` (same size).
        df: degrees of freedom of ``se`` (``None`` or infinite: known, the normal quantile).

    Returns:
        An :class:`UncertaintyBound` (``record()`` gives the fields to store).

    Raises:
        ValueError: a non-finite ``estimate``, ``se`` or ``se_rerun`` (so never a ``.inf``
            bound), a negative standard error, ``pass_probability`` outside [0.5, 1) or an
            unknown ``direction``.

    Example:
        >>> b = bound_from_estimate(0.80, 0.02, "min")
        >>> round(b.bound, 4), round(b.margin, 4), b.pass_probability
        (0.7535, 0.0465, 0.95)
        >>> round(bound_from_estimate(2.0, 0.1, "max", se_rerun=0.0).bound, 4)
        2.1645
        >>> round(bound_from_estimate(0.80, 0.02, "min", pass_probability=0.99, df=3).margin, 4)
        0.1284
        >>> bound_from_estimate(float("inf"), 0.1, "max")
        Traceback (most recent call last):
        ...
        ValueError: `estimate` must be finite, but got inf
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
