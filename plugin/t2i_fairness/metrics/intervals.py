"""Confidence intervals that cover, one family per kind of indicator (seeded, vectorised, deterministic).

The estimand. A gate speaks about the value the indicator takes *at the run's sample size* on
a fresh draw of the random units, everything else held fixed: ``theta_n = E[statistic]`` over
new seeds (new generated images) with the reference set, the fixed prompts and ``n`` unchanged.
For a mean this is the population mean; for coverage and for a 10th percentile of 6 images it
depends on ``n`` (coverage grows with ``n``), and it is the quantity a re-run of the same model
estimates, hence what a bound written from one run and gated on another compares.  Where prompts
are themselves sampled (CIS, word-level candidates, IndicTTI), the prompt is a random unit too and
``theta`` is the mean over the prompt population.

Which method for which indicator. Chosen by ``bench/bench_interval_coverage.py`` (full run,
2026-11-23, 2-core AMD EPYC, 400 repetitions per cell, so a cell's Monte-Carlo SE is about 0.011;
"pooled" is over every cell of the grid, "cells" how many lie in [0.90, 0.99]). Worlds, sizes and
truths are described in that script; the project's sizes are 36-360 generated images, 10-200 real
ones, 6-60 images per object, 6-40 sampled prompts.

* Coverage (DIG In, Decomposed DIG: share of real balls holding a generated image):
  :func:`coverage_interval`, ``jackknife_wilson`` (the default, ``jackknife_wilson_df``, is it with a
  few-image correction). Pooled 0.972, cells 0.863-1.000, 24 of 37 in
  range, 1 below (truth 0.988 with only 10 balls), 12 above (conservative); cells whose truth is
  within 0.01 of 0 or 1: 0.990. Percentile bootstrap 0.367 (cells 0.022-0.750), bootstrap SE
  0.820, jackknife + normal 0.824 (0.155-0.995), half-sampling 0.872, BCa 0.159.
* Precision (share of generated images inside the real manifold): :func:`precision_interval`,
  ``wilson``. Pooled 0.951, cells 0.927-0.973, 15 of 15; with exact duplicates removed
  (keep_one / drop_all, collapsed modes inside or outside): 0.954, 0.927-0.985, 24 of 24.
  Percentile bootstrap 0.928 (0.802-0.973), Wald 0.923 (0.820-0.960).
* Mean over objects of a low percentile (Object Consistency: p10 of 6-60 images per object,
  2-27 objects): :func:`percentile_mean_interval`, ``jackknife_t``. Pooled 0.978, cells
  0.935-1.000, 25 of 36, none below, 11 above (normal-shaped scores with 2-6 objects: the floor
  and t_K make it conservative). Percentile bootstrap 0.896 (0.550-0.990), bootstrap SE 0.918
  (0.775-0.988), smoothed bootstrap SE 0.904 (0.777-0.973), plain jackknife 0.904 (0.733-0.985).
* Mean over sampled prompts of values in [0, 1] (CIS image scores, 0/1 indicators, CLIP-like
  cosines): :func:`cluster_mean_interval`, ``auto`` = ``wilson`` (Korn & Graubard). Pooled
  0.951, cells 0.912-0.988, 36 of 36 (rare 0/1 values at 6 prompts included). ``t`` 0.910
  (0.608-0.963: fails for rare shares; 0.915-0.953 on cosines), percentile 0.876 (0.560-0.955).
  Values outside [0, 1]: ``auto`` = ``t``.
* Any statistic over sampled prompts (word-level influences, ratios):
  :func:`cluster_bootstrap_interval`, ``t`` (delete-one-prompt jackknife). Pooled 0.940, cells
  0.915-0.965, 3 of 3; percentile 0.904 (0.858-0.953).
* Mean of per-image scores over fixed prompts (LGC, CLGC; SCWL's per-prompt values with the
  prompt as unit): :func:`stratified_mean_interval`, ``t`` (Welch-Satterthwaite). Pooled 0.942,
  cells 0.915-0.963, 12 of 12; percentile 0.902 (0.800-0.955).

Why. Coverage: the percentile bootstrap cannot cover (replicates lose distinct images); the
delete-one jackknife variance is exact and conservative on average (Efron-Stein), but a normal
interval around it fails at small counts and next to 0 or 1, where the score form (and the floor
n_eff <= n_real) does not. Precision is a binomial proportion given the reference; Wilson's score
interval is the standard choice at these sizes (Brown, Cai & DasGupta 2001). A 10th percentile of
6-60 scores: every resampling method under-covers with few objects (their variance estimates are
biased low and noisy); the jackknife variance floored at its normal-theory value, with one degree
of freedom per object, never fell below 0.935, at the price of over-covering well-behaved scores.
Sampled prompts: resampling prompts is right but percentile intervals are too narrow with 6-12
prompts; t on G - 1 degrees of freedom fixes that for continuous values, and Korn & Graubard's
effective-n Wilson also for rare shares. Fixed prompts: a stratified t interval; 0/1 values of a
single group are a proportion (:func:`precision_interval`).

Inputs. Coverage: the boolean membership matrix ``(n_fake, n_real)`` of the scored generated
images (after de-duplication; an image without a feature is an all-False row). Precision: that
matrix or the per-image ``inside`` vector, plus ``n_missing``. Object consistency: object -> the
per-image CLIP scores. Sampled prompts: per-image values and one prompt label per image (or the
callable statistic of image indices and the labels). Fixed prompts: per-image values and their
prompt labels.

Every function returns an :class:`Interval` (estimate, low, high, the standard error and degrees of
freedom behind it when the method is a normal or t interval, the method and the number of units).
Resampling methods take ``n_resamples`` and ``seed``; equal arguments give equal intervals.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Mapping, Sequence

import numpy as np
from scipy import special as _special
from scipy import stats as _stats

__all__ = [
    "BoundedUnits",
    "CLUSTER_METHODS",
    "CLUSTER_STATISTIC_METHODS",
    "COVERAGE_METHODS",
    "Interval",
    "PERCENTILE_METHODS",
    "PRECISION_METHODS",
    "PercentileMean",
    "STRATIFIED_METHODS",
    "betting_limit",
    "bound_cannot_fail",
    "bounded_mean_limit",
    "bounded_mean_tail",
    "cluster_bootstrap_interval",
    "cluster_mean_interval",
    "cluster_share_runs",
    "coverage_interval",
    "invert_limit",
    "jackknife_se_df",
    "upper_quantile",
    "upper_quantiles",
    "normal_percentile_mean",
    "normal_percentile_variance",
    "normal_tail",
    "percentile_mean_interval",
    "percentile_variance",
    "precision_interval",
    "share_limit",
    "share_limits",
    "share_trials",
    "share_power",
    "share_effective_size",
    "share_tail",
    "stratified_mean_interval",
    "upper_quantile",
    "floor_to_units",
]

COVERAGE_METHODS: tuple[str, ...] = (
    "jackknife_wilson",
    "jackknife_wilson_df",
    "jackknife",
    "half_sampling",
    "subsampling",
    "bootstrap_se",
    "percentile",
    "basic",
    "bca",
)
PRECISION_METHODS: tuple[str, ...] = ("wilson", "agresti_coull", "clopper_pearson", "jeffreys", "wald", "percentile")
PERCENTILE_METHODS: tuple[str, ...] = (
    "jackknife_t",
    "jackknife",
    "smoothed_se",
    "bootstrap_se",
    "smoothed_percentile",
    "percentile",
    "basic",
    "bca",
    "half_sampling",
)
CLUSTER_METHODS: tuple[str, ...] = ("auto", "wilson", "t", "percentile", "basic", "bootstrap_se", "bca")
CLUSTER_STATISTIC_METHODS: tuple[str, ...] = ("t", "percentile", "basic", "bootstrap_se", "bca")
STRATIFIED_METHODS: tuple[str, ...] = ("t", "percentile", "basic", "bootstrap_se")


def _kl_bernoulli(x, b):
    """``KL(Bernoulli(x) || Bernoulli(b))`` elementwise (``0 log 0 = 0``; ``inf`` where ``b`` is 0 or 1 and
    ``x`` is not)."""
    x, b = np.asarray(x, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _special.xlogy(x, x) - _special.xlogy(x, b) + _special.xlogy(1.0 - x, 1.0 - x) - _special.xlogy(1.0 - x, 1.0 - b)
    return np.where(np.isnan(out), np.inf, np.maximum(out, 0.0))


def bounded_mean_tail(mean, var, n, bound, direction: str):
    """One-sided p-value of H0 "the mean of ``n`` independent unit values in [0, 1] meets ``bound``", free of
    the values' law: twice the smaller of Hoeffding's relative-entropy bound and the empirical Bernstein
    bound (Bonferroni over the two). Vectorised over ``mean``, ``var`` (sample variance of the units,
    ``ddof=1``) and ``n``.

    * Hoeffding (1963, Theorem 1): ``P(mean <= x) <= exp(-n KL(x || theta))`` for ``x < theta``, for any
      independent values in [0, 1] with mean ``theta`` (a 0/1 unit is the extreme case): strong at small
      ``n`` and rates near 0 or 1, blind to values that are less spread than 0/1.
    * Maurer & Pontil (2009, Theorem 4): ``theta - mean <= sqrt(2 V ln(2/d) / n) + 7 ln(2/d) / (3 (n - 1))``
      with probability ``1 - d`` for i.i.d. units with sample variance ``V``: it uses the units' own spread
      (a prompt's mean over 16 images varies far less than one image), so it is the stronger at large ``n``.

    Example:
        >>> round(float(bounded_mean_tail(0.0, 0.0, 140, 0.05, "min")), 4)   # 140 prompts that all saw nothing
        0.0015
        >>> float(bounded_mean_tail(0.06, 0.01, 140, 0.05, "min"))           # on the passing side
        1.0
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
    """One-sided confidence limit of the mean of independent values in [0, 1], free of their law, by betting
    (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by betting", JRSS-B 86(1)).

    ``"low"``: the smallest ``m`` the betting test of H0 "mean <= m" does not reject at ``alpha``. The test's
    capital ``K_t(m) = prod_{i <= t} (1 + l_i (x_i - m))`` with predictable plug-in bets ``l_i = min(sqrt(2
    ln(1/alpha) / (n s_{i-1})), c / m)``, ``s_{i-1}`` the variance of the values before ``x_i`` (a prior of 1/4
    weighing one value), ``c = 1/2``, is a nonnegative supermartingale under H0, so it ever reaches
    ``1 / alpha`` with probability at most ``alpha`` (Ville's inequality), whatever the values' law; H0 is
    rejected when it does. The values are taken in the order given (an order that does not depend on them:
    the prompts' draw order). ``"high"``: the same on ``1 - values``. The bets use the values' own spread,
    so a mean of prompt shares that vary little gets a narrow limit at tens of prompts, where Hoeffding's
    and Maurer-Pontil's (:func:`bounded_mean_limit`) are wide. Capital is monotone in ``m``: bisection.

    Raises:
        ValueError: no values, values outside [0, 1], ``alpha`` outside (0, 1) or an unknown ``side``.

    Example:
        >>> x = np.tile([0.25, 0.5, 0.75], 40)                       # 120 prompt shares, mean 0.5
        >>> round(betting_limit(x, 0.001, "low"), 3), round(float(bounded_mean_limit(0.5, x.var(ddof=1), 120,
        ...                                                                          0.001, "low")), 3)
        (0.427, 0.328)
        >>> round(betting_limit(x, 0.001, "high"), 3)
        0.573
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
    """The one-sided confidence limit of :func:`bounded_mean_tail`'s test (vectorised): ``"low"``, the largest
    ``b <= mean`` whose H0 ``theta <= b`` it rejects at ``alpha``; ``"high"``, the smallest ``b >= mean`` whose
    ``theta >= b`` it rejects. 0 (``"low"``) or 1 (``"high"``) where none is rejected (fewer than 2 units).

    The test rejects where either of its two bounds does (each at half the level), so the limit is the nearer
    of the two bounds' own limits: Maurer & Pontil's in closed form (``mean - sqrt(2 V L / n) - 7 L / (3 (n -
    1))`` with ``L = ln(4 / alpha)``), Hoeffding's relative-entropy one (``n KL(mean || b) = ln(2 / alpha)``)
    by ``steps`` bisections of the divergence alone (scalars in plain floats: a gate reads one limit at a
    time, thousands of times in a sequential run).

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


def bound_cannot_fail(direction: str, bound: float | None, uncertainty: dict | None) -> bool:
    """Whether a bound can never be missed: a share (a score interval, ``n_effective`` set: values in
    [0, 1]) with a ``min`` bound at or below 0 or a ``max`` bound at or above 1.

    The update flow writes such a bound when the model measured the edge itself (a coverage of exactly
    0, as the random-weight tiny model does): the gate then pins the code path but cannot catch a
    regression, and the summary says so.

    Example:
        >>> bound_cannot_fail("min", -0.1, {"n_effective": 18.0}), bound_cannot_fail("min", 0.2, {"n_effective": 18.0})
        (True, False)
        >>> bound_cannot_fail("min", -0.1, {"n_effective": None, "se": 0.1})   # not a share: may be negative
        False
    """
    if bound is None or not uncertainty or uncertainty.get("n_effective") is None:
        return False
    return bound <= 0.0 if direction == "min" else bound >= 1.0


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval and what it was computed from.

    Attributes:
        estimate: the statistic on the full sample (the gate's measured value).
        low: lower end of the interval.
        high: upper end of the interval.
        method: the method's name (one of the module's ``*_METHODS``).
        confidence: nominal two-sided coverage, e.g. 0.95.
        n_units: how many resampled units stand behind it (generated images, images, prompts).
        se: standard error used by a normal or t interval (``None`` for quantile methods). The
            one-sided p-value of :func:`t2i_fairness.metrics.decisions.p_value_normal` with this
            ``se`` and ``df`` agrees with the interval: a bound outside it has ``p < (1 - confidence) / 2``.
        df: degrees of freedom of the t quantile (``None`` means the normal quantile).
        n_effective: for score (Wilson-type) intervals of a share, the effective number of
            independent trials ``estimate (1 - estimate) / variance``; the interval is the set of
            values ``v`` with ``|estimate - v| <= z sqrt(v (1 - v) / n_effective)``, and
            :meth:`se_at` gives the standard error at ``v`` that a score test uses.
        p_floor: the smallest p-value the design supports without an assumption on the law of its
            units (0: none). A t test over ``G`` prompts is exact only for normal prompt values; no
            test free of that assumption gives a p below ``2^-G`` on ``G`` prompts (a sign-flip test's
            smallest), so :func:`floor_to_units` sets ``p_floor = 2^-G``: the test never fails below it and
            its power at a level under it is 0 (docs/calibration.md: 4 skewed prompts put the t test at
            80-140 times its level).
        bounded: for a mean of unit values in [0, 1] (a cluster share: each prompt's share), the units'
            count, mean and variance: the test then also holds free of their law (:func:`bounded_mean_tail`:
            its p-value is the larger of the two, its limits the wider, its power the smaller). A share of
            skewed clusters is anti-conservative in the far tail (docs/calibration.md: CIS_K 1.3 x, the CIS
            rate floor 62 x their level without it).
        trials_cap: the most trials a share's limits can ever count, whatever the sample's size (a coverage:
            its real balls, ``n_effective`` being capped there): a test at a larger size cannot be narrower
            than a share's exact interval at that many trials (``None``: no such cap).

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
        """The fields as plain Python values, for a gate record or report.

        Example:
            >>> Interval(0.5, 0.4, 0.6, "t", 0.95, 12, se=0.05, df=11).record()["df"]
            11
        """
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

    def trials(self, alpha: float) -> float:
        """A share's effective number of trials at one-sided level ``alpha``: ``n_effective``, times
        ``(z_alpha / t_{df, alpha})^2`` when its variance was estimated on ``df`` degrees of freedom
        (Korn & Graubard 1998), which shrinks it in the far tail where few clusters say little."""
        return share_trials(self.n_effective, alpha, self.df)

    def limit(self, alpha: float, side: str) -> float:
        """The one-sided confidence limit at level ``alpha`` (``side`` ``"low"`` or ``"high"``): the true
        value lies beyond it with probability at most ``alpha``.

        A share's is exact: Clopper and Pearson's limit at its effective size (:func:`share_limit`; for a
        binomial precision, ``n`` images). Others: ``estimate -+ q se`` (``q`` the normal or Student t
        quantile). The gate's p-value is the smallest ``alpha`` whose limit excludes the bound.

        Example:
            >>> iv = precision_interval(np.r_[np.ones(45, bool), np.zeros(15, bool)])   # 45 of 60
            >>> round(iv.limit(0.025, "low"), 4), round(iv.limit(0.025, "high"), 4)     # Clopper-Pearson
            (0.6214, 0.8528)
            >>> round(Interval(0.5, 0.4, 0.6, "t", 0.95, 12, se=0.05, df=11).limit(0.025, "high"), 4)
            0.61
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
        """The one-sided limit ``--t2i-sequential``'s futility rule reads: :meth:`limit`, except that a mean of
        bounded units that keeps its units (a cluster share: ``bounded.values``) reads the betting limit as its
        law-free side (:func:`betting_limit`: valid whatever the units' law, narrower than Hoeffding's and
        Maurer-Pontil's at tens of units), the wider of it and the interval's own. A futility pass never adds a
        false alarm; its promise (a model missing by the margin passes early with probability <= beta) needs
        only a limit that covers at ``beta``. The gate's tests keep :meth:`limit` and :meth:`p_value`."""
        if self.bounded is None or self.bounded.values is None:
            return self.limit(alpha, side)
        inner = dataclasses.replace(self, bounded=None).limit(alpha, side)  # checks alpha and side; +-inf below p_floor
        if not math.isfinite(inner):
            return inner
        free = betting_limit(self.bounded.values, alpha, side)
        return float(min(inner, free) if side == "low" else max(inner, free))

    def p_value(self, bound: float, direction: str) -> float:
        """One-sided p-value of H0 "the true value meets ``bound``" (``>=`` for ``min``, ``<=`` for ``max``).

        A share without estimated degrees of freedom: the exact binomial tail at its effective size
        (:func:`share_tail`); a share with them: the smallest level whose :meth:`limit` excludes the bound;
        others: the normal or t tail of ``(estimate - bound) / se``. In (0, 1]: never 0.

        Example:
            >>> iv = precision_interval(np.r_[np.ones(45, bool), np.zeros(15, bool)])
            >>> round(iv.p_value(0.9, "min"), 6)       # P(Binomial(60, 0.9) <= 45)
            0.000666
        """
        bound = float(bound)
        if direction not in ("min", "max"):
            raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
        if self.is_share and (self.df is None or not math.isfinite(self.df)):
            p = float(share_tail(self.estimate * self.n_effective, self.n_effective, bound, direction))
        elif self.is_share:
            p = invert_limit(self.limit, bound, direction)
        else:
            if self.se is None:
                raise ValueError(f"interval method {self.method!r} has no standard error: no p-value")
            p = normal_tail(self.estimate, self.se, bound, direction, self.df)
        if self.bounded is not None:
            p = max(p, self.bounded.p_value(bound, direction))
        return min(max(p, P_FLOOR, self.p_floor), 1.0)

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        """The probability that the gate's test at level ``alpha`` fails a model whose true value misses
        ``bound`` by ``effect`` (``bound - effect`` for ``min``), at this interval's size.

        A share's is exact for a binomial (the test's critical count at the bound, the binomial
        distribution at the true value; continuous in the effective size otherwise); others: the
        normal approximation ``Phi(effect / se - q_alpha)`` (``q``: normal or t quantile).

        Example:
            >>> iv = precision_interval(np.r_[np.ones(54, bool), np.zeros(6, bool)])    # 60 images
            >>> round(iv.power(0.9, "min", 0.10, 1e-4), 3)    # a 0.10 miss at alpha 1e-4: P(Bin(60, 0.8) <= 43)
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
    """``interval`` with ``p_floor = 2^-units``: a test over ``units`` independent units (prompts) claims no
    p-value below what a test free of assumptions on their law can give (a sign-flip test's smallest).

    Example:
        >>> iv = floor_to_units(Interval(0.5, 0.4, 0.6, "t", 0.95, 4, se=0.01, df=3), 4)
        >>> iv.p_floor, iv.p_value(0.9, "min"), iv.power(0.9, "min", 0.1, 1e-4), iv.limit(1e-4, "high")
        (0.0625, 0.0625, 0.0, inf)
    """

    if units < 1:
        raise ValueError(f"`units` must be at least 1, but got {units}")
    return dataclasses.replace(interval, p_floor=max(float(interval.p_floor), 0.5 ** int(units)))


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------


def _check_confidence(confidence: object) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)):
        raise ValueError(f"`confidence` must be a float in (0, 1), but got {confidence!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must be in (0, 1), but got {confidence!r}")
    return float(confidence)


def _check_resamples(n_resamples: object, minimum: int = 2) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < minimum:
        raise ValueError(f"`n_resamples` must be an integer >= {minimum}, but got {n_resamples!r}")
    return int(n_resamples)


def _check_method(method: object, choices: tuple[str, ...]) -> str:
    if method not in choices:
        raise ValueError(f"unknown `method` {method!r}; choose from {list(choices)}")
    return str(method)


def _finite_1d(name: str, values: object, min_size: int = 1) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must hold real numbers, but got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1 or arr.size < min_size:
        raise ValueError(f"`{name}` must be 1-D with at least {min_size} value(s), but got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(f"`{name}` holds a non-finite value {arr[bad[0]]!r} at index {int(bad[0])}")
    return arr


def _membership(membership: object, name: str = "membership") -> np.ndarray:
    m = np.asarray(membership)
    if m.dtype != bool:
        if m.dtype.kind not in "biu" or (m.size and not np.isin(m, (0, 1)).all()):
            raise ValueError(f"`{name}` must be a boolean (n_fake, n_real) matrix, but got dtype {m.dtype}")
        m = m.astype(bool)
    if m.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D (n_fake, n_real) matrix, but got shape {m.shape}")
    return m


def _z(confidence: float) -> float:
    return float(_special.ndtri(0.5 + confidence / 2.0))


#: The smallest p-value a sampled measurement reports: the tails in float64 underflow beyond it, and a
#: sample never gives certainty (a p of exactly 0).
P_FLOOR = 1e-300


def upper_quantile(alpha: float, df: float | None = None) -> float:
    """The one-sided upper ``alpha`` quantile of the standard normal (``df`` None or infinite) or of Student's t
    on ``df`` degrees of freedom, accurate down to ``alpha = 1e-300`` (``ndtri(1 - alpha)`` is infinite
    there, and scipy's t inverse gives -inf below about 1e-200 for a few degrees of freedom, where the
    tail ``P(T > t) ~ c t^-df`` gives it in closed form).

    Example:
        >>> round(upper_quantile(0.025), 4), round(upper_quantile(0.025, 3), 4)
        (1.96, 3.1824)
        >>> round(upper_quantile(1e-300), 2), f"{upper_quantile(1e-300, 3):.3e}"
        (37.05, '1.033e+100')
    """
    a = float(alpha)
    if df is None or not math.isfinite(df):
        return float(-_special.ndtri(a))
    q = float(-_special.stdtrit(df, a))  # scipy's t.ppf, without its per-call argument checks (80 times faster)
    if math.isfinite(q):  # (<= 0 from alpha = 1/2 on: that is the quantile)
        return q
    # P(T > t) ~ c t^-df with c = Gamma((df+1)/2) df^((df-2)/2) / (sqrt(pi) Gamma(df/2))
    log_c = (_special.gammaln((df + 1) / 2) + (df - 2) / 2 * math.log(df) - 0.5 * math.log(math.pi)
             - _special.gammaln(df / 2))
    return float(math.exp((log_c - math.log(a)) / df))


def _t_density_at_0(df: float) -> float:
    """Student's t density at 0, ``Gamma((df + 1) / 2) / (sqrt(df pi) Gamma(df / 2))`` (``scipy.stats.t.pdf(0, df)``).

    Example:
        >>> abs(_t_density_at_0(7.0) - float(_stats.t.pdf(0.0, 7.0))) < 1e-15
        True
    """
    return math.exp(_special.gammaln((df + 1) / 2) - _special.gammaln(df / 2)) / math.sqrt(df * math.pi)


def _check_alpha(alpha: object) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"`alpha` must be in (0, 1), but got {alpha!r}")
    return a


def share_tail(successes, trials, bound, direction: str):
    """Exact one-sided binomial p-value of H0 "the share meets ``bound``": ``P(X <= x)`` for a ``min``
    gate and ``P(X >= x)`` for ``max``, ``X ~ Binomial(trials, bound)``, vectorised.

    Continuous in ``successes`` and ``trials`` (the regularized incomplete beta function), so an
    effective number of trials works as in Korn & Graubard's (1998) Clopper-Pearson interval for
    survey shares. Never 0 (floored at :data:`P_FLOOR`).

    Example:
        >>> float(share_tail(45, 60, 0.9, "min")) == float(_stats.binom.cdf(45, 60, 0.9))
        True
        >>> float(share_tail(6, 6, 0.5, "max"))     # all 6 of 6 against a ceiling of 0.5: 1/64
        0.015625
        >>> float(share_tail(6, 6, 0.5, "min"))
        1.0
    """
    x, n, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (successes, trials, bound)))
    x = np.clip(x, 0.0, n)
    out = np.ones(x.shape)
    if direction == "min":  # P(X <= x) = I_{1-b}(n - x, x + 1)
        live = (x < n) & (b > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            v = _special.betainc(np.where(live, n - x, 1.0), x + 1.0, np.clip(1.0 - b, 0.0, 1.0))
        out = np.where(live, np.where(b >= 1, 0.0, v), 1.0)
    elif direction == "max":  # P(X >= x) = I_b(x, n - x + 1)
        live = (x > 0) & (b < 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            v = _special.betainc(np.where(live, x, 1.0), n - x + 1.0, np.clip(b, 0.0, 1.0))
        out = np.where(live, np.where(b <= 0, 0.0, v), 1.0)
    else:
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    out = np.clip(out, P_FLOOR, 1.0)
    return out if out.ndim else float(out)


def share_limit(successes, trials, alpha, side: str):
    """Clopper and Pearson's exact one-sided limit of a share at level ``alpha``, vectorised: the
    ``high`` limit ``u`` solves ``P(Binomial(n, u) <= x) = alpha`` (1 at ``x = n``), the ``low`` one
    ``P(Binomial(n, l) >= x) = alpha`` (0 at ``x = 0``). :func:`share_tail` at the bound is at most
    ``alpha`` exactly when the limit excludes the bound, so the two agree. Continuous in ``x``, ``n``.

    Example:
        >>> round(float(share_limit(0, 6, 0.025, "high")), 4)     # 1 - 0.025 ** (1 / 6)
        0.4593
        >>> round(float(share_limit(45, 60, 0.025, "low")), 4)
        0.6214
    """
    if side in ("low", "high") and np.ndim(successes) == 0 and np.ndim(trials) == 0 and np.ndim(alpha) == 0:
        return _share_limit_one(float(successes), float(trials), float(alpha), side)
    x, n, a = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (successes, trials, alpha)))
    x = np.clip(x, 0.0, n)
    with np.errstate(invalid="ignore"):  # the branch np.where leaves out may be NaN (1 - NaN): not a result
        return _share_limit(x, n, a, side)


def _share_limit(x: np.ndarray, n: np.ndarray, a: np.ndarray, side: str):
    known = n > 1e-12  # no trials (a share whose few clusters say nothing at this level): the whole range
    if side == "high":  # 1 - u solves I_{1-u}(n - x, x + 1) = alpha: the same lower quantile, mirrored
        live = (x < n) & known
        out = np.where(live, 1.0 - _beta_low_quantile(a, np.where(live, n - x, 1.0), x + 1.0), 1.0)
    elif side == "low":
        live = (x > 0) & known
        out = np.where(live, _beta_low_quantile(a, np.where(live, x, 1.0), np.where(live, n - x, 0.0) + 1.0), 0.0)
    else:
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    out = np.clip(out, 0.0, 1.0)
    return out if out.ndim else float(out)


def _share_limit_one(x: float, n: float, a: float, side: str) -> float:
    """:func:`share_limit` of one share: the same formulas on floats, without numpy's array machinery (about ten
    times faster: a worst-of gate over a thousand CIS components asks for thousands of limits per look)."""
    x = min(max(x, 0.0), n)
    known = n > 1e-12
    if side == "high":
        out = 1.0 - _beta_low_quantile_one(a, n - x, x + 1.0) if (x < n and known) else 1.0
    else:
        out = _beta_low_quantile_one(a, x, n - x + 1.0) if (x > 0 and known) else 0.0
    return min(max(out, 0.0), 1.0)


def _beta_low_quantile_one(p: float, a: float, b: float) -> float:
    """:func:`_beta_low_quantile` of one quantile."""
    v = float(_special.betaincinv(a, b, p))
    if math.isfinite(v):
        return v
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        return float(np.exp((np.log(p) + np.log(a) + _special.betaln(a, b)) / a))


def _beta_low_quantile(p, a, b):
    """The ``p`` quantile of Beta(a, b) for small ``p`` too: scipy's inverse gives NaN below about 1e-200,
    where ``I_x(a, b) ~ x^a / (a B(a, b))`` is exact to float precision, so ``x = (p a B(a, b))^(1/a)``."""
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        v = _special.betaincinv(a, b, p)
        tail = np.exp((np.log(p) + np.log(a) + _special.betaln(a, b)) / a)
    return np.where(np.isfinite(v), v, tail)


def upper_quantiles(alpha, df=None) -> np.ndarray:
    """:func:`upper_quantile` over arrays of levels and degrees of freedom (``df`` None, or infinite entries:
    the normal quantile); where scipy's t inverse gives up in the far tail, the scalar function's closed form.

    Example:
        >>> upper_quantiles(0.025, np.array([3.0, np.inf])).round(4).tolist()
        [3.1824, 1.96]
    """
    a = np.asarray(alpha, dtype=np.float64)
    if df is None:
        return -_special.ndtri(a)
    a, d = np.broadcast_arrays(a, np.asarray(df, dtype=np.float64))
    finite = np.isfinite(d)
    q = np.where(finite, -_special.stdtrit(np.where(finite, d, 1.0), a), -_special.ndtri(a))
    far = ~np.isfinite(q)
    if far.any():
        q[far] = [upper_quantile(x, y) for x, y in zip(a[far], d[far])]
    return q


def share_trials(n_effective, alpha, df=None):
    """A share's effective number of trials at one-sided level ``alpha`` (:meth:`Interval.trials`), vectorised:
    ``n_effective``, times ``(z_alpha / t_{df, alpha})^2`` where its variance was estimated on ``df`` degrees
    of freedom (Korn & Graubard 1998). Scalars give a float by the scalar quantiles; arrays broadcast.

    Example:
        >>> round(share_trials(100.0, 0.001, 9), 2), share_trials(np.array([100.0, 50.0]), 0.001).tolist()
        (51.72, [100.0, 50.0])
    """
    if np.ndim(n_effective) == 0 and np.ndim(alpha) == 0 and np.ndim(df) == 0:
        n = float(n_effective)
        if df is None or not math.isfinite(df):
            return n
        z, t = upper_quantile(alpha), upper_quantile(alpha, df)
        if abs(t) < 1e-9:  # alpha = 1/2: both quantiles 0, their ratio the ratio of the densities at 0
            return n * (_t_density_at_0(df) * math.sqrt(2.0 * math.pi)) ** 2  # over the normal density at 0
        return n * (z / t) ** 2
    n = np.asarray(n_effective, dtype=np.float64) + np.zeros(np.shape(alpha))
    if df is None:
        return n
    d = np.asarray(df, dtype=np.float64)
    z, t = upper_quantiles(alpha), upper_quantiles(alpha, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (z / t) ** 2
    half = np.abs(t) < 1e-9
    if half.any():
        ratio = np.where(half, np.vectorize(share_trials, otypes=[float])(1.0, alpha, d), ratio)
    return np.where(np.isfinite(d), n * ratio, n)


def share_limits(estimate, n_effective, alpha, side: str, df=None):
    """A share's one-sided limit at level ``alpha`` (:meth:`Interval.limit` of a score interval without a
    law-free part), vectorised over runs: Clopper and Pearson's at :func:`share_trials` trials. A bench
    measuring a share gate over thousands of simulated runs reads its limits here.

    Example:
        >>> iv = precision_interval(np.r_[np.ones(45, bool), np.zeros(15, bool)])
        >>> share_limits(iv.estimate, iv.n_effective, 0.025, "low") == iv.limit(0.025, "low")
        True
        >>> share_limits(np.array([0.75, 0.5]), np.array([60.0, 60.0]), 0.025, "low", df=np.array([9, 59])).round(4).tolist()
        [0.5987, 0.3653]
    """
    n = share_trials(n_effective, alpha, df)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return share_limit(estimate * n, n, alpha, side)


def normal_tail(estimate, se, bound, direction: str, df=None, *, p_floor=0.0):
    """One-sided p-value of H0 "the true value meets ``bound``" for an estimate with standard error ``se``: the
    Student t tail on ``df`` degrees of freedom (normal where ``df`` is None or infinite), 1 or
    :data:`P_FLOOR` where ``se`` is 0 (:meth:`Interval.p_value` of a normal or t interval); never below
    ``p_floor`` (:func:`floor_to_units`). Vectorised over runs; scalars give a float.

    Example:
        >>> round(normal_tail(0.45, 0.02, 0.5, "min", 3), 5), round(normal_tail(0.55, 0.02, 0.5, "min"), 5)
        (0.04385, 0.99379)
        >>> normal_tail(np.array([0.45, 0.45]), 0.02, 0.5, "min", 3, p_floor=0.0625).round(4).tolist()
        [0.0625, 0.0625]
    """
    if direction not in ("min", "max"):
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    sign = 1.0 if direction == "min" else -1.0
    margin = sign * (np.asarray(estimate, dtype=np.float64) - bound)
    se = np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = margin / se
        if df is None:
            p = _special.ndtr(z)
        else:
            d = np.asarray(df, dtype=np.float64)
            finite = np.isfinite(d)
            p = np.where(finite, _stats.t.cdf(z, np.where(finite, d, 1.0)), _special.ndtr(z))
    p = np.where(se <= 0, np.where(margin >= 0, 1.0, P_FLOOR), p)
    p = np.minimum(np.maximum(np.maximum(p, P_FLOOR), p_floor), 1.0)
    return float(p) if p.ndim == 0 else p


def share_power(trials: float, bound: float, truth: float, direction: str, alpha: float, *,
                integer: bool = False) -> float:
    """Probability that :func:`share_tail` rejects at level ``alpha`` when the true share is ``truth``.

    The test's critical count at the bound (the largest ``x`` with ``share_tail(x) <= alpha``; a whole
    number for a binomial, ``integer=True``), then the binomial distribution at ``truth``.

    Example:
        >>> round(share_power(60, 0.9, 0.8, "min", 1e-4, integer=True), 4)  # P(Bin(60, 0.8) <= 43)
        0.0772
        >>> share_power(6, 0.5, 0.4, "min", 1e-4, integer=True)            # 0 of 6 is p = 1/64: never
        0.0
    """
    n, b = float(trials), float(bound)
    t = min(max(float(truth), 0.0), 1.0)
    if direction == "max":  # mirror: successes <-> failures
        return share_power(n, 1.0 - b, 1.0 - t, "min", alpha, integer=integer)
    if not n > 0 or share_tail(0.0, n, b, "min") > alpha:
        return 0.0
    if integer:
        ks = np.arange(int(round(n)) + 1)
        crit = int(ks[share_tail(ks, n, b, "min") <= alpha].max())
        return float(_stats.binom.cdf(crit, int(round(n)), t))
    from scipy.optimize import brentq

    top = n * (1.0 - 1e-12)
    if share_tail(top, n, b, "min") <= alpha:
        return 1.0
    crit = brentq(lambda x: float(share_tail(x, n, b, "min")) - alpha, 0.0, top, xtol=1e-10 * max(1.0, n))
    return float(share_tail(crit, n, t, "min")) if t > 0 else 1.0


def invert_limit(limit: Callable[[float, str], float], bound: float, direction: str) -> float:
    """The p-value of a test given by its one-sided limits: the smallest level ``alpha`` at which
    ``limit(alpha, "high") < bound`` (a ``min`` gate: evidence the value is below the bound) or
    ``limit(alpha, "low") > bound`` (``max``). Limits must move monotonically towards the estimate as
    ``alpha`` grows. Levels in ``[P_FLOOR, 1/2]``; a bound not excluded at 1/2 gives ``p = 1`` (so
    ``P(p <= a) <= a`` holds for every ``a``).

    Example:
        >>> iv = Interval(0.5, 0.4, 0.6, "t", 0.95, 12, se=0.05)
        >>> round(invert_limit(iv.limit, 0.6, "min"), 6) == round(float(_special.ndtr(-2.0)), 6)
        True
    """
    side = "high" if direction == "min" else "low"
    bound = float(bound)

    def excluded(log_a: float) -> bool:  # bisection on the decision itself: limits may be clipped or flat
        v = limit(math.exp(log_a), side)
        return v < bound if direction == "min" else v > bound

    lo, hi = math.log(P_FLOOR), math.log(0.5)
    if not excluded(hi):
        return 1.0
    if excluded(lo):
        return P_FLOOR
    for _ in range(64):  # log-levels to about 4e-17 of the 690 searched: p to relative 1e-15
        mid = 0.5 * (lo + hi)
        if excluded(mid):
            hi = mid
        else:
            lo = mid
    return float(math.exp(hi))


# --------------------------------------------------------------------------------------------
# shared resampling machinery
# --------------------------------------------------------------------------------------------


def _bootstrap_counts(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """(B, n) multiplicities of an ordinary bootstrap (n draws with replacement from n units)."""
    idx = rng.integers(0, n, size=(n_resamples, n))
    flat = idx + n * np.arange(n_resamples)[:, None]
    return np.bincount(flat.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)


def _subsample_masks(rng: np.random.Generator, n: int, m: int, n_resamples: int) -> np.ndarray:
    """(B, n) 0/1 masks of ``m`` units drawn without replacement."""
    keys = rng.random((n_resamples, n))
    chosen = np.argpartition(keys, m - 1, axis=1)[:, :m] if m < n else np.tile(np.arange(n), (n_resamples, 1))
    mask = np.zeros((n_resamples, n), dtype=np.float32)
    np.put_along_axis(mask, chosen, 1.0, axis=1)
    return mask


def _normal(method: str, estimate: float, se: float, confidence: float, n_units: int, df: float | None = None,
            clip: tuple[float, float] | None = None) -> Interval:
    q = float(_special.stdtrit(df, 0.5 + confidence / 2.0)) if df is not None and math.isfinite(df) else _z(confidence)
    low, high = estimate - q * se, estimate + q * se
    if clip is not None:
        low, high = (min(max(float(v), clip[0]), clip[1]) for v in (low, high))
    return Interval(float(estimate), float(low), float(high), method, confidence, n_units, float(se), df)


def agresti_coull(successes: float, trials: float, confidence: float = 0.95) -> tuple[float, float]:
    """Agresti and Coull's adjusted share ``(successes + z^2/2) / (trials + z^2)`` and its standard error
    ``sqrt(p~ (1 - p~) / (trials + z^2))``, ``z`` the two-sided normal quantile of ``confidence``; neither
    is 0 at a share of 0 or 1. ``successes`` may be fractional (a share times an effective size).

    Example:
        >>> p, se = agresti_coull(18, 18)
        >>> round(p, 4), round(se, 4)
        (0.9121, 0.0606)
    """
    z2 = _z(confidence) ** 2
    n_t = float(trials) + z2
    p_t = (float(successes) + z2 / 2.0) / n_t
    return p_t, math.sqrt(p_t * (1.0 - p_t) / n_t)


def _score(method: str, estimate: float, n_eff: float, confidence: float, n_units: int,
           df: float | None = None) -> Interval:
    """Wilson's score interval for a proportion ``estimate`` worth ``n_eff`` independent trials; with ``df``
    (a variance estimated from few clusters) at ``n_eff (z / t_df)^2`` trials (Korn & Graubard 1998), the
    interval recording the unadjusted ``n_eff`` and ``df`` (its limits at other levels adjust again)."""
    z = _z(confidence)
    shown = n_eff
    if df is not None:
        shown = max(n_eff * (z / float(_special.stdtrit(df, 0.5 + confidence / 2.0))) ** 2, 1e-9)
    interval = _wilson(method, estimate, shown, confidence, n_units, z)
    if df is None:
        return interval

    return dataclasses.replace(interval, n_effective=float(n_eff), df=float(df),
                               se=math.sqrt(estimate * (1.0 - estimate) / n_eff))


def _wilson(method: str, estimate: float, n_eff: float, confidence: float, n_units: int, z: float) -> Interval:
    centre = (estimate + z * z / (2.0 * n_eff)) / (1.0 + z * z / n_eff)
    half = z / (1.0 + z * z / n_eff) * math.sqrt(estimate * (1.0 - estimate) / n_eff + z * z / (4.0 * n_eff**2))
    se = math.sqrt(estimate * (1.0 - estimate) / n_eff)
    # the score interval always holds the estimate; say so exactly at 0 and 1 (rounding)
    low, high = min(max(centre - half, 0.0), estimate), max(min(centre + half, 1.0), estimate)
    return Interval(float(estimate), float(low), float(high), method, confidence, n_units, se, None, n_eff)


def _from_replicates(
    method: str,
    estimate: float,
    replicates: np.ndarray,
    confidence: float,
    n_units: int,
    jackknife: np.ndarray | None = None,
    clip: tuple[float, float] | None = None,
) -> Interval:
    """percentile / basic / bootstrap_se / bca interval from bootstrap replicates of the statistic."""
    alpha = (1.0 - confidence) / 2.0
    if method == "bootstrap_se":
        return _normal(method, estimate, float(np.std(replicates, ddof=1)), confidence, n_units, clip=clip)
    if method == "percentile":
        low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    elif method == "basic":
        q_low, q_high = np.quantile(replicates, [alpha, 1.0 - alpha])
        low, high = 2.0 * estimate - q_high, 2.0 * estimate - q_low
    elif method == "bca":
        low, high = _bca(estimate, replicates, jackknife, alpha)
    else:  # pragma: no cover - callers check the method
        raise ValueError(f"unknown method {method!r}")
    if clip is not None:
        low, high = (min(max(float(v), clip[0]), clip[1]) for v in (low, high))
    return Interval(float(estimate), float(low), float(high), method, confidence, n_units)


def _bca(estimate: float, replicates: np.ndarray, jackknife: np.ndarray | None, alpha: float) -> tuple[float, float]:
    """Efron's bias-corrected and accelerated percentile interval (Efron & Tibshirani 1993, ch. 14)."""
    b = replicates.size
    share = (np.count_nonzero(replicates < estimate) + 0.5 * np.count_nonzero(replicates == estimate)) / b
    share = min(max(share, 0.5 / b), 1.0 - 0.5 / b)
    z0 = float(_special.ndtri(share))
    acc = 0.0
    if jackknife is not None and jackknife.size > 1:
        d = jackknife.mean() - jackknife
        denom = float(np.sum(d**2)) ** 1.5
        acc = float(np.sum(d**3)) / (6.0 * denom) if denom > 0 else 0.0
    levels = []
    for a in (alpha, 1.0 - alpha):
        za = float(_special.ndtri(a))
        levels.append(float(_special.ndtr(z0 + (z0 + za) / (1.0 - acc * (z0 + za)))))
    low, high = np.quantile(replicates, levels)
    return float(low), float(high)


# --------------------------------------------------------------------------------------------
# coverage (DIG In / Decomposed DIG: share of real balls holding a generated image)
# --------------------------------------------------------------------------------------------


def _coverage_of(weights: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Coverage of each weighted resample: weights (B, n_fake) >= 0, member (n_fake, n_real) float32."""
    return ((weights.astype(np.float32) @ member) > 0).mean(axis=1)


def _coverage_jackknife(member: np.ndarray) -> np.ndarray:
    """Delete-one values: removing fake i uncovers exactly the balls it alone covers."""
    counts = member.sum(axis=0)
    alone = member[:, counts == 1].sum(axis=1)
    return (np.count_nonzero(counts) - alone) / member.shape[1]


def jackknife_se_df(jack):
    """The delete-one jackknife's standard error ``sqrt((n - 1) / n sum_i d_i^2)`` and its effective degrees of
    freedom, Kish's ``(sum_i d_i^2)^2 / sum_i d_i^4`` (at least 1; 1 when the variance is 0), from the delete-one
    values ``jack`` (``d_i`` centred): :func:`coverage_interval`'s ``jackknife_wilson_df``. One run (1-D) gives
    floats; ``(runs, n)`` arrays give arrays.

    Example:
        >>> se, df = jackknife_se_df(np.array([0.25, 0.5, 0.5, 0.5, 0.5, 0.5]))
        >>> round(se, 4), round(df, 2)
        (0.2083, 1.43)
    """
    jack = np.asarray(jack, dtype=np.float64)
    n = jack.shape[-1]
    if jack.ndim == 1:
        d2 = (jack - jack.mean()) ** 2
        se = math.sqrt((n - 1) / n * float(np.sum(d2)))
        return se, (1.0 if se == 0 else max(1.0, float(np.sum(d2)) ** 2 / float(np.sum(d2**2))))
    d2 = (jack - jack.mean(axis=-1, keepdims=True)) ** 2
    se = np.sqrt((n - 1) / n * d2.sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se == 0, 1.0, np.maximum(1.0, d2.sum(axis=-1) ** 2 / (d2**2).sum(axis=-1)))
    return se, df


def coverage_interval(
    membership: object,
    *,
    method: str = "jackknife_wilson_df",
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Interval:
    """Interval for coverage, the share of real balls that hold at least one generated image.

    ``coverage = membership.any(axis=0).mean()``; the generated images (rows) are the random
    units, the real images, their radii and ``n_fake`` are fixed, and the interval is for the
    coverage a fresh set of ``n_fake`` generated images has in expectation (module docstring).
    Drawing generated images *with replacement* can only lose distinct images, so bootstrap
    replicates of coverage sit below the estimate and the percentile interval misses from above.

    Methods: ``jackknife_wilson``: the delete-one jackknife variance (removing
    image ``i`` uncovers exactly the balls only it covers, so it is exact and O(n_fake x n_real);
    by the Efron-Stein inequality its expectation is at least the variance at ``n_fake - 1``)
    turned into an effective number of balls ``n_eff = c (1 - c) / var``, capped at ``n_real``
    (a floor on the variance: balls that overlap make coverages of neighbouring balls move
    together, never more independent than ``n_real`` coin flips), and Wilson's score interval at
    ``n_eff`` (Korn & Graubard 1998's effective sample size): it stays inside [0, 1], is skewed
    like a share near 0 or 1, and has width when every covered ball is held twice;
    ``jackknife_wilson_df`` (the default): the same, with the jackknife variance's degrees of freedom, Kish's
    effective number of images behind it ``(sum_i d_i^2)^2 / sum_i d_i^4`` (``d_i`` the centred
    delete-one values; 1 when the variance is 0, which says nothing of it), so a test at level ``a``
    uses ``n_eff (z_a / t_{df, a})^2`` trials (:meth:`Interval.trials`, Korn & Graubard): a few
    images carrying the whole variance make a noisy variance: without the correction
    ``bench/bench_gate_sizes.py`` measured sizes up to 30x the level at 6-60 images and 10-180 balls, so
    it is the default (docs/calibration.md);
    ``jackknife`` (the same variance, normal interval);
    ``half_sampling`` (delete-d jackknife with d = n/2: standard error from subsets of half the
    images drawn without replacement, normal interval); ``subsampling`` (Politis-Romano: quantiles of
    ``sqrt(m) (theta_m - theta)`` over subsets of ``m = n/2``, rescaled by ``1/sqrt(n)``);
    ``bootstrap_se`` (normal with the bootstrap standard error); ``percentile``, ``basic``, ``bca``.
    Normal intervals are clipped to [0, 1].

    Args:
        membership: boolean ``(n_fake, n_real)``: generated image ``i`` lies in real ``j``'s ball.
            Rows are the generated images that were scored; an image without a feature is an
            all-False row (it covers nothing).
        method: one of :data:`COVERAGE_METHODS`.
        confidence: two-sided nominal coverage in (0, 1).
        n_resamples: resamples for the resampling methods.
        seed: seed of ``numpy.random.default_rng``.

    Returns:
        An :class:`Interval` with ``n_units = n_fake``.

    Raises:
        ValueError: ``membership`` not a 2-D boolean matrix, fewer than 2 rows or no column, an
            unknown ``method``, ``confidence`` outside (0, 1) or ``n_resamples < 2``.

    Example:
        >>> m = np.zeros((6, 4), dtype=bool)
        >>> m[0, 0] = m[1, 1] = m[2, 1] = True       # ball 0 held by image 0 alone, ball 1 twice
        >>> iv = coverage_interval(m)
        >>> iv.estimate, round(iv.se, 4), iv.n_effective, iv.method
        (0.5, 0.25, 4.0, 'jackknife_wilson_df')
        >>> round(iv.low, 4), round(iv.high, 4)       # 4 images, 1 of them carries the variance: df 1
        (0.0224, 0.9776)
        >>> coverage_interval(m, method="percentile", seed=1).as_tuple()   # the biased one
        (0.25, 0.5)
        >>> round(coverage_interval(m, method="jackknife_wilson_df").df, 2)   # image 0 carries the variance
        1.43
    """
    member = _membership(membership)
    method = _check_method(method, COVERAGE_METHODS)
    confidence = _check_confidence(confidence)
    n_resamples = _check_resamples(n_resamples)
    n, r = member.shape
    if n < 2 or r < 1:
        raise ValueError(f"`membership` must have at least 2 generated rows and 1 real column, but got shape {member.shape}")
    estimate = float(member.any(axis=0).mean())
    if method in ("jackknife", "jackknife_wilson", "jackknife_wilson_df"):
        se, kish = jackknife_se_df(_coverage_jackknife(member))
        if method == "jackknife":
            return _normal(method, estimate, se, confidence, n, clip=(0.0, 1.0))
        n_eff = share_effective_size(estimate, se, float(r), True)  # at most the r balls: never more independent
        df = kish if method == "jackknife_wilson_df" else None
        # n_eff is capped at the r real balls and the far tail's trials at n_eff, at any number of generated images
        return dataclasses.replace(_score(method, estimate, n_eff, confidence, n, df=df), trials_cap=int(r))
    rng = np.random.default_rng(seed)
    fmember = member.astype(np.float32)
    if method in ("half_sampling", "subsampling"):
        m = max(1, n // 2)
        reps = _coverage_of(_subsample_masks(rng, n, m, n_resamples), fmember)
        if method == "half_sampling":
            se = math.sqrt(m / (n - m) * float(np.var(reps, ddof=1)))
            return _normal(method, estimate, se, confidence, n, clip=(0.0, 1.0))
        alpha = (1.0 - confidence) / 2.0
        roots = math.sqrt(m) * (reps - estimate)
        q_low, q_high = np.quantile(roots, [alpha, 1.0 - alpha])
        low, high = estimate - q_high / math.sqrt(n), estimate - q_low / math.sqrt(n)
        low, high = (min(max(float(v), 0.0), 1.0) for v in (low, high))
        return Interval(estimate, low, high, method, confidence, n)
    reps = _coverage_of(_bootstrap_counts(rng, n, n_resamples), fmember)
    jack = _coverage_jackknife(member) if method == "bca" else None
    return _from_replicates(method, estimate, reps, confidence, n, jack, clip=(0.0, 1.0))


# --------------------------------------------------------------------------------------------
# precision (share of generated images inside the real manifold)
# --------------------------------------------------------------------------------------------


def precision_interval(
    membership: object,
    *,
    n_missing: int = 0,
    method: str = "wilson",
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Interval:
    """Interval for precision, the share of generated images inside the real manifold.

    Each scored generated image is inside (some real ball holds it) or not, independently of the
    others given the reference: a binomial proportion over ``n = rows + n_missing`` images, with
    ``k`` inside. When exact duplicate generated rows were removed before scoring
    (``dedupe="keep_one"`` or ``"drop_all"``), pass the rows that were scored: ``n`` is then the
    number of distinct rows, and the interval is for the expected de-duplicated precision at the
    run's size (measured to cover in the bench's worlds with duplicated modes; the rows are
    never re-resampled and re-deduplicated, which would drop resampled copies of distinct images).

    Methods: ``wilson`` (score interval), ``agresti_coull``, ``clopper_pearson`` (exact
    binomial), ``jeffreys`` (equal-tailed Beta(k + 1/2, n - k + 1/2), with the end at 0 when
    ``k = 0`` and at 1 when ``k = n``, Brown, Cai & DasGupta 2001), ``wald`` (normal, for
    comparison) and ``percentile`` (bootstrap of the rows).

    Args:
        membership: boolean ``(n_scored, n_real)`` membership matrix, or a 1-D boolean vector
            ``inside`` with one value per scored generated image.
        n_missing: generated images without a feature; each counts as a miss (outside).
        method: one of :data:`PRECISION_METHODS`.
        confidence: two-sided nominal coverage in (0, 1).
        n_resamples: resamples for ``percentile``.
        seed: seed for ``percentile``.

    Returns:
        An :class:`Interval` (``se`` is the binomial standard error at the estimate for
        ``wilson``, ``agresti_coull`` and ``wald``; ``n_effective = n`` for ``wilson``, whose
        :meth:`Interval.se_at` is the score test's ``sqrt(v (1 - v) / n)``).

    Raises:
        ValueError: ``membership`` neither 1-D nor 2-D boolean, no image at all, a negative
            ``n_missing``, an unknown ``method``, ``confidence`` outside (0, 1).

    Example:
        >>> inside = np.r_[np.ones(30, bool), np.zeros(10, bool)]
        >>> iv = precision_interval(inside)
        >>> iv.estimate, round(iv.low, 4), round(iv.high, 4)
        (0.75, 0.5981, 0.8581)
        >>> precision_interval(inside, n_missing=10).estimate
        0.6
    """
    m = np.asarray(membership)
    if m.ndim == 2:
        inside = _membership(m).any(axis=1)
    elif m.ndim == 1:
        inside = _membership(m[:, None], "membership (1-D inside vector)")[:, 0]
    else:
        raise ValueError(f"`membership` must be (n_scored, n_real) or (n_scored,), but got shape {m.shape}")
    if isinstance(n_missing, bool) or not isinstance(n_missing, (int, np.integer)) or n_missing < 0:
        raise ValueError(f"`n_missing` must be a non-negative integer, but got {n_missing!r}")
    method = _check_method(method, PRECISION_METHODS)
    confidence = _check_confidence(confidence)
    n = int(inside.size + n_missing)
    if n < 1:
        raise ValueError("precision needs at least one generated image, but `membership` has 0 rows and `n_missing` is 0")
    k = int(np.count_nonzero(inside))
    p = k / n
    z = _z(confidence)
    alpha = 1.0 - confidence
    if method == "percentile":
        rng = np.random.default_rng(seed)
        values = np.r_[inside.astype(np.float64), np.zeros(n_missing)]
        counts = _bootstrap_counts(rng, n, _check_resamples(n_resamples))
        reps = counts @ values / n
        return _from_replicates(method, p, reps, confidence, n)
    se = math.sqrt(p * (1.0 - p) / n)
    if method == "wald":
        return _normal(method, p, se, confidence, n, clip=(0.0, 1.0))
    if method == "wilson":
        return _score(method, p, float(n), confidence, n)
    if method == "agresti_coull":
        p_t, se_t = agresti_coull(k, n, confidence)
        low, high = p_t - z * se_t, p_t + z * se_t
    elif method == "clopper_pearson":
        low = float(_special.betaincinv(k, n - k + 1, alpha / 2.0)) if k > 0 else 0.0
        high = float(_special.betaincinv(k + 1, n - k, 1.0 - alpha / 2.0)) if k < n else 1.0
    else:  # jeffreys
        low = float(_special.betaincinv(k + 0.5, n - k + 0.5, alpha / 2.0)) if k > 0 else 0.0
        high = float(_special.betaincinv(k + 0.5, n - k + 0.5, 1.0 - alpha / 2.0)) if k < n else 1.0
    low, high = max(low, 0.0), min(high, 1.0)
    return Interval(p, float(low), float(high), method, confidence, n, se if method == "agresti_coull" else None)


# --------------------------------------------------------------------------------------------
# mean over objects of a low percentile (DIG In's Object Consistency)
# --------------------------------------------------------------------------------------------


def _groups(scores: Mapping[str, object] | Sequence[object], name: str, min_size: int) -> list[np.ndarray]:
    if isinstance(scores, Mapping):
        items = [(str(k), v) for k, v in scores.items()]
    elif isinstance(scores, np.ndarray) and scores.ndim == 2:
        items = [(str(i), row) for i, row in enumerate(scores)]
    elif isinstance(scores, (str, bytes)) or not isinstance(scores, Sequence):
        raise ValueError(f"`{name}` must map group names to 1-D scores (or be a sequence of them), but got {type(scores).__name__}")
    else:
        items = [(str(i), v) for i, v in enumerate(scores)]
    if not items:
        raise ValueError(f"`{name}` holds no group")
    return [_finite_1d(f"{name}[{k!r}]", v, min_size) for k, v in items]


def _position(n: int, q: float) -> tuple[int, float]:
    """numpy's linear percentile of n sorted values: ``(1 - g) x[j] + g x[j + 1]`` (0-indexed)."""
    h = (n - 1) * q / 100.0
    j = min(int(math.floor(h)), n - 1)
    return j, h - j


def _loo_percentile_variance(sorted_x: np.ndarray, q: float) -> np.ndarray:
    """Delete-one jackknife variance of ``np.percentile(., q)`` for sorted rows (..., n), exactly.

    Deleting sorted value ``i`` leaves ``n - 1`` values whose percentile sits at ``j, g`` of
    :func:`_position` (n - 1): it equals ``(1-g) x[j] + g x[j+1]`` when ``i > j + 1``,
    ``(1-g) x[j] + g x[j+2]`` when ``i == j + 1`` and ``(1-g) x[j+1] + g x[j+2]`` when ``i <= j``.
    """
    n = sorted_x.shape[-1]
    j, g = _position(n - 1, q)

    def at(k: int) -> np.ndarray:
        return sorted_x[..., min(k, n - 1)]

    values = np.stack([(1 - g) * at(j) + g * at(j + 1), (1 - g) * at(j) + g * at(j + 2),
                       (1 - g) * at(j + 1) + g * at(j + 2)], axis=-1)
    counts = np.array([n - j - 2, 1, j + 1], dtype=np.float64)
    mean = (values * counts).sum(axis=-1) / n
    return (n - 1) / n * (((values - mean[..., None]) ** 2) * counts).sum(axis=-1)


def percentile_variance(x, percentile: float = 10.0) -> np.ndarray:
    """The variance ``jackknife_t`` gives one group's ``percentile``: the exact delete-one jackknife variance,
    floored at the variance that percentile has for normal scores with the group's sample standard deviation
    (:func:`percentile_mean_interval`). Vectorised over leading axes (groups, simulated runs): ``x`` is
    ``(..., n)``; the standard error of the mean over ``k`` groups is ``sqrt(sum of these) / k``.

    Example:
        >>> x = np.array([0.21, 0.25, 0.26, 0.27, 0.28, 0.30])
        >>> float(percentile_variance(x)) == float(percentile_variance(x[None, None])[0, 0])
        True
    """
    x = np.asarray(x, dtype=np.float64)
    q = float(percentile)
    jack = _loo_percentile_variance(np.sort(x, axis=-1), q)
    return np.maximum(jack, np.var(x, axis=-1, ddof=1) * normal_percentile_variance(x.shape[-1], q))


def _normal_order_statistics(n: int):
    """The grid, the density of the ``r``-th of ``n`` standard normal order statistics (1-indexed) on it, and the
    trapezoid integral over it: what :func:`normal_percentile_variance` and :func:`normal_percentile_mean` read."""
    z = np.linspace(-12.0, 12.0, 48001)
    dz = z[1] - z[0]
    phi = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    with np.errstate(divide="ignore"):
        log_cdf, log_sf = np.log(_special.ndtr(z)), np.log(_special.ndtr(-z))

    def integral(y: np.ndarray) -> float:
        return float(np.sum(y[1:] + y[:-1]) * 0.5 * dz)

    def density(r: int) -> np.ndarray:
        logc = _special.gammaln(n + 1) - _special.gammaln(r) - _special.gammaln(n - r + 1)
        return np.exp(logc + (r - 1) * log_cdf + (n - r) * log_sf) * phi

    return z, density, integral


@functools.lru_cache(maxsize=256)
def normal_percentile_variance(n: int, percentile: float) -> float:
    """Variance of ``np.percentile(z, percentile)`` for ``n`` i.i.d. standard normal values, exactly.

    The statistic is ``(1 - g) Z_(r) + g Z_(r+1)`` (numpy's linear interpolation between order
    statistics); its variance comes from the order statistics' densities and the joint density of
    two adjacent ones, integrated numerically on a fine grid over [-12, 12] (relative error below
    1e-6). Used as the normal-theory floor of :func:`percentile_mean_interval`.

    Args:
        n: sample size, at least 1.
        percentile: in [0, 100].

    Raises:
        ValueError: ``n < 1`` or ``percentile`` outside [0, 100].

    Example:
        >>> round(normal_percentile_variance(2, 50.0), 6)    # the mean of two: 1/2
        0.5
        >>> round(normal_percentile_variance(1, 10.0), 6)
        1.0
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`n` must be a positive integer, but got {n!r}")
    if not 0.0 <= float(percentile) <= 100.0:
        raise ValueError(f"`percentile` must be in [0, 100], but got {percentile!r}")
    j, g = _position(int(n), float(percentile))
    r = j + 1  # 1-indexed order statistic
    n = int(n)
    z, density, integral = _normal_order_statistics(n)
    dz = z[1] - z[0]
    phi = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    with np.errstate(divide="ignore"):
        log_cdf, log_sf = np.log(_special.ndtr(z)), np.log(_special.ndtr(-z))

    f1 = density(r)
    m1 = integral(z * f1)
    v1 = integral(z * z * f1) - m1 * m1
    if g == 0.0 or r + 1 > n:
        return v1
    f2 = density(r + 1)
    m2 = integral(z * f2)
    v2 = integral(z * z * f2) - m2 * m2
    # E[Z_(r) Z_(r+1)] = c * int x phi(x) Phi(x)^(r-1) H(x) dx,  H(x) = int_x^inf y phi(y) S(y)^(n-r-1) dy
    inner = z * phi * np.exp((n - r - 1) * log_sf)
    tail = np.r_[np.cumsum(((inner[1:] + inner[:-1]) * 0.5 * dz)[::-1])[::-1], 0.0]
    logc = _special.gammaln(n + 1) - _special.gammaln(r) - _special.gammaln(n - r)
    cross = integral(np.exp(logc + (r - 1) * log_cdf) * z * phi * tail) - m1 * m2
    return float((1 - g) ** 2 * v1 + g * g * v2 + 2 * g * (1 - g) * cross)


def _silverman(x: np.ndarray) -> float:
    sd = float(np.std(x, ddof=1))
    iqr = float(np.subtract(*np.percentile(x, [75, 25]))) / 1.349
    spread = min(sd, iqr) if iqr > 0 else sd
    return 0.9 * spread * x.size ** (-0.2)


def _loo_values(x: np.ndarray, q: float) -> np.ndarray:
    n = x.size
    keep = ~np.eye(n, dtype=bool)
    return np.percentile(np.broadcast_to(x, (n, n))[keep].reshape(n, n - 1), q, axis=1)


@functools.lru_cache(maxsize=1024)
def normal_percentile_mean(n: int, percentile: float) -> float:
    """Expectation of ``np.percentile(z, percentile)`` for ``n`` i.i.d. standard normal values, exactly (numpy's
    linear interpolation between two order statistics, each order statistic's mean integrated on a fine grid, as
    :func:`normal_percentile_variance` does). A low sample percentile's expectation moves with ``n``: at 10%,
    -0.68 at 3 values, -1.08 at 12, -1.23 at 48, toward -1.2816.

    Example:
        >>> round(normal_percentile_mean(2, 10.0), 4), round(normal_percentile_mean(1, 10.0), 4)   # 0.9 min + 0.1 max
        (-0.4514, 0.0)
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`n` must be a positive integer, but got {n!r}")
    if not 0.0 <= float(percentile) <= 100.0:
        raise ValueError(f"`percentile` must be in [0, 100], but got {percentile!r}")
    n = int(n)
    j, g = _position(n, float(percentile))
    z, density, integral = _normal_order_statistics(n)
    mean = (1.0 - g) * integral(z * density(j + 1))
    if g > 0:
        mean += g * integral(z * density(j + 2))
    return float(mean)


@dataclass(frozen=True)
class PercentileMean(Interval):
    """The mean over groups of each group's sample percentile (DIG In Object Consistency) with what its drift needs:
    each group's size and sample standard deviation. A low sample percentile's expectation moves with the images
    (:func:`normal_percentile_mean`), so a look's estimate is not ``N``'s: :meth:`drift` is the expected move, for
    normal scores with the groups' standard deviations, which ``--t2i-sequential``'s curtailment counts."""

    percentile: float = 10.0
    sizes: tuple[int, ...] = ()
    sds: tuple[float, ...] = ()
    models_drift: ClassVar[bool] = True  # its expectation's move toward N is modelled (:meth:`drift`)
    df_structural: ClassVar[bool] = True  # one degree of freedom per group: the same at N

    def drift(self, fraction: float) -> float:
        """``mean_g sd_g (m(n_g / fraction) - m(n_g))``, ``m`` the normal sample percentile's expectation.

        Example:
            >>> pm = PercentileMean(0.3, 0.2, 0.4, "jackknife_t", 0.95, 24, se=0.02, df=2, sizes=(12, 12), sds=(0.02, 0.03))
            >>> round(pm.drift(0.25), 4)      # 12 -> 48 values a group: the 10th percentile falls by 0.145 sd
            -0.0036
        """
        t = float(fraction)
        if not self.sizes or not 0.0 < t <= 1.0:
            return 0.0
        moves = [sd * (normal_percentile_mean(max(n, int(round(n / t))), self.percentile)
                       - normal_percentile_mean(n, self.percentile)) for n, sd in zip(self.sizes, self.sds)]
        return float(sum(moves) / len(moves))


def percentile_mean_interval(
    scores: Mapping[str, object] | Sequence[object],
    *,
    percentile: float = 10.0,
    method: str = "jackknife_t",
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Interval:
    """Interval for the mean over groups of each group's ``percentile`` (DIG In Object Consistency).

    The statistic is ``mean_o percentile(scores[o], percentile)`` (numpy's linear interpolation,
    as :func:`t2i_fairness.metrics.consistency.object_consistency`); images are the random units
    within each group (object), groups are fixed. At 6-60 images a group the sample 10th
    percentile is a weighted mean of two or three of the lowest scores: the ordinary bootstrap
    piles its replicates on repeats of the minimum (below the estimate, and lumpy), and any
    variance estimate from so few values is noisy.

    Methods: ``jackknife_t`` (the default): per group, the delete-one jackknife variance
    (computed exactly from three order statistics; by the Efron-Stein inequality its expectation
    is at least the variance at ``n - 1``), floored at the variance the same percentile has for
    normal scores with the group's sample standard deviation
    (:func:`normal_percentile_variance`, which catches samples whose lowest scores happen to
    cluster), and a t quantile on one degree of freedom per group (the jackknife variance of a
    percentile is a function of two spacings, so it carries about one to two degrees of freedom
    whatever ``n``). ``jackknife`` (the same variance without floor, normal quantile),
    ``smoothed_se`` (normal interval, standard error from a smoothed bootstrap: Gaussian noise of
    Silverman's bandwidth, shrunk to keep the variance, Silverman 1986 s. 6.4.1),
    ``smoothed_percentile``, ``bootstrap_se``, ``percentile``, ``basic``, ``bca`` and
    ``half_sampling`` (delete-d jackknife, d = n/2) are the measured alternatives.

    Args:
        scores: group name -> 1-D per-image scores (or a sequence of 1-D arrays), at least 2
            finite values per group.
        percentile: in [0, 100].
        method: one of :data:`PERCENTILE_METHODS`.
        confidence: two-sided nominal coverage in (0, 1).
        n_resamples: resamples per group (resampling methods).
        seed: seed of ``numpy.random.default_rng`` (resampling methods).

    Returns:
        An :class:`Interval` with ``n_units`` the total number of images (``df`` = the number of
        groups for ``jackknife_t``).

    Raises:
        ValueError: no group, a group with fewer than 2 values or a non-finite value (named),
            ``percentile`` outside [0, 100], an unknown ``method``, ``confidence`` outside (0, 1).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> scores = {"bag": rng.normal(0.3, 0.02, 12), "stove": rng.normal(0.25, 0.03, 12)}
        >>> iv = percentile_mean_interval(scores)
        >>> round(iv.estimate, 4), iv.low < iv.estimate < iv.high, iv.df, iv.n_units
        (0.2501, True, 2, 24)
    """
    arrays = _groups(scores, "scores", 2)
    if isinstance(percentile, bool) or not isinstance(percentile, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(percentile) <= 100.0:
        raise ValueError(f"`percentile` must be a number in [0, 100], but got {percentile!r}")
    q = float(percentile)
    method = _check_method(method, PERCENTILE_METHODS)
    confidence = _check_confidence(confidence)
    n_resamples = _check_resamples(n_resamples)
    k = len(arrays)
    n_units = int(sum(a.size for a in arrays))
    estimate = math.fsum(float(np.percentile(a, q)) for a in arrays) / k
    if method == "jackknife":
        var = np.array([float(_loo_percentile_variance(np.sort(a), q)) for a in arrays])
        return _normal(method, estimate, math.sqrt(var.sum()) / k, confidence, n_units)
    if method == "jackknife_t":
        var = np.array([float(percentile_variance(a, q)) for a in arrays])
        iv = _normal(method, estimate, math.sqrt(var.sum()) / k, confidence, n_units, df=k)
        return PercentileMean(**{f.name: getattr(iv, f.name) for f in dataclasses.fields(iv)}, percentile=q,
                              sizes=tuple(int(a.size) for a in arrays),
                              sds=tuple(float(np.std(a, ddof=1)) for a in arrays))
    rng = np.random.default_rng(seed)
    if method == "half_sampling":
        var = 0.0
        for a in arrays:
            m = max(1, a.size // 2)
            keys = rng.random((n_resamples, a.size))
            sub = np.take_along_axis(np.broadcast_to(a, keys.shape), np.argsort(keys, axis=1)[:, :m], axis=1)
            var += m / (a.size - m) * float(np.var(np.percentile(sub, q, axis=1), ddof=1))
        return _normal(method, estimate, math.sqrt(var) / k, confidence, n_units)
    smooth = method.startswith("smoothed")
    reps = np.zeros(n_resamples)
    for a in arrays:
        draws = a[rng.integers(0, a.size, size=(n_resamples, a.size))]
        if smooth:
            h = _silverman(a)
            s2 = float(np.var(a, ddof=1))
            if h > 0 and s2 > 0:
                mean = float(a.mean())
                draws = mean + (draws - mean + h * rng.standard_normal(draws.shape)) / math.sqrt(1.0 + h * h / s2)
        reps += np.percentile(draws, q, axis=1)
    reps /= k
    if smooth:
        inner = "bootstrap_se" if method == "smoothed_se" else "percentile"
        iv = _from_replicates(inner, estimate, reps, confidence, n_units)
        return Interval(iv.estimate, iv.low, iv.high, method, confidence, n_units, iv.se, iv.df)
    jack = None
    if method == "bca":
        total = estimate * k
        jack = np.concatenate([(total - float(np.percentile(a, q)) + _loo_values(a, q)) / k for a in arrays])
    return _from_replicates(method, estimate, reps, confidence, n_units, jack)


# --------------------------------------------------------------------------------------------
# cluster (prompt-level) resampling where prompts are sampled
# --------------------------------------------------------------------------------------------


def _cluster_index(clusters: object, n: int) -> tuple[np.ndarray, int]:
    labels = np.asarray(clusters)
    if labels.ndim != 1 or labels.size != n:
        raise ValueError(f"`clusters` must hold one label per value ({n}), but got shape {labels.shape}")
    _, codes = np.unique(labels.astype(str) if labels.dtype.kind == "O" else labels, return_inverse=True)
    return codes.ravel(), int(codes.max()) + 1 if codes.size else 0


def cluster_mean_interval(
    values: object,
    clusters: object,
    *,
    weighting: str = "image",
    method: str = "auto",
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    law_free: bool = True,
) -> Interval:
    """Interval for a mean of per-image values when the prompts (clusters) were sampled.

    The prompts are the independent units: every resample draws prompts with replacement and
    keeps all their images. ``weighting="image"`` estimates the pooled mean
    ``sum(values) / len(values)`` (a ratio of cluster sums when prompts have unequal numbers of
    images); ``"cluster"`` the mean over prompts of each prompt's mean.

    Methods: ``auto`` (the default) is ``wilson`` when every value lies in [0, 1] and ``t``
    otherwise; ``t`` (cluster-robust standard error, ``sqrt(G / (G - 1))`` times the linearised
    ratio variance, with a t quantile on ``G - 1`` degrees of freedom); ``wilson`` for values in
    [0, 1] (Korn & Graubard 1998: Wilson's score interval at the effective sample size
    ``p (1 - p) / se^2`` of that standard error, capped at the number of images when the values
    are 0/1, times ``(z / t_{G-1})^2`` for the few prompts; it stays inside [0, 1] and is skewed
    like a share near 0 or 1; with the same images per prompt it also holds free of the prompts' law,
    :attr:`Interval.bounded`, as the skew of few high-rate prompts breaks it in the far tail); ``percentile``, ``basic``, ``bootstrap_se`` and ``bca`` over prompt
    resamples.

    Args:
        values: 1-D per-image values (finite).
        clusters: one prompt label per value.
        weighting: ``"image"`` or ``"cluster"``.
        method: one of :data:`CLUSTER_METHODS`.
        confidence: two-sided nominal coverage in (0, 1).
        n_resamples: prompt resamples for the bootstrap methods.
        seed: seed of ``numpy.random.default_rng``.
        law_free: for ``wilson`` with the same images per prompt, also hold free of the prompts' law
            (:attr:`Interval.bounded`); ``False`` gives Korn and Graubard's interval alone.

    Returns:
        An :class:`Interval` with ``n_units`` the number of prompts.

    Raises:
        ValueError: non-finite values, labels of the wrong length, fewer than 2 prompts, an
            unknown ``weighting`` or ``method``, ``confidence`` outside (0, 1), values outside
            [0, 1] for ``wilson``.

    Example:
        >>> values = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
        >>> iv = cluster_mean_interval(values, ["a", "a", "b", "b", "c", "c"], method="t")
        >>> round(iv.estimate, 4), iv.df, round(iv.se, 4)
        (0.5, 2, 0.2887)
        >>> iv = cluster_mean_interval(values, ["a", "a", "b", "b", "c", "c"])   # shares: wilson
        >>> iv.method, round(iv.low, 4), round(iv.high, 4)   # 3 prompts: the law-free limits are the wider
        ('wilson', 0.0137, 0.9863)
    """
    y = _finite_1d("values", values)
    codes, g = _cluster_index(clusters, y.size)
    if g < 2:
        raise ValueError(f"cluster intervals need at least 2 clusters (prompts), but got {g}")
    if weighting not in ("image", "cluster"):
        raise ValueError(f"unknown `weighting` {weighting!r}; choose from ['image', 'cluster']")
    method = _check_method(method, CLUSTER_METHODS)
    if method == "auto":
        method = "wilson" if (y.min() >= 0.0 and y.max() <= 1.0) else "t"
    confidence = _check_confidence(confidence)
    sums = np.bincount(codes, weights=y, minlength=g)
    sizes = np.bincount(codes, minlength=g).astype(np.float64)
    if weighting == "cluster":
        sums, sizes = sums / sizes, np.ones(g)
    estimate = float(sums.sum() / sizes.sum())
    if method in ("t", "wilson"):
        resid = sums - estimate * sizes
        se = math.sqrt(g / (g - 1) * float(np.sum(resid**2))) / float(sizes.sum())
        if method == "t":
            return _normal(method, estimate, se, confidence, g, df=g - 1)
        if y.min() < 0.0 or y.max() > 1.0:
            raise ValueError(
                f"method 'wilson' needs values in [0, 1] (shares), but `values` range over [{y.min()!r}, {y.max()!r}]"
            )
        n_eff = share_effective_size(estimate, se, float(y.size), bool(np.isin(y, (0.0, 1.0)).all()))
        # the few-prompts correction (z / t_{G-1})^2 is applied at each level (Interval.trials), not stored
        interval = _score(method, estimate, n_eff, confidence, g, df=g - 1)
        if not law_free or not np.all(sizes == sizes[0]):  # the law-free test is of the mean over prompts: equal weights only
            return interval
        means = sums / sizes
        units = BoundedUnits(g, float(means.mean()), float(means.var(ddof=1)), values=tuple(means.tolist()))
        tail = (1.0 - confidence) / 2.0  # displayed: the wider of Wilson's and the law-free limits
        return dataclasses.replace(interval, bounded=units, low=min(interval.low, units.limit(tail, "low")),
                                   high=max(interval.high, units.limit(tail, "high")))
    rng = np.random.default_rng(seed)
    w = _bootstrap_counts(rng, g, _check_resamples(n_resamples)).astype(np.float64)
    reps = (w @ sums) / (w @ sizes)
    jack = None
    if method == "bca":
        jack = (sums.sum() - sums) / (sizes.sum() - sizes)
    return _from_replicates(method, estimate, reps, confidence, g, jack)


def share_effective_size(estimate, se, n_images, binary):
    """Korn and Graubard's effective size of a share of ``n_images`` images with standard error ``se``:
    ``estimate (1 - estimate) / se^2`` (``n_images`` where ``se`` is 0), capped at ``n_images`` when every
    value is 0 or 1 (the Bernoulli variance is the largest possible), at least 1 (:func:`cluster_mean_interval`).
    Floats give a float (the interval's own arithmetic); arrays (simulated runs) broadcast.

    Example:
        >>> share_effective_size(0.5, 0.0625, 60.0, False), share_effective_size(0.5, 0.0625, 60.0, True)
        (64.0, 60.0)
        >>> share_effective_size(np.array([0.5, 0.5]), np.array([0.0625, 0.0]), 60.0, False).tolist()
        [64.0, 60.0]
    """
    if all(np.ndim(v) == 0 for v in (estimate, se, n_images, binary)):
        n_eff = n_images if se == 0 else estimate * (1.0 - estimate) / se**2
        if binary:
            n_eff = min(n_eff, n_images)
        return max(n_eff, 1.0)
    est, se = np.asarray(estimate, dtype=np.float64), np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(se == 0, n_images, est * (1.0 - est) / se**2)
    return np.maximum(np.where(binary, np.minimum(n_eff, n_images), n_eff), 1.0)


def cluster_share_runs(sums, images: int, binary, *, multiplicity=None) -> dict[str, np.ndarray]:
    """:func:`cluster_mean_interval`'s ``wilson`` statistics of many runs at once (a bench simulating the gate):
    each run has ``prompts`` clusters of ``images`` values in [0, 1] with per-cluster sums ``sums`` (last axis:
    the clusters); with ``multiplicity``, ``sums`` lists distinct cluster sums and ``multiplicity`` how many of
    a run's clusters have each. ``binary``: every value of the run is 0 or 1.

    Returns the estimate, its cluster-robust standard error, the effective size
    (:func:`share_effective_size`), the degrees of freedom ``G - 1`` and the prompts' shares' count, mean and
    sample variance (:class:`BoundedUnits`): each run's :func:`share_limits` and :func:`bounded_mean_limit`
    (the wider of the two) are its interval's :meth:`Interval.limit`.

    Example:
        >>> iv = cluster_mean_interval([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], ["a", "a", "b", "b", "c", "c"])
        >>> runs = cluster_share_runs(np.array([[1.0, 0.0, 2.0]]), 2, True)
        >>> bool(runs["estimate"][0] == iv.estimate), bool(runs["n_effective"][0] == iv.n_effective)
        (True, True)
    """
    sums = np.asarray(sums, dtype=np.float64)
    if multiplicity is None:
        m = np.ones(sums.shape)
    else:
        m = np.asarray(multiplicity, dtype=np.float64)
        sums = np.broadcast_to(sums, m.shape)
    g = m.sum(axis=-1)
    n_img = g * images
    est = (m * sums).sum(axis=-1) / n_img
    rss = (m * (sums - est[..., None] * images) ** 2).sum(axis=-1)
    se = np.sqrt(g / (g - 1) * rss) / n_img
    shares = sums / images
    mean = (m * shares).sum(axis=-1) / g
    var = (m * (shares - mean[..., None]) ** 2).sum(axis=-1) / (g - 1)
    return {"estimate": est, "se": se, "n_effective": share_effective_size(est, se, n_img, binary),
            "df": g - 1, "units": g, "mean": mean, "var": var}


def cluster_bootstrap_interval(
    statistic: Callable[[np.ndarray], float],
    clusters: object,
    *,
    method: str = "t",
    confidence: float = 0.95,
    n_resamples: int = 200,
    seed: int = 0,
) -> Interval:
    """Interval for any statistic of images grouped by sampled prompts (resample prompts).

    ``statistic(indices)`` receives an int array of image indices (a resample repeats all the
    images of a prompt drawn twice) and returns a number; ``statistic(arange(n))`` is the
    estimate. Methods: ``t`` (delete-one-prompt jackknife standard error, t quantile on
    ``G - 1`` degrees of freedom: G + 1 calls), ``percentile``, ``basic``, ``bootstrap_se``,
    ``bca`` (``n_resamples`` + G + 1 calls for ``bca``).

    Args:
        statistic: maps image indices to a float.
        clusters: one prompt label per image.
        method: one of :data:`CLUSTER_STATISTIC_METHODS`.
        confidence: two-sided nominal coverage in (0, 1).
        n_resamples: prompt resamples for the bootstrap methods.
        seed: seed of ``numpy.random.default_rng``.
        law_free: for ``wilson`` with the same images per prompt, also hold free of the prompts' law
            (:attr:`Interval.bounded`); ``False`` gives Korn and Graubard's interval alone.

    Returns:
        An :class:`Interval` with ``n_units`` the number of prompts.

    Raises:
        ValueError: fewer than 2 prompts, an unknown ``method``, ``confidence`` outside (0, 1),
            or a non-finite statistic on the full sample.

    Example:
        >>> y = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
        >>> iv = cluster_bootstrap_interval(lambda idx: y[idx].mean(), ["a", "a", "b", "b", "c", "c"])
        >>> round(iv.estimate, 4), round(iv.se, 4), iv.df
        (0.5, 0.2887, 2)
    """
    labels = np.asarray(clusters)
    codes, g = _cluster_index(labels, labels.size)
    if g < 2:
        raise ValueError(f"cluster intervals need at least 2 clusters (prompts), but got {g}")
    method = _check_method(method, CLUSTER_STATISTIC_METHODS)
    confidence = _check_confidence(confidence)
    order = np.argsort(codes, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(codes, minlength=g))[:-1])
    estimate = float(statistic(np.arange(codes.size)))
    if not math.isfinite(estimate):
        raise ValueError(f"`statistic` is not finite on the full sample: {estimate!r}")
    jack = None
    if method in ("t", "bca"):
        jack = np.array([float(statistic(np.concatenate(members[:c] + members[c + 1 :]))) for c in range(g)])
    if method == "t":
        se = math.sqrt((g - 1) / g * float(np.sum((jack - jack.mean()) ** 2)))
        return _normal(method, estimate, se, confidence, g, df=g - 1)
    rng = np.random.default_rng(seed)
    n_resamples = _check_resamples(n_resamples)
    draws = rng.integers(0, g, size=(n_resamples, g))
    reps = np.array([float(statistic(np.concatenate([members[c] for c in row]))) for row in draws])
    return _from_replicates(method, estimate, reps, confidence, g, jack)


# --------------------------------------------------------------------------------------------
# stratified means of bounded per-image scores (fixed prompts, images within)
# --------------------------------------------------------------------------------------------


def stratified_mean_interval(
    values: object,
    strata: object | None = None,
    *,
    weighting: str = "stratum",
    method: str = "t",
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Interval:
    """Interval for a mean of per-image scores over fixed prompts, images resampled within each.

    The prompts (strata) are fixed by the suite; the images of each are the random units.
    ``weighting="stratum"`` estimates the mean over prompts of each prompt's mean;
    ``"image"`` the pooled mean (prompt weights ``n_s / N``, fixed).

    Methods: ``t`` (stratified standard error ``sqrt(sum_s w_s^2 s_s^2 / n_s)`` with
    Welch-Satterthwaite degrees of freedom); ``percentile``, ``basic`` and ``bootstrap_se`` of the
    stratified bootstrap.

    Args:
        values: 1-D per-image scores (finite).
        strata: one prompt label per value; ``None`` means one stratum.
        weighting: ``"stratum"`` or ``"image"``.
        method: one of :data:`STRATIFIED_METHODS`.
        confidence: two-sided nominal coverage in (0, 1).
        n_resamples: resamples for the bootstrap methods.
        seed: seed of ``numpy.random.default_rng``.

    Returns:
        An :class:`Interval` with ``n_units`` the number of images.

    Raises:
        ValueError: non-finite values, labels of the wrong length, a stratum with fewer than 2
            images (named), an unknown ``weighting`` or ``method``, ``confidence`` outside (0, 1).

    Example:
        >>> iv = stratified_mean_interval([0.2, 0.4, 0.6, 0.8], ["p", "p", "q", "q"])
        >>> round(iv.estimate, 4), round(iv.se, 4), iv.df
        (0.5, 0.0707, 2.0)
    """
    y = _finite_1d("values", values, 2)
    if strata is None:
        codes, s_count, names = np.zeros(y.size, dtype=np.int64), 1, np.array(["all"])
    else:
        labels = np.asarray(strata)
        if labels.ndim != 1 or labels.size != y.size:
            raise ValueError(f"`strata` must hold one label per value ({y.size}), but got shape {labels.shape}")
        names, codes = np.unique(labels.astype(str), return_inverse=True)
        codes = codes.ravel()
        s_count = names.size
    if weighting not in ("stratum", "image"):
        raise ValueError(f"unknown `weighting` {weighting!r}; choose from ['stratum', 'image']")
    method = _check_method(method, STRATIFIED_METHODS)
    confidence = _check_confidence(confidence)
    sizes = np.bincount(codes, minlength=s_count)
    small = np.flatnonzero(sizes < 2)
    if small.size:
        raise ValueError(f"stratum {str(names[small[0]])!r} has {int(sizes[small[0]])} value(s); every stratum needs at least 2")
    means = np.bincount(codes, weights=y, minlength=s_count) / sizes
    weights = np.full(s_count, 1.0 / s_count) if weighting == "stratum" else sizes / sizes.sum()
    estimate = float(weights @ means)
    if method == "t":
        var_s = np.bincount(codes, weights=(y - means[codes]) ** 2, minlength=s_count) / (sizes - 1)
        a = weights**2 * var_s / sizes
        total = float(a.sum())
        denom = float(np.sum(a**2 / (sizes - 1)))
        df = total**2 / denom if denom > 0 else math.inf
        return _normal(method, estimate, math.sqrt(total), confidence, int(y.size), df=df)
    rng = np.random.default_rng(seed)
    n_resamples = _check_resamples(n_resamples)
    reps = np.zeros(n_resamples)
    for s in range(s_count):
        ys = y[codes == s]
        reps += weights[s] * ys[rng.integers(0, ys.size, size=(n_resamples, ys.size))].mean(axis=1)
    return _from_replicates(method, estimate, reps, confidence, int(y.size))
