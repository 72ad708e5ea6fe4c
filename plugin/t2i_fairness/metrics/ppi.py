"""Prediction-powered inference on a mean: a few human labels and many scorer judgements, one interval.

The estimand is the mean of the true labels ``Y`` in [0, 1]; the scorer's judgement ``f`` of every unit is known,
its truth only for a labelled sample. PPI++ (Angelopoulos, Duchi and Zrnic 2023, arXiv 2311.01453; PPI:
Angelopoulos et al. 2023, arXiv 2301.09633) writes ``theta = lam E[f] + E[Y - lam f]``: the first term from the
unlabelled judgements, the second (the rectifier) from the labels, ``lam`` tuned to the smallest variance
(``lam = 0``: the labels alone; ``lam = 1``: classic PPI). Two forms of one-sided limit:

- ``normal``: ``estimate -+ z se`` with ``se^2 = lam^2 Var(f) / N + Var(Y - lam f) / n`` (ppi_python's
  ``ppi_mean_ci``);
- ``betting``: free of the law, a union of two betting limits (Waudby-Smith and Ramdas 2023) at ``alpha / 2`` each:
  ``E[f]`` from the unlabelled values, ``E[Y - lam f]`` from the rectified values mapped into [0, 1] by
  ``(r + lam) / (1 + lam)``;
- ``exact`` (0/1 labels and judgements, the gates' form): the tighter of two limits at ``alpha / 2`` each, the labels
  alone (Clopper-Pearson) and classic PPI, ``E[Y] = E[f] + P(Y=1, f=0) - P(Y=0, f=1)``, its scorer term a betting
  limit at ``alpha / 4`` and its error term Clopper-Pearson's at ``alpha / 4`` (the betting rectifier, whose values
  are mostly one point, is limited by its range at a run's level; an error rate is a share with an exact limit).

The tails at a run's per-gate level are where the normal form's coverage falls short (``bench/bench_audit.py``
measures every form).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _special

from t2i_fairness.metrics.intervals import Interval
from t2i_fairness.metrics.intervals.lawfree import betting_limit
from t2i_fairness.metrics.intervals.tails import _check_alpha, invert_limit

__all__ = ["FORMS", "PredictionPowered", "PredictionPoweredSum", "labels_for_width", "power_tuning", "ppi_estimate",
           "ppi_limit", "prediction_powered", "prediction_powered_sum"]

FORMS = ("exact", "betting", "normal")
ORDER_SEED = 20230117  # the betting form's order of the units (any order fixed before the values are seen)


def _arrays(y, f_labelled, f_unlabelled) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, fl, fu = (np.asarray(v, dtype=np.float64).ravel() for v in (y, f_labelled, f_unlabelled))
    if y.size == 0 or y.size != fl.size:
        raise ValueError(f"`y` and `f_labelled` must be non-empty and of one length, but got {y.size} and {fl.size}")
    if fu.size == 0:
        raise ValueError("`f_unlabelled` must hold at least one judgement")
    for name, v in (("y", y), ("f_labelled", fl), ("f_unlabelled", fu)):
        if not np.all((v >= 0.0) & (v <= 1.0)):
            raise ValueError(f"`{name}` must hold values in [0, 1]")
    return y, fl, fu


def power_tuning(y, f_labelled, f_unlabelled, *, means: bool = False) -> float:
    """PPI++'s ``lam`` for a mean, clipped to [0, 1]: the one that minimises the normal form's variance.

    Units of one kind (``means=False``): as ppi_python's ``_calc_lam_glm`` computes it, the covariance of ``Y`` and
    ``f`` on the labels over ``(1 + n / N)`` times the variance of ``f`` over every judgement. ``means=True``: the
    unlabelled values are the means of ``N`` clusters (prompts), whose variance is not a unit's:
    ``Cov(Y, f) / (Var(f) + (n / N) Var(f_cluster))``, each variance on its own units.

    Example:
        >>> round(power_tuning([1, 0, 1, 1], [1, 0, 1, 0], [1, 0, 1, 0, 1, 1, 0, 0]), 4)
        0.3056
    """
    y, fl, fu = _arrays(y, f_labelled, f_unlabelled)
    n, big_n = y.size, fu.size
    cov = float(np.mean((y - y.mean()) * (fl - fl.mean())))
    if means:
        var = (float(fl.var(ddof=1)) if n > 1 else 0.0) + (n / big_n) * (float(fu.var(ddof=1)) if big_n > 1 else 0.0)
    else:
        pooled = np.concatenate([fl, fu])
        var = (1.0 + n / big_n) * (float(pooled.var(ddof=1)) if pooled.size > 1 else 0.0)
    if not var > 0:
        return 0.0
    return float(min(1.0, max(0.0, cov / var)))


def ppi_estimate(y, f_labelled, f_unlabelled, lam: float | None = None) -> tuple[float, float, float]:
    """``(estimate, se, lam)``: ``lam mean(f_unlabelled) + mean(Y - lam f_labelled)`` and its normal standard error.

    Example:
        >>> [round(v, 4) for v in ppi_estimate([1, 0, 1, 1], [1, 0, 1, 0], [1, 0, 1, 0, 1, 1, 0, 0], lam=1.0)]
        [0.75, 0.2795, 1.0]
    """
    y, fl, fu = _arrays(y, f_labelled, f_unlabelled)
    lam = power_tuning(y, fl, fu) if lam is None else float(lam)
    rect = y - lam * fl
    estimate = lam * float(fu.mean()) + float(rect.mean())
    se = math.sqrt((lam * lam * float(fu.var()) / fu.size) + float(rect.var()) / y.size)
    return estimate, se, lam


def ppi_limit(y, f_labelled, f_unlabelled, alpha: float, side: str, *, lam: float | None = None,
              form: str = "betting") -> float:
    """The one-sided limit of the mean of ``Y`` at level ``alpha`` (``side`` ``"low"`` or ``"high"``), in [0, 1].

    Args:
        y, f_labelled: the labels of the labelled units and the scorer's judgements of the same units, in [0, 1].
        f_unlabelled: the scorer's judgements of the other units (independent of the labelled ones).
        lam: the power-tuning weight (default :func:`power_tuning`).
        form: ``"exact"`` (0/1 values), ``"betting"`` (law-free, see the module) or ``"normal"``.

    Raises:
        ValueError: arrays of other lengths or outside [0, 1], an unknown ``form`` or ``side``.

    Example:
        >>> y = np.r_[np.ones(80), np.zeros(20)]; f = y.copy(); f[:5] = 0            # 100 labels, the scorer misses 5
        >>> fu = np.r_[np.ones(7_600), np.zeros(2_400)]
        >>> round(ppi_limit(y, f, fu, 0.025, "low", form="normal"), 3), round(ppi_limit(y, f, fu, 0.025, "low"), 3)
        (0.768, 0.709)
    """
    alpha = _check_alpha(alpha)
    if side not in ("low", "high"):
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    if form not in FORMS:
        raise ValueError(f"`form` must be one of {FORMS}, but got {form!r}")
    y, fl, fu = _arrays(y, f_labelled, f_unlabelled)
    if form == "exact":
        return _exact_limit(y, fl, fu, alpha, side)
    lam = power_tuning(y, fl, fu) if lam is None else float(lam)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"`lam` must lie in [0, 1], but got {lam}")
    if form == "normal":
        estimate, se, _ = ppi_estimate(y, fl, fu, lam)
        q = float(-_special.ndtri(alpha))
        return float(min(1.0, max(0.0, estimate - q * se if side == "low" else estimate + q * se)))
    rect = (y - lam * fl + lam) / (1.0 + lam)  # in [0, 1]
    # the bets are predictable in the order given: a seeded order, independent of the values (a sorted one is not)
    rect, fu = (v[np.random.default_rng(ORDER_SEED).permutation(v.size)] for v in (rect, fu))
    if lam == 0.0:
        return betting_limit(rect, alpha, side)
    imputed = lam * betting_limit(fu, alpha / 2.0, side)
    rectifier = betting_limit(rect, alpha / 2.0, side) * (1.0 + lam) - lam
    return float(min(1.0, max(0.0, imputed + rectifier)))


def _exact_limit(y, fl, fu, alpha: float, side: str) -> float:
    from t2i_fairness.metrics.intervals.tails import share_limit

    if not (np.all((y == 0) | (y == 1)) and np.all((fl == 0) | (fl == 1))):
        raise ValueError("the exact form needs 0/1 labels and judgements; use form='betting'")
    n = y.size
    alone = float(share_limit(float(y.sum()), n, alpha / 2.0, side))
    fu = fu[np.random.default_rng(ORDER_SEED).permutation(fu.size)]
    scorer = betting_limit(fu, alpha / 4.0, side)
    if side == "high":  # the scorer's misses add to its share at most this much
        return float(min(1.0, alone, scorer + float(share_limit(float(np.sum(y * (1 - fl))), n, alpha / 4.0, "high"))))
    return float(max(0.0, alone, scorer - float(share_limit(float(np.sum((1 - y) * fl)), n, alpha / 4.0, "high"))))


def labels_for_width(width: float, confidence: float = 0.95) -> int:
    """Labels per group that make the labels-only interval of a share at most ``width`` wide at ``confidence``
    (worst case ``p = 1/2``): ``ceil((z / width)^2)``, ``z`` the two-sided quantile; PPI's is never wider (PPI++).

    Example:
        >>> labels_for_width(0.1), labels_for_width(0.2, 0.9)
        (385, 68)
    """
    if not 0.0 < float(width) <= 1.0:
        raise ValueError(f"`width` must lie in (0, 1], but got {width}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must lie in (0, 1), but got {confidence}")
    z = float(-_special.ndtri((1.0 - confidence) / 2.0))
    return int(math.ceil((z / float(width)) ** 2 - 1e-9))


@dataclass(frozen=True)
class _FromLimits(Interval):
    """Evidence whose test is its one-sided limits (``limit``, at any level): the p-value inverts them, the power
    is the normal approximation of the distance to them over :meth:`~Interval.se_at`."""

    def p_value(self, bound: float, direction: str) -> float:
        if direction not in ("min", "max"):
            raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
        return invert_limit(self.limit, float(bound), direction)

    @property
    def is_share(self) -> bool:
        return False

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        se = self.se_at(bound)
        if not se or not se > 0:
            return 0.0
        half = abs(self.estimate - self.limit(alpha, "low" if direction == "min" else "high"))
        return float(_special.ndtr((float(effect) - half) / se))

    def critical_distance(self, bound: float, alpha: float, df: float | None = None) -> float:
        return abs(self.estimate - self.limit(alpha, "low"))

    def scaled(self, factor: float):
        return dataclasses.replace(self, se=None if self.se is None else self.se / math.sqrt(float(factor)))


@dataclass(frozen=True)
class PredictionPowered(_FromLimits):
    """A gate's evidence from a prediction-powered mean: its limits and p-value at any level come from
    :func:`ppi_limit` on the labelled and unlabelled units it holds (``form``: betting or normal)."""

    labels: tuple = ()  # Y of the labelled units
    judged: tuple = ()  # f of the labelled units
    unlabelled: tuple = ()  # f of the other units
    lam: float = 1.0
    form: str = "exact"

    @property
    def basis(self) -> str:
        return "normal-theory" if self.form == "normal" else "law-free"

    def limit(self, alpha: float, side: str) -> float:
        return ppi_limit(self.labels, self.judged, self.unlabelled, alpha, side, lam=self.lam, form=self.form)

    def se_at(self, value: float) -> float | None:
        """The normal form's standard error; where every label and judgement agree (``se`` 0), a share's at
        ``value`` over the labels (at 1/2 for 0 or 1): the labels leave uncertainty even then."""
        if self.se:
            return self.se
        v = min(max(float(value), 0.0), 1.0)
        v = 0.5 if v in (0.0, 1.0) else v
        return math.sqrt(v * (1.0 - v) / max(1, len(self.labels)))

    def record(self) -> dict:
        return {**super().record(), "labels": len(self.labels), "judgements": len(self.labels) + len(self.unlabelled),
                "lam": self.lam, "form": self.form}


def prediction_powered(y, f_labelled, f_unlabelled, *, confidence: float = 0.95, form: str = "exact",
                       lam: float | None = None, means: bool = False) -> PredictionPowered:
    """The :class:`PredictionPowered` evidence of the mean of ``Y``, its displayed interval at ``confidence``
    (``lam`` default :func:`power_tuning`, ``means``: the unlabelled values are cluster means).

    Example:
        >>> y = np.r_[np.ones(80), np.zeros(20)]; f = y.copy(); f[:5] = 0
        >>> iv = prediction_powered(y, f, np.r_[np.ones(7_600), np.zeros(2_400)])
        >>> round(iv.estimate, 3), iv.low < iv.estimate < iv.high, iv.p_value(0.95, "min") < 0.01
        (0.808, True, True)
    """
    y, fl, fu = _arrays(y, f_labelled, f_unlabelled)
    estimate, se, lam = ppi_estimate(y, fl, fu, power_tuning(y, fl, fu, means=means) if lam is None else lam)
    half = (1.0 - float(confidence)) / 2.0
    ev = PredictionPowered(estimate, 0.0, 1.0, f"prediction-powered ({form}, PPI++)", float(confidence),
                           int(y.size + fu.size), se=se, labels=tuple(y.tolist()), judged=tuple(fl.tolist()),
                           unlabelled=tuple(fu.tolist()), lam=lam, form=form)
    return dataclasses.replace(ev, low=ev.limit(half, "low"), high=ev.limit(half, "high"))


@dataclass(frozen=True)
class PredictionPoweredSum(_FromLimits):
    """``sum_j w_j theta_j`` of independent prediction-powered means (the strata of one gate), or with ``absolute``
    its distance ``|sum - centre|`` (word-level influence, the gap to parity).

    A one-sided limit at ``alpha`` adds each term's limit at ``alpha / J`` (toward the side its weight points): a union
    bound, valid for any law as each term is. A distance's limits give each side of the sum ``alpha / 2``: it is
    too far from ``centre`` only where the sum is too high or too low.
    """

    terms: tuple = ()  # PredictionPowered
    weights: tuple = ()
    centre: float = 0.0
    absolute: bool = False

    @property
    def basis(self) -> str:
        from t2i_fairness.metrics.intervals import BASES

        return max((t.basis for t in self.terms), key=BASES.index)

    def _sum_limit(self, alpha: float, side: str) -> float:
        other = {"low": "high", "high": "low"}[side]
        a = alpha / len(self.terms)
        return float(sum(w * t.limit(a, side if w >= 0 else other) for w, t in zip(self.weights, self.terms)))

    def limit(self, alpha: float, side: str) -> float:
        if not self.absolute:
            return self._sum_limit(alpha, side)
        lo = self._sum_limit(alpha / 2.0, "low") - self.centre
        hi = self._sum_limit(alpha / 2.0, "high") - self.centre
        if side == "high":
            return float(max(hi, -lo))
        return float(lo if lo > 0 else -hi if hi < 0 else 0.0)

    def se_at(self, value: float) -> float | None:
        """The normal form's standard error, or where it is 0 each term's at 1/2 (see :meth:`PredictionPowered.se_at`)."""
        if self.se:
            return self.se
        return math.sqrt(sum((w * t.se_at(0.5)) ** 2 for w, t in zip(self.weights, self.terms)))

    def record(self) -> dict:
        return {**super().record(), "weights": list(self.weights), "centre": self.centre, "absolute": self.absolute,
                "labels": sum(len(t.labels) for t in self.terms),
                "judgements": sum(len(t.labels) + len(t.unlabelled) for t in self.terms)}


def prediction_powered_sum(terms, weights, *, centre: float = 0.0, absolute: bool = False,
                           confidence: float = 0.95) -> PredictionPoweredSum:
    """The :class:`PredictionPoweredSum` of ``terms`` (:class:`PredictionPowered`, one per stratum) with ``weights``.

    Example:
        >>> y = np.r_[np.ones(30), np.zeros(30)]; f = y.copy(); f[:3] = 0         # a stratum of 60 labels
        >>> a = prediction_powered(y, f, np.r_[np.ones(300), np.zeros(300)])
        >>> b = prediction_powered(y[::-1], f[::-1], np.r_[np.zeros(300), np.ones(300)])
        >>> d = prediction_powered_sum([a, b], [1.0, -1.0], absolute=True)
        >>> round(d.estimate, 3), d.low == 0.0, d.p_value(0.5, "max") > 0.5
        (0.0, True, True)
    """
    terms, weights = tuple(terms), tuple(float(w) for w in weights)
    if not terms or len(terms) != len(weights):
        raise ValueError(f"`terms` and `weights` must be non-empty and of one length, but got {len(terms)} and "
                         f"{len(weights)}")
    total = float(sum(w * t.estimate for w, t in zip(weights, terms)))
    se = math.sqrt(sum((w * (t.se or 0.0)) ** 2 for w, t in zip(weights, terms)))
    ev = PredictionPoweredSum(abs(total - centre) if absolute else total, 0.0, 0.0,
                              f"prediction-powered sum of {len(terms)} strata (union bound)", float(confidence),
                              int(sum(t.n_units for t in terms)), se=se, terms=terms, weights=weights,
                              centre=float(centre), absolute=bool(absolute))
    half = (1.0 - float(confidence)) / 2.0
    return dataclasses.replace(ev, low=ev.limit(half, "low"), high=ev.limit(half, "high"))
