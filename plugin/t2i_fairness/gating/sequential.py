"""Sequential gates: planned looks, alpha spent over them, futility passes (``--t2i-sequential``, issue #29).

A gate's fixed-N test gives a valid p-value ``p_k`` at any size (:mod:`t2i_fairness.metrics.evidence`:
exact for shares, the selection counted for worst-of and pairwise gates). A sequential gate looks at
``K`` sizes planned before any data (images per prompt over a grid, or prompts drawn for CIS:
:func:`~t2i_fairness.metrics.sequential.round_sizes`) and spends its level ``a`` (``alpha / m``,
Holm's first step) over them:

* **Alpha spending** (Lan & DeMets 1983, O'Brien-Fleming shape at the gate's own level):
  ``F(t) = 2 - 2 Phi(z_{a/2} / sqrt(t))`` at information fraction ``t = n_k / N``; look ``k`` may fail the
  gate when ``p_k <= a s_k`` with ``s_k = (F(t_k) - F(t_{k-1})) / a``. By the union bound over the looks
  (valid whatever their dependence) the gate's false-alarm rate is at most ``sum_k a s_k = a``, and its
  sequential p-value ``p_seq = min_k p_k / s_k`` is a valid p-value for the session's Holm step-down.
  The shape spends almost nothing early (at ``a = 1e-4``, ``s_1`` is about ``1e-10`` at ``t = 1/4``):
  the last look keeps nearly the fixed-N critical value, so power at ``N`` is the fixed-N test's
  (the alpha/2 split of the e-processes before it lost 5 points of power at ``N`` for nothing).
* **Futility** (non-binding, so it never adds a false alarm): a ``min`` gate passes early when the one-sided
  limit of its indicator at level ``beta_k`` exceeds ``bound - delta`` (``max``: below ``bound + delta``),
  with ``delta`` = half its kind's meaningful miss (:data:`FUTILITY_MISS`) and
  ``sum_k beta_k = FUTILITY_BETA = 0.005``: a model that truly misses by ``delta`` or more stops early by
  futility with probability at most 0.005 (the limit covers it), so its power is within half a point
  of the fixed-N test's. The limit is the gate's own (``evidence.limit``): a worst-of gate passes early
  only when every group clears, a spread when every pair does. A worst-of's futility limit counts no
  selection (``WorstOf.futility_limit``, ``WorstOf.open_groups``: each group at ``beta_k``): a model
  misses through one fixed group, whose own limit covers it with probability ``1 - beta_k``. A cluster share's law-free
  side is the betting limit (``Interval.futility_limit``), and a combination of them (CIS's drop per component) reads
  MOVER over its terms' futility limits (``Combination.futility_limit``; bench/bench_drop_futility.py).
* **Curtailment** (stochastic curtailment, Lan, Simon & Halperin 1982; non-binding, so it never adds a false
  alarm): where the futility limit is still open, a gate passes early when its *conditional power* is below
  ``CURTAIL_GAMMA = 0.005``: the chance, given the look, that the fixed-N test at ``N`` (at the gate's whole level
  ``a``) fails it were its true value a whole meaningful miss (:data:`~t2i_fairness.gating.power.MEANINGFUL_MISS`)
  beyond the bound (``Interval.conditional_power``: the look's estimate and the coming units' mean at the missed
  value, normal at ``N``'s error with the test's own critical distance where it has one, Hoeffding's half-width; exact
  for a binomial share, a precision's images: the test's critical count at ``N``), or beyond it at the look's own limit at ``beta_k`` where the look cannot exclude
  a larger miss. The runs a stop loses are those the test at ``N`` would have failed, so the power lost is
  ``E[1{stop} CP] <= 0.005`` at misses up to the meaningful one, and at most ``0.005 + sum beta_k = 0.01`` at any
  miss (the limit covers the truth but with probability ``beta_k``): with the futility rule the power at ``N`` stays
  within one point of the fixed-N test's (tests/test_sequential.py enumerates it exactly for shares). It stops
  what the futility limit cannot: a gate too small to catch a meaningful miss at ``N`` (underpowered, as its
  report says) stops at its first look unless the look shows a miss (a collapsed region's conditional power is
  near 1). Kinds: ``Indicator.curtail`` (a low percentile counts its expectation's move toward ``N``,
  ``PercentileMean.drift``; not a ratio or spread of coverages, nor the order test). Every kind passes where no
  outcome at ``N`` can fail it (``Interval.fails_possible``: a level below a test's unit floor ``2^-G``, which
  does not shrink where the looks add images per prompt to fixed prompts; a share's bound at its edge; a spread or
  ratio of coverages whose groups' real balls cap their trials below any failing outcome, ``Pairs.fails_possible``), a look
  whose value noise left undefined included (``Indicator.inconclusive``: a ratio whose denominator fell to 0 or
  below, inconclusive at ``N`` if still undefined, else judged by a test that cannot fail).
* **No early fail** where the estimand moves with the sample (``Indicator.early_fail``): coverage grows
  with ``n`` (a coverage below the bound at ``n`` may meet it at ``N``), a low percentile's expectation
  shifts with ``n``; they pass early by futility (a lower limit at ``n`` holds at ``N`` for coverage)
  and otherwise run to ``N``.
* The last look (``N``) is the fixed-N test at the spent level: ``p_seq`` against ``a``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import special as _special

from t2i_fairness.gating.indicator import KINDS
from t2i_fairness.gating.power import MEANINGFUL_MISS
from t2i_fairness.metrics.cis import ORDER_EFFECT
from t2i_fairness.metrics.intervals import P_FLOOR, upper_quantile

__all__ = ["CURTAIL_GAMMA", "FUTILITY_BETA", "FUTILITY_MISS", "LookDecision", "NULL_SHARES", "NULL_SHARES_SOURCE",
           "PromptUse", "REASONS", "SequentialEvidence", "decide_look", "futility_levels", "image_range", "null_share",
           "sequential_images", "spending_shares"]

#: the kinds' futility miss: half their meaningful miss (gating.power): a 0.05 miss of a share keeps its power. The
#: order test (``test``): half the order effect its report states power against (the first-named component drawn
#: ``ORDER_EFFECT`` = 0.2 more often than the last, linear: a position 0.1 from the mean over positions), so 0.05
#: in its evidence's units (:class:`~t2i_fairness.metrics.cis.OrderEffect`: a position's inclusion less the mean)
FUTILITY_MISS: dict[str, float] = {**{k: v / 2 for k, v in MEANINGFUL_MISS.items()}, "test": ORDER_EFFECT / 4}
#: the chance a model missing by the futility miss is passed early (spread evenly over the looks before N)
FUTILITY_BETA = 0.005
#: a gate passes early when the fixed-N test's chance of failing it at ``N``, given the look, were it a meaningful miss
#: beyond the bound, is below this (stochastic curtailment): the power it costs at that miss is at most this
CURTAIL_GAMMA = 0.005
#: why a gate stopped, as every report words it
REASONS = {"fail": "fail: alpha spent at this look", "futility": "pass: futility", "curtail": "pass: curtailed",
           "final": "ran to N", "open": "open"}


def spending_shares(fractions: Sequence[float], level: float) -> np.ndarray:
    """The share of ``level`` each planned look may spend (O'Brien-Fleming-type, Lan & DeMets 1983).

    ``F(t) = 2 - 2 Phi(z_{level/2} / sqrt(t))``; ``s_k = (F(t_k) - F(t_{k-1})) / level`` with ``F(t_K = 1) =
    level``. The shares sum to 1.

    Args:
        fractions: the looks' information fractions ``n_k / N``, increasing, the last 1.
        level: the gate's level (``alpha / m``).

    Raises:
        ValueError: fractions not increasing in (0, 1] or not ending at 1, a level outside (0, 1).

    Example:
        >>> s = spending_shares([0.25, 0.5, 1.0], 0.05 / 475)
        >>> f"{s[0]:.1e}", f"{s[1]:.1e}", round(float(s[2]), 6), round(float(s.sum()), 12)
        ('8.3e-11', '3.9e-04', 0.999606, 1.0)
        >>> spending_shares([1.0], 0.05).tolist()
        [1.0]
    """
    t = np.asarray(fractions, dtype=np.float64)
    if t.ndim != 1 or t.size == 0 or not (np.all(np.diff(t) > 0) and t[0] > 0 and abs(t[-1] - 1.0) < 1e-12):
        raise ValueError(f"`fractions` must increase in (0, 1] and end at 1, but got {list(fractions)}")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), but got {level!r}")
    z = upper_quantile(level / 2)
    cumulative = np.array([2.0 * float(_special.ndtr(-z / math.sqrt(x))) for x in t[:-1]] + [level])
    return np.diff(np.r_[0.0, cumulative]) / level


def futility_levels(looks: int) -> list[float]:
    """``beta_k`` of each look before ``N`` (``FUTILITY_BETA`` spread evenly; none at ``N``).

    Example:
        >>> futility_levels(4)
        [0.0016666666666666668, 0.0016666666666666668, 0.0016666666666666668]
        >>> futility_levels(1)      # a single look (N itself): none
        []
    """
    early = max(0, int(looks) - 1)
    return [FUTILITY_BETA / early] * early if early else []


@dataclass(frozen=True)
class LookDecision:
    """One gate at one look.

    Attributes:
        reason: ``fail`` (alpha spent here rejects), ``futility`` (passed early), ``open`` (next look),
            ``final`` (the last look: the fixed-N test at the spent level decides).
        p: this look's p-value (``None`` without one: undefined, or a test gate's at a look it has none).
        level: the alpha this look may spend (``a s_k``).
        p_sequential: ``min over the looks so far of p_j / s_j`` (the gate's p-value for Holm); the looks before
            ``N`` count only for a gate that may fail early (``Indicator.early_fail``).
        futility_limit: the one-sided limit at ``beta_k`` the futility rule compared (``None``: none).
        futility_miss: ``delta`` of that rule.
        conditional_power: the curtailment rule's chance that ``N`` fails the gate were it a meaningful miss beyond
            the bound (``None``: not computed).
        curtail_miss: that miss.
    """

    reason: str
    p: float | None
    level: float
    p_sequential: float | None
    futility_limit: float | None = None
    futility_miss: float | None = None
    conditional_power: float | None = None
    curtail_miss: float | None = None

    @property
    def stopped(self) -> bool:
        return self.reason in ("fail", "futility", "curtail")


def decide_look(indicator, bound: float, direction: str, *, level: float, share: float, beta: float | None,
                prior: float | None = None, final: bool = False, fraction: float | None = None,
                units_grow: bool = True) -> LookDecision:
    """Decide one gate at one look (module docstring).

    Args:
        indicator: the gate's :class:`~t2i_fairness.gating.indicator.Indicator` at this look.
        bound, direction: its bound.
        level: the gate's level ``a`` (``alpha / m``).
        share: this look's spending share ``s_k`` (:func:`spending_shares`).
        beta: this look's futility level (``None`` at ``N`` or without futility).
        prior: ``p_sequential`` of the earlier looks.
        final: the last look (``N``): no stop is decided here, the fixed-N test at the spent level is.
        fraction: this look's size over ``N`` (the curtailment rule's information fraction; ``None``: no curtailment).
        units_grow: whether the looks add the units a test's floor and degrees of freedom count (prompts drawn: CIS)
            or images per prompt of fixed prompts (a grid: the floor ``2^-G`` of ``N`` is the look's).

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.gating.indicator import Indicator
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> def share(k, n): return precision_interval(np.r_[np.ones(k, bool), np.zeros(n - k, bool)])
        >>> lk = lambda k, n: decide_look(Indicator(k / n, n, "share", share(k, n)), 0.8, "min", level=1e-4,
        ...                               share=0.01, beta=0.002)
        >>> lk(330, 400).reason, lk(200, 400).reason, lk(310, 400).reason    # above, far below, just below
        ('futility', 'fail', 'open')
    """
    ev = indicator.evidence
    if indicator.undefined is not None or indicator.skip is not None or not math.isfinite(indicator.value):
        undecided = LookDecision("final" if final else "open", None, level * share, prior)
        if final or indicator.undefined is None or not indicator.inconclusive:
            return undecided
        # a value left undefined by noise that another gate judges (a ratio whose denominator fell to 0 or below):
        # at N it is inconclusive if still undefined, else its test decides; where no outcome of that test can fail
        # it, stopping here costs nothing (its evidence, where the study gives one, says: ``fails_possible``)
        return _curtail(indicator, bound, direction, level, fraction, beta, units_grow, undecided, impossible_only=True)
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
    delta = FUTILITY_MISS.get(indicator.kind)
    if beta and delta is not None and "futility" in KINDS[indicator.kind] and ev is not None and hasattr(ev, "limit"):
        try:
            side = "low" if direction == "min" else "high"
            lim = float(getattr(ev, "futility_limit", ev.limit)(beta, side))  # a worst-of's counts no selection
        except ValueError:
            lim = None
        if lim is not None and math.isfinite(lim):
            clear = lim > bound - delta if direction == "min" else lim < bound + delta
            if clear:
                return LookDecision("futility", p, spent, p_seq, lim, delta)
            return _curtail(indicator, bound, direction, level, fraction, beta, units_grow,
                            LookDecision("open", p, spent, p_seq, lim, delta))
    return _curtail(indicator, bound, direction, level, fraction, beta, units_grow,
                    LookDecision("open", p, spent, p_seq))


def _curtail(indicator, bound: float, direction: str, level: float, fraction: float | None, beta: float | None,
             units_grow: bool, open_: LookDecision, impossible_only: bool = False) -> LookDecision:
    """``open_``, or a pass by curtailment when the fixed-N test's conditional power at a meaningful miss is below
    :data:`CURTAIL_GAMMA` (module docstring); for every kind, a pass where no outcome at ``N`` can fail the gate
    (``impossible_only``: that rule alone, for a look whose value is undefined)."""
    miss = MEANINGFUL_MISS.get(indicator.kind)
    ev = indicator.evidence
    if not beta or fraction is None or not 0.0 < fraction < 1.0 or not hasattr(ev, "fails_possible"):
        return open_
    if not ev.fails_possible(bound, direction, level, fraction, units_grow):
        cp = 0.0
    elif indicator.curtail and miss is not None and not impossible_only:
        cp = float(ev.conditional_power(bound, direction, miss, level, fraction, beta, units_grow))
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


def image_range(requests, batch: int, *, images_per_hour: float | None = None) -> dict:
    """Best and worst case images of a sequential run over a plan's requests (the ``plan`` command's hook).

    Worst case: the fixed-N plan itself (no gate uses more than ``N`` images per prompt). Best case:
    every gate decided after the first round, one batch per prompt (``min(batch, n)``), whatever the
    gates' kinds: :func:`sequential_images` counts per gate (kinds that run to ``N``, the first round
    of each family's look) and adds the null-model expectation (``t2i-fairness plan --t2i-sequential``
    uses it). GPU hours: pass
    ``images_per_hour`` (the rate lookup the plan's cost estimate uses, when one exists).

    Args:
        requests: :class:`~t2i_fairness.spine.plan.ImageRequest` items (``prompt``, ``n``); a prompt
            asked twice counts at its largest ``n``.
        batch: the generation batch size (>= 1).
        images_per_hour: a generation rate (> 0), or ``None`` for no hours.

    Raises:
        ValueError: ``batch < 1`` or a rate that is not positive.

    Example:
        >>> from t2i_fairness.spine.plan import ImageRequest
        >>> image_range([ImageRequest("a", 16), ImageRequest("b", 16), ImageRequest("a", 8)], 4)
        {'best_images': 8, 'worst_images': 32}
        >>> image_range([ImageRequest("a", 16)], 4, images_per_hour=8280.0)["worst_hours"]
        0.0019
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive integer, but got {batch!r}")
    per_prompt: dict[str, int] = {}
    for r in requests:
        per_prompt[r.prompt] = max(per_prompt.get(r.prompt, 0), int(r.n))
    out = {"best_images": sum(min(batch, n) for n in per_prompt.values()), "worst_images": sum(per_prompt.values())}
    if images_per_hour is not None:
        if not images_per_hour > 0:
            raise ValueError(f"`images_per_hour` must be > 0, but got {images_per_hour!r}")
        out["best_hours"] = round(out["best_images"] / images_per_hour, 4)
        out["worst_hours"] = round(out["worst_images"] / images_per_hour, 4)
    return out


# -- what a sequential run of a plan costs (``t2i-fairness plan --t2i-sequential``) ----------------------

#: Images a gate used, as a share of its fixed N, in ``bench/bench_sequential.py``'s **null** scenario (a
#: model that did not regress, against bounds the update flow wrote at another seed), per (family, kind), then
#: per ``(N, batch)``: the bench's ``N`` in its family's look unit (CIS: prompts per K, its looks being prompt
#: prefixes; DIG In: images per prompt) and the generation batch size, as the bench prints it (the larger share
#: over the between-prompt sds, rounded up to the percent). #29's design (alpha spending, CIS looks over
#: prompts) with #28's law-free test of CIS shares. Two benches, ``docs/sequential-bench.md``: ``--quick``
#: (CIS 500 prompts per K, 50 components, DIG In 3 objects; 60 runs, sd 0.2 and 0.3) and the paper's size (CIS
#: 10,000 prompts per K, 1,000 components, DIG In 9 objects; 90 runs per sd, sd 0.2 and 0.3, pooled per sd, at CIS's looks
#: growing by sqrt(2), ``families.cis.study.cis_looks``; the ``--quick`` rows are from its doubling looks). The law-free limits narrow
#: with the prompts a look holds, so CIS's shares stop far sooner at the paper's 10,000 prompts than at 500
#: (a plan takes the nearest measured ``N``); the rate floor counts the prompts naming a component still open
#: (``CisStudy.component_rates``); futility reads the betting limit for cluster shares
#: (``Interval.futility_limit``). DIG In's ``N`` is 60 in both: the larger of the two benches' shares (the quick
#: bench's). A plan's expected case is these means; runs vary (the paper mix's null images, pooled per seed over
#: 6 to 30 runs, ranged 21.0-30.0%).
NULL_SHARES: dict[tuple[str, str], dict[tuple[int, int], float]] = {
    ("cis", "share"): {(500, 8): 0.62, (500, 16): 0.62, (10000, 8): 0.07, (10000, 16): 0.07},
    ("cis", "spread"): {(500, 8): 0.08, (500, 16): 0.08, (10000, 8): 0.07, (10000, 16): 0.07},
    # the order test (futility only): bench/bench_order_futility.py, the order prompts the CIS look's share of 1,000 (50
    # at 500 prompts per K); its images are the order prompts' shuffles (the originals are K = 8's first prompts)
    ("cis", "test"): {(500, 8): 1.0, (500, 16): 1.0, (10000, 8): 0.48, (10000, 16): 0.48},
    ("cis", "worst"): {(500, 8): 0.43, (500, 16): 0.43, (10000, 8): 0.22, (10000, 16): 0.22},
    ("dig_in", "coverage"): {(60, 8): 1.0, (60, 16): 1.0},
    ("dig_in", "percentile"): {(60, 8): 0.89, (60, 16): 0.82},
    ("dig_in", "ratio"): {(60, 8): 1.0, (60, 16): 1.0},
    ("dig_in", "share"): {(60, 8): 0.71, (60, 16): 0.69},
    ("dig_in", "worst"): {(60, 8): 0.79, (60, 16): 0.77},
}
NULL_SHARES_SOURCE = ("bench/bench_sequential.py --quick (CIS 500 prompts per K; 60 runs, sd 0.2 and 0.3, at 06b49ee) and "
                      "at the paper's size (CIS 10,000 prompts per K; 90 runs per sd, sd 0.2 and 0.3, at 57896f4), "
                      "--batch 8 and 16, null scenario, 2026-11-27; the CIS order test: bench/bench_order_futility.py (400 runs a "
                      "row) at 57896f4; docs/sequential-bench.md")


def null_share(family: str, kind: str, batch: int, size: int | None = None) -> tuple[float, tuple[int, int] | None]:
    """The null-model image share of one gate (:data:`NULL_SHARES`) and the bench's ``(N, batch)`` it was measured at.

    A (family, kind) the bench did not measure gives ``(1.0, None)``: they are counted at ``N``. The bench's ``N``
    nearest the plan's ``size`` (in the family's look unit; on a log scale, the smaller on a tie: a smaller ``N``
    stops later; ``None``: the smallest measured), then the batch size nearest ``batch`` among that ``N``'s (the
    larger on a tie: larger batches stop later).

    Args:
        family: the family's name (``cis``, ``dig_in``, ...).
        kind: a key of :data:`~t2i_fairness.metrics.sequential.KINDS`.
        batch: the generation batch size (>= 1).
        size: the plan's ``N`` in the family's look unit (CIS: prompts per K; DIG In: images per prompt).

    Raises:
        ValueError: an unknown kind, a batch size or a size below 1.

    Example:
        >>> null_share("cis", "share", 16, 10000), null_share("cis", "share", 16, 400), null_share("cis", "share", 4)
        ((0.07, (10000, 16)), (0.62, (500, 16)), (0.62, (500, 8)))
        >>> null_share("dig_in", "share", 12, 60), null_share("cis", "score", 8), null_share("decomposed", "share", 8)
        ((0.69, (60, 16)), (1.0, None), (1.0, None))
    """
    if kind not in KINDS:
        raise ValueError(f"unknown sequential kind {kind!r}; one of {sorted(KINDS)}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive integer, but got {batch!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"`size` must be a positive integer or None, but got {size!r}")
    table = NULL_SHARES.get((family, kind))
    if not table:
        return 1.0, None
    sizes = sorted({n for n, _ in table})
    n = sizes[0] if size is None else min(sizes, key=lambda s: (abs(math.log(s / size)), s))
    b = min((b for s, b in table if s == n), key=lambda b: (abs(b - batch), -b))
    return float(table[(n, b)]), (n, b)


@dataclass(frozen=True)
class PromptUse:
    """One gate's use of one prompt, for :func:`sequential_images`.

    Attributes:
        prompt: the prompt.
        planned: images of the prompt the gate reads in the fixed-N plan (its request's ``n``).
        first: images after the gate's first round (``planned`` when the gate runs to ``N``; 0 for a prompt
            after the first look's prefix where looks are over prompts).
        share: the expected images as a share of ``planned`` (the null-model figure; 1.0 when the
            gate runs to ``N``).
    """

    prompt: str
    planned: int
    first: int
    share: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.first <= self.planned:
            raise ValueError(f"PromptUse {self.prompt!r}: first round {self.first} not in 0..{self.planned}")
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"PromptUse {self.prompt!r}: share {self.share!r} not in [0, 1]")


def sequential_images(uses, cached=None) -> dict:
    """Worst, expected and best case images of a sequential run over a plan (per prompt, then summed).

    Per prompt, every gate reading it is counted: the prompt's images are those of the gate that
    needs the most. **Worst**: ``planned`` (the fixed-N plan: no gate uses more than ``N``). **Best**:
    ``first`` (every gate that can stop early does so after its first round; a gate that runs to
    ``N`` holds its prompts at ``planned``). **Expected**: ``share * planned``, never below ``first``
    nor above ``planned`` (the null-model figure; a regressed or borderline model costs more, up to
    the worst case). Each case also counts the images still **to make** given ``cached`` (image
    indices already in the cache, per prompt; the expected case counts the fraction of its last image).

    Args:
        uses: :class:`PromptUse` items (a prompt may appear once per gate reading it).
        cached: prompt -> set of cached image indices (``None``: nothing cached).

    Returns:
        ``{"prompts", "early_prompts", "worst", "expected", "best", "worst_to_make", "expected_to_make",
        "best_to_make"}`` (``early_prompts``: prompts whose best case is below ``planned``; expected
        figures rounded to whole images).

    Example:
        >>> uses = [PromptUse("a", 16, 4, 0.33), PromptUse("a", 16, 4, 0.8), PromptUse("b", 16, 4, 0.33),
        ...         PromptUse("c", 16, 16, 1.0)]
        >>> r = sequential_images(uses)
        >>> r["worst"], r["expected"], r["best"]         # a: 12.8, b: 5.28, c: 16
        (48, 34, 24)
        >>> sequential_images(uses, cached={"c": set(range(16)), "a": {0, 1}})["best_to_make"]
        6
    """
    cached = cached or {}
    worst: dict[str, int] = {}
    best: dict[str, int] = {}
    expected: dict[str, float] = {}
    for u in uses:
        worst[u.prompt] = max(worst.get(u.prompt, 0), int(u.planned))
        best[u.prompt] = max(best.get(u.prompt, 0), int(u.first))
        e = max(float(u.first), min(float(u.planned), u.share * u.planned))
        expected[u.prompt] = max(expected.get(u.prompt, 0.0), e)

    def to_make(prompt: str, n: float) -> float:
        have = cached.get(prompt, ())
        whole = int(math.floor(n))
        missing = whole - sum(1 for i in have if 0 <= i < whole)  # per cached image, not per image asked for
        return missing + ((n - whole) if n > whole and whole not in have else 0.0)

    return {"prompts": len(worst), "early_prompts": sum(1 for p in worst if best[p] < worst[p]),
            "worst": sum(worst.values()), "expected": int(round(sum(expected.values()))),
            "best": sum(best.values()),
            "worst_to_make": sum(int(to_make(p, n)) for p, n in worst.items()),
            "expected_to_make": int(round(sum(to_make(p, n) for p, n in expected.items()))),
            "best_to_make": sum(int(to_make(p, n)) for p, n in best.items())}


