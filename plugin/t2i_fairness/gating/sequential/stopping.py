"""What a look can say about the fixed-N test at ``N``: whether any outcome there can fail a gate
(:func:`fails_possible`) and the chance that it does given the look (:func:`conditional_power`), the curtailment
rule's inputs. Each dispatches on the evidence's type (:class:`~t2i_fairness.metrics.evidence.WorstOf`,
:class:`~t2i_fairness.metrics.evidence.Pairs`, any other :class:`~t2i_fairness.metrics.intervals.Interval`).
Why the rule keeps each gate's power: ``docs/sequential.md``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as _stats

from t2i_fairness.metrics.evidence import Pairs, WorstOf, pair_limit
from t2i_fairness.metrics.intervals import Interval, PercentileMean, bound_cannot_fail, share_limit, share_tail
from t2i_fairness.metrics.sequential import conditional_power as _normal_conditional_power

__all__ = ["PAIRS_CAP_GRID", "binomial_conditional_power", "conditional_power", "df_at_n", "drift", "fails_possible"]

#: the largest trials cap :func:`fails_possible` tries every value of for a :class:`Pairs` (a grid of ``(cap + 1)^2``)
PAIRS_CAP_GRID = 400


def _toward_worst(ev: WorstOf, direction: str) -> bool:
    return (ev.worst == "min") == (direction == "min")


def drift(ev: Interval, fraction: float) -> float:
    """The expected move of the estimate from this look to ``N`` (the look's size over ``fraction``): a
    :class:`PercentileMean`'s own model, 0 for an estimand that does not move with the sample."""
    return float(ev.drift(fraction)) if isinstance(ev, PercentileMean) else 0.0


def df_at_n(ev: Interval, fraction: float, units_grow: bool) -> float | None:
    """The degrees of freedom of the test at ``N``, where the look can know them: a t over the look's units
    (``df = n_units - 1``, grown to ``n_units / fraction - 1`` where the looks add units) or a count fixed by the
    design (``df_structural``); ``None`` (the normal quantile) where ``df`` is estimated from the data.

    Example:
        >>> df_at_n(Interval(0.4, 0.3, 0.5, "t", 0.95, 4, se=0.05, df=3.0), 0.5, units_grow=True)
        7.0
    """
    if ev.df is None or not math.isfinite(ev.df):
        return None
    df = float(ev.df)
    if ev.df_structural:
        return df
    if abs(df - (ev.n_units - 1)) < 1e-9:
        return max(df, ev.n_units / float(fraction) - 1.0) if units_grow else df
    return None


def fails_possible(ev: Interval, bound: float, direction: str, alpha: float, fraction: float = 1.0,
                   units_grow: bool = True) -> bool:
    """Whether any outcome of the gate's test at ``N`` can fail it at ``alpha``.

    Not below the floor of ``N``'s units (``p_floor = 2^-G``: ``2^-(G / fraction)`` at ``N`` where the looks add
    prompts, ``units_grow``), nor for a share whose bound lies on an edge (:func:`bound_cannot_fail`). A
    :class:`WorstOf` (toward its worst): some group at ``alpha / G``. A :class:`Pairs` of groups whose trials are
    capped (coverages' ``trials_cap``): every achievable value of every ordered pair is tried at the cap.

    Example:
        >>> from t2i_fairness.metrics.intervals import floor_to_units
        >>> iv = floor_to_units(Interval(0.5, 0.3, 0.7, "t", 0.95, 8, se=0.1, df=7.0), 8)    # 8 prompts: p >= 2^-8
        >>> fails_possible(iv, 0.9, "min", 1e-4, 0.5, units_grow=False), fails_possible(iv, 0.9, "min", 1e-4, 0.5)
        (False, True)
    """
    if isinstance(ev, WorstOf) and _toward_worst(ev, direction):
        return any(fails_possible(g, bound, direction, alpha / ev.selection, fraction, units_grow) for g in ev.groups)
    if bound_cannot_fail(direction, float(bound), {"n_effective": ev.n_effective}):
        return False
    floor = float(ev.p_floor)
    if floor > 0 and units_grow:
        floor = floor ** (1.0 / float(fraction))
    if alpha < floor:
        return False
    return _pairs_fail_possible(ev, bound, direction, alpha) if isinstance(ev, Pairs) else True


def _pairs_fail_possible(ev: Pairs, bound: float, direction: str, alpha: float) -> bool:
    """A spread (``max``) fails only if some pair's lower limit exceeds the bound at the groups' caps, a ratio
    (``min``) only if some upper limit is below it: an exact limit at more trials is no wider, and MOVER limits are
    monotone in the groups' limits. Uncapped groups, or caps above :data:`PAIRS_CAP_GRID`: ``True``."""
    caps = [g.trials_cap for g in ev.groups]
    if (ev.contrast, direction) not in {("difference", "max"), ("ratio", "min")} or \
            any(c is None or c < 1 or c > PAIRS_CAP_GRID for c in caps):
        return True
    a = float(alpha) / ev.selection
    grids = {}
    for c in set(caps):  # every value a share of c trials can take, with its exact limits at c trials
        k = np.arange(c + 1, dtype=np.float64)
        grids[c] = (k / c, np.asarray(share_limit(k, c, a, "low"), dtype=np.float64),
                    np.asarray(share_limit(k, c, a, "high"), dtype=np.float64))
    for i, ci in enumerate(caps):
        g, gl, gh = (v[:, None] for v in grids[ci])
        for j, cj in enumerate(caps):
            if i == j:
                continue
            h, hl, hh = (v[None, :] for v in grids[cj])
            if ev.contrast == "difference":
                if np.nanmax(pair_limit("difference", "low", g, gl, gh, h, hl, hh)) > bound:
                    return True
            elif np.nanmin(pair_limit("ratio", "high", g, gl, gh, h, hl, hh)) < bound:
                return True
    return False


def conditional_power(ev: Interval, bound: float, direction: str, miss: float, alpha: float, fraction: float,
                      beta: float | None = None, units_grow: bool = True) -> float:
    """The chance that the gate's test at ``N`` fails it at ``alpha`` given this look, were the true value
    ``bound - miss`` (``+`` for ``max``).

    With ``beta`` the value judged is the farther of that miss and the look's own limit at ``beta``, so the rule
    costs at most ``gamma + beta`` of the power at any miss. A binomial share gets the exact chance
    (:func:`binomial_conditional_power`); others the normal model
    (:func:`t2i_fairness.metrics.sequential.conditional_power`) at ``N``'s size with the test's own
    ``critical_distance``. 0 where no outcome at ``N`` fails; 1 (never curtail) where no error is known. A
    :class:`WorstOf` toward its worst: the union bound over its groups at ``alpha / G``.

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> iv = precision_interval(np.r_[np.ones(15, bool), np.zeros(1, bool)])    # 15 of 16 images: a look at 1/4
        >>> round(conditional_power(iv, 0.8, "min", 0.10, 1e-4, 0.25), 4)   # 64 images at N, a 0.10 miss
        0.0004
    """
    if isinstance(ev, WorstOf) and _toward_worst(ev, direction):
        a = alpha / ev.selection
        return float(min(1.0, sum(conditional_power(g, bound, direction, miss, a, fraction, beta, units_grow)
                                  for g in ev.groups)))
    t = float(fraction)
    if not 0.0 < t < 1.0:
        raise ValueError(f"`fraction` must be in (0, 1), but got {fraction!r}")
    if not fails_possible(ev, bound, direction, alpha, t, units_grow):
        return 0.0
    full = ev.scaled(1.0 / t)
    df = df_at_n(ev, t, units_grow)
    sign = 1.0 if direction == "min" else -1.0
    try:
        if beta is not None:  # the farther of the miss and the look's own limit toward missing
            edge = float(ev.futility_limit(beta, "low" if direction == "min" else "high"))
            if not math.isfinite(edge):
                return 1.0
            miss = max(float(miss), sign * (float(bound) - edge))
        truth = float(bound) - sign * float(miss)
        if ev.is_share:  # a share's true value lies in [0, 1]
            truth = min(max(truth, 0.0), 1.0)
        se_bound = full.se_at(float(bound))
        se_miss = full.se_at(truth)
    except ValueError:
        return 1.0
    level = alpha / max(1, ev.selection if isinstance(ev, (WorstOf, Pairs)) else 1)
    counts = _binomial_counts(ev, t)
    if counts is not None:
        return binomial_conditional_power(*counts, float(bound), truth, direction, level)
    if se_bound is None or not (math.isfinite(se_bound) and se_bound > 0) or se_miss is None or \
            not math.isfinite(se_miss) or se_miss < 0:
        return 1.0
    critical = full.critical_distance(float(bound), level, df)
    # an estimand that moves with the sample (a low percentile): only a move toward missing counts
    margin = sign * (ev.estimate - float(bound)) + min(0.0, sign * drift(ev, t))
    if se_miss == 0:  # the coming units sit at the edge: N's estimate is known given the look
        need = (critical + t * margin) / (1.0 - t)
        return 1.0 if sign * (float(bound) - truth) > need else 0.0
    return _normal_conditional_power(margin, sign * (float(bound) - truth), critical, float(se_miss), t)


def _binomial_counts(ev: Interval, fraction: float) -> tuple[int, int, int] | None:
    """``(successes, trials, trials at N)`` of a binomial share (whole trials and successes; no estimated df,
    law-free side, cap or floor: a precision's images); ``None`` for any other interval."""
    if not ev.is_share or ev.df is not None or ev.bounded is not None or ev.trials_cap is not None \
            or ev.p_floor > 0:
        return None
    n = float(ev.n_effective)
    x = ev.estimate * n
    if not (n >= 1 and n.is_integer() and abs(x - round(x)) < 1e-6):
        return None
    return int(round(x)), int(n), max(int(n) + 1, int(round(n / float(fraction))))


def binomial_conditional_power(x: int, n: int, total: int, bound: float, truth: float, direction: str,
                               alpha: float) -> float:
    """The exact chance that :func:`share_tail` over ``total`` images rejects at ``alpha`` given ``x`` of the first
    ``n`` inside, the other ``total - n`` binomial at ``truth`` (mirrored for ``max``); 0 where no count rejects.

    Example:
        >>> binomial_conditional_power(6, 8, 16, 0.78, 0.3, "min", 1.4e-4)   # only X_16 <= 5 fails: 6 are in
        0.0
        >>> round(binomial_conditional_power(1, 4, 16, 0.78, 0.3, "min", 1.4e-4), 4)   # P(Bin(12, 0.3) <= 4)
        0.7237
    """
    if direction == "max":  # mirror: successes <-> failures
        return binomial_conditional_power(n - x, n, total, 1.0 - bound, 1.0 - truth, "min", alpha)
    ks = np.arange(total + 1)
    reject = ks[np.asarray(share_tail(ks, total, bound, "min")) <= alpha]
    if reject.size == 0 or int(reject.max()) < x:
        return 0.0
    return float(_stats.binom.cdf(int(reject.max()) - x, total - n, min(max(truth, 0.0), 1.0)))
