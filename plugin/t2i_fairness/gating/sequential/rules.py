"""The stopping rules of a sequential gate: :func:`decide_look` decides one gate at one planned look.

A look may fail a gate whose estimand does not move with the sample when its p-value is at most the alpha the
O'Brien-Fleming shape spends there; pass it by futility when its one-sided limit clears the bound less the largest
miss the fixed-N test at ``N`` would almost never catch (or a team's indifference margin, where it chose one); or
pass it by curtailment when the fixed-N test's conditional power, at the largest miss the look's limit leaves
possible, is below :data:`CURTAIL_GAMMA`. The last look is the fixed-N test at the spent level
(:class:`SequentialEvidence`). Why these rules keep each gate's level and its power: ``docs/sequential.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from t2i_fairness.gating.indicator import KINDS
from t2i_fairness.gating.power import MEANINGFUL_MISS
from t2i_fairness.gating.sequential.look import Reason
from t2i_fairness.gating.sequential.plan import FUTILITY_BETA
from t2i_fairness.gating.sequential.stopping import conditional_power, fails_possible, futility
from t2i_fairness.metrics.intervals import P_FLOOR, Interval

__all__ = ["CURTAIL_GAMMA", "FUTILITY_BETA", "FUTILITY_MISS", "LookDecision", "REASONS", "SequentialEvidence",
           "declare_futility_miss", "decide_look"]

#: the futility effect of a kind without a bound (a family's test, no meaningful miss), as its family declares it
#: (``Family.futility_miss``); a gate with a bound has a futility margin per look (:func:`stopping.futility`)
FUTILITY_MISS: dict[str, float] = {}
#: a gate passes early when the fixed-N test's chance of failing it at ``N``, given the look, were it to miss by as
#: much as the look's limit leaves possible, is below this (stochastic curtailment): the power it costs is at most this
CURTAIL_GAMMA = 0.005
#: why a gate stopped (a :class:`LookDecision`'s reason), as every report words it
REASONS = {"fail": Reason.FAIL, "futility": Reason.FUTILITY, "curtail": Reason.CURTAIL, "final": Reason.FINAL,
           "open": Reason.OPEN}


def declare_futility_miss(misses: Mapping[str, float], owner: str = "") -> None:
    """Add the futility miss a family declares for a kind of its own (``Family.futility_miss``); a kind given
    another value already raises ``ValueError``.
    """
    for kind, miss in misses.items():
        if kind not in KINDS:
            raise ValueError(f"{owner}: unknown indicator kind {kind!r}; one of {sorted(KINDS)}")
        if FUTILITY_MISS.get(kind, miss) != miss:
            raise ValueError(f"{owner}: kind {kind!r} already has the futility miss {FUTILITY_MISS[kind]!r}, not {miss!r}")
        FUTILITY_MISS[kind] = float(miss)


@dataclass(frozen=True)
class LookDecision:
    """One gate at one look: ``reason`` (``fail``, ``futility``, ``curtail``, ``open`` or ``final``), its p-value
    and the alpha it may spend (``level``), ``p_sequential`` (``min_j p_j / s_j``: the gate's p-value for Holm), and
    the futility or curtailment rule's figures where one was read (``futility_basis``: ``"at N"``, the margin is
    the largest miss the test at ``N`` would almost never catch; ``"indifference"``, a team's margin; ``"effect"``, a
    family test's declared effect).
    """

    reason: str
    p: float | None
    level: float
    p_sequential: float | None
    futility_limit: float | None = None
    futility_miss: float | None = None
    conditional_power: float | None = None
    curtail_miss: float | None = None
    futility_basis: str | None = None

    @property
    def stopped(self) -> bool:
        return self.reason in ("fail", "futility", "curtail")


def decide_look(indicator, bound: float, direction: str, *, level: float, share: float, beta: float | None,
                prior: float | None = None, final: bool = False, fraction: float | None = None,
                units_grow: bool = True, indifference: float | None = None) -> LookDecision:
    """Decide one gate at one look.

    Args:
        indicator: the gate's :class:`~t2i_fairness.gating.indicator.Indicator` at this look.
        bound, direction: its bound.
        level: the gate's level ``a`` (``alpha / m``); ``share``: this look's spending share ``s_k``.
        beta: this look's futility level (``None`` at ``N``); ``prior``: ``p_sequential`` of the earlier looks.
        final: the last look (the fixed-N test at the spent level decides).
        fraction: this look's size over ``N`` (``None``: no curtailment).
        units_grow: the looks add the units a test's floor counts (prompts drawn), not images per prompt.
        indifference: a team's indifference margin for this gate (``None``: the default, fixed-N equivalent).

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.gating.indicator import Indicator
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> def share(k, n): return precision_interval(np.r_[np.ones(k, bool), np.zeros(n - k, bool)])
        >>> lk = lambda k, n: decide_look(Indicator(k / n, n, "share", share(k, n)), 0.8, "min", level=1e-4,
        ...                               share=0.01, beta=0.002, fraction=0.25)     # a look at 400 of 1,600 images
        >>> lk(340, 400).reason, lk(200, 400).reason, lk(310, 400).reason    # above, far below, just below
        ('futility', 'fail', 'open')
        >>> d = lk(340, 400)    # its limit leaves a miss of 0.0077 possible; N fails a miss of 0.0118 <= 0.5% of the time
        >>> round(d.futility_limit, 4), round(d.futility_miss, 4), d.futility_basis
        (0.7923, 0.0118, 'at N')
    """
    ev = indicator.evidence
    if indicator.undefined is not None or indicator.skip is not None or not math.isfinite(indicator.value):
        # never stopped here: a value the look leaves undefined (a ratio whose denominator fell to 0 or below on its
        # images) may be defined at N, where the fixed-N test decides it; stopping would give another verdict
        return LookDecision("final" if final else "open", None, level * share, prior)
    p = None
    if indicator.test is not None:
        p = float(indicator.test.p_value)
    elif ev is not None and hasattr(ev, "p_value"):
        try:
            p = float(ev.p_value(bound, direction))
        except ValueError:
            p = None
    p_seq = prior
    # an early look's p-value joins the sequential p-value only where the gate may fail early: where the estimand
    # moves with the sample (coverage grows with n) a look's p tests another hypothesis than the gate's at N
    if p is not None and share > 0 and (final or indicator.early_fail):
        p_seq = min(1.0, p / share) if prior is None else min(prior, 1.0, p / share)
        p_seq = max(p_seq, P_FLOOR)
    spent = level * share
    if final:
        return LookDecision("final", p, spent, p_seq)
    misses = (indicator.value < bound) if direction == "min" else (indicator.value > bound)
    if indicator.test is not None:
        misses = True  # a test gate has no bound: its H0 is rejected or not
    if indicator.early_fail and misses and p is not None and p <= spent:
        return LookDecision("fail", p, spent, p_seq)
    if beta and "futility" in KINDS[indicator.kind] and ev is not None and hasattr(ev, "limit"):
        effect = FUTILITY_MISS.get(indicator.kind)
        if effect is not None:  # a family's test: futility against the effect it declares
            d = _effect_futility(ev, bound, direction, beta, effect, p, spent, p_seq)
            return d if d.stopped else _curtail(indicator, bound, direction, level, fraction, beta, units_grow, d)
        cannot_fail = fraction is not None and 0.0 < fraction < 1.0 and isinstance(ev, Interval) and \
            not fails_possible(ev, bound, direction, level, fraction, units_grow)
        if isinstance(ev, Interval) and not cannot_fail:  # (a gate no outcome at N can fail: curtailed, said so)
            try:
                f = futility(ev, bound, direction, beta, level, fraction, units_grow=units_grow,
                             indifference=indifference)
            except ValueError:
                f = None
            if f is not None and math.isfinite(f.limit):
                basis = ("indifference" if indifference is not None and f.margin is not None
                         and f.margin <= float(indifference) else "at N")
                d = LookDecision("futility" if f.clear else "open", p, spent, p_seq, f.limit, f.margin,
                                 futility_basis=basis if f.clear else None)
                return d if f.clear else _curtail(indicator, bound, direction, level, fraction, beta, units_grow, d)
    return _curtail(indicator, bound, direction, level, fraction, beta, units_grow,
                    LookDecision("open", p, spent, p_seq))


def _effect_futility(ev, bound: float, direction: str, beta: float, delta: float, p, spent: float,
                     p_seq) -> LookDecision:
    """A family's test (no meaningful miss): its limit at ``beta`` clears ``bound`` less its declared effect."""
    try:
        lim = float(getattr(ev, "futility_limit", ev.limit)(beta, "low" if direction == "min" else "high"))
    except ValueError:
        return LookDecision("open", p, spent, p_seq)
    if not math.isfinite(lim):
        return LookDecision("open", p, spent, p_seq)
    clear = lim > bound - delta if direction == "min" else lim < bound + delta
    return LookDecision("futility" if clear else "open", p, spent, p_seq, lim, delta, futility_basis="effect")


def _curtail(indicator, bound: float, direction: str, level: float, fraction: float | None, beta: float | None,
             units_grow: bool, open_: LookDecision) -> LookDecision:
    """``open_``, or a pass by curtailment when the fixed-N test's conditional power at the largest miss the look's
    limit at ``beta`` leaves possible (at least 0) is below :data:`CURTAIL_GAMMA` (module docstring); for every kind, a pass where no outcome at ``N`` can fail the gate."""
    ev = indicator.evidence
    if not beta or fraction is None or not 0.0 < fraction < 1.0 or not isinstance(ev, Interval):
        return open_
    miss = None
    if not fails_possible(ev, bound, direction, level, fraction, units_grow):
        cp = 0.0
    elif indicator.curtail and indicator.kind in MEANINGFUL_MISS:
        try:  # the largest miss the look's own limit leaves possible (none below 0): every miss up to it costs less
            edge = float(ev.futility_limit(beta, "low" if direction == "min" else "high"))
        except ValueError:
            return open_
        if not math.isfinite(edge):
            return open_
        miss = max(0.0, (bound - edge) if direction == "min" else (edge - bound))
        cp = float(conditional_power(ev, bound, direction, 0.0, level, fraction, beta, units_grow))
    else:
        return open_
    if cp < CURTAIL_GAMMA:
        return dataclasses.replace(open_, reason="curtail", conditional_power=cp, curtail_miss=miss)
    return dataclasses.replace(open_, conditional_power=cp, curtail_miss=miss)


@dataclass(frozen=True)
class SequentialEvidence:
    """A gate's evidence at its last look, judged as the sequential test: its p-value is ``p_seq`` (``min`` of the
    earlier looks' ``p_j / s_j`` and this look's ``p / s_K``) and its power is at the spent level ``a s_K``;
    everything else is the evidence's own."""

    evidence: Any
    share: float
    prior: float | None = None

    def __getattr__(self, name: str):
        return getattr(self.evidence, name)

    def p_value(self, bound: float, direction: str) -> float:
        p = float(self.evidence.p_value(bound, direction)) / self.share
        if self.prior is not None:
            p = min(p, self.prior)
        return min(1.0, max(P_FLOOR, p))

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        return float(self.evidence.power(bound, direction, effect, alpha * self.share))

    def scaled(self, factor: float) -> "SequentialEvidence":
        return SequentialEvidence(self.evidence.scaled(factor), self.share, self.prior)

    def record(self) -> dict:
        return {**self.evidence.record(), "sequential_share": self.share, "earlier_looks_p": self.prior}
