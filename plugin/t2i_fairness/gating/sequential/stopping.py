"""What a look can say about the fixed-N test at ``N``: whether any outcome there can fail a gate
(:func:`fails_possible`) and the chance that it does given the look (:func:`conditional_power`), the curtailment
rule's inputs. Each dispatches on the evidence's type (:class:`~t2i_fairness.metrics.evidence.WorstOf`,
:class:`~t2i_fairness.metrics.evidence.Pairs`, any other :class:`~t2i_fairness.metrics.intervals.Interval`).
Why the rule keeps each gate's power: ``docs/sequential.md``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats as _stats

from t2i_fairness.metrics.evidence import Pairs, WorstOf, pair_limit
from t2i_fairness.metrics.intervals import Interval, PercentileMean, bound_cannot_fail, share_limit, share_tail
from t2i_fairness.metrics.sequential import conditional_power as _normal_conditional_power

__all__ = ["NEGLIGIBLE_POWER", "PAIRS_CAP_GRID", "Futility", "binomial_conditional_power", "conditional_power",
           "df_at_n", "drift", "fails_possible", "futility", "futility_margin", "open_groups"]

#: the largest trials cap :func:`fails_possible` tries every value of for a :class:`Pairs` (a grid of ``(cap + 1)^2``)
PAIRS_CAP_GRID = 400
#: the chance of failing at ``N`` below which a miss is one the fixed-N test does not catch: the default futility
#: margin is the largest miss the test at ``N`` fails at most this often (:func:`futility_margin`)
NEGLIGIBLE_POWER = 0.005


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


def _at_n(ev: Interval, fraction: float, units_grow: bool) -> Interval:
    """The look's evidence at ``N`` (:meth:`Interval.scaled`), with what ``N``'s test knows: its floor ``2^-G`` at
    ``N``'s prompts where looks add them, and its degrees of freedom where the look can know them (:func:`df_at_n`;
    else the normal quantile), its groups' or terms' alike."""
    return _n_fields(ev, ev.scaled(1.0 / float(fraction)), float(fraction), units_grow)


def _n_fields(ev: Interval, full: Interval, t: float, units_grow: bool) -> Interval:
    changes: dict = {"df": df_at_n(ev, t, units_grow)}
    floor = float(getattr(ev, "p_floor", 0.0) or 0.0)
    if floor > 0:
        changes["p_floor"] = floor ** (1.0 / t) if units_grow else floor
    for attr in ("groups", "terms"):
        parts = getattr(ev, attr, None)
        if parts:
            changes[attr] = tuple(_n_fields(a, b, t, units_grow) for a, b in zip(parts, getattr(full, attr)))
    return dataclasses.replace(full, **changes)


def futility_margin(ev: Interval, bound: float, direction: str, alpha: float, fraction: float, *,
                    negligible: float = NEGLIGIBLE_POWER, units_grow: bool = True) -> float:
    """The largest miss of ``bound`` that the gate's test at ``N`` (the look's evidence at ``N``'s size, at
    ``alpha``) fails with probability at most ``negligible``: misses the fixed-N run does not catch. ``inf`` where
    no outcome at ``N`` can fail or no miss is caught; ``0`` where every miss is caught that often. A
    :class:`WorstOf` toward its worst: the least of its groups' margins at ``alpha / G``.

    Example:
        >>> iv = Interval(0.80, 0.78, 0.82, "z", 0.95, 400, se=0.01)       # a look at a quarter of N: se 0.005 at N
        >>> round(futility_margin(iv, 0.8, "min", 1e-4, 0.25), 4)          # (z_1e-4 - z_0.005) x 0.005
        0.0057
    """
    if isinstance(ev, WorstOf) and _toward_worst(ev, direction):
        a = alpha / ev.selection
        return float(min(futility_margin(g, bound, direction, a, fraction, negligible=negligible,
                                         units_grow=units_grow) for g in ev.groups))
    t = float(fraction)
    if not 0.0 < t < 1.0:
        raise ValueError(f"`fraction` must be in (0, 1), but got {fraction!r}")
    if not fails_possible(ev, bound, direction, alpha, t, units_grow):
        return math.inf
    full = _at_n(ev, t, units_grow)

    def caught(miss: float) -> bool:
        try:
            return float(full.power(bound, direction, miss, alpha)) > negligible
        except (ValueError, ZeroDivisionError, OverflowError):
            return True  # no power known: no miss is taken as uncaught

    se = full.se_at(float(bound)) if not isinstance(full, WorstOf) else None
    hi = max(float(se) if se is not None and math.isfinite(se) and se > 0 else 1e-3, 1e-6)
    if caught(0.0) or caught(1e-9):
        return 0.0
    while not caught(hi):
        hi *= 2.0
        if hi > 1e3:
            return math.inf
    lo = hi / 2.0 if hi > 2e-6 else 0.0
    while hi - lo > 1e-5 * max(hi, 1e-3):  # bisection on the decision: powers may be steps (exact shares)
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if caught(mid) else (mid, hi)
    return float(lo)


@dataclasses.dataclass(frozen=True)
class Futility:
    """A look's futility reading: ``clear`` (pass early), the one-sided ``limit`` at ``beta`` it read and the
    ``margin`` it allowed (the miss ruled out is anything beyond ``bound - limit``, the margin what ``N`` would not
    catch or a team's indifference margin); for a worst-of, the group that decided it."""

    clear: bool
    limit: float
    margin: float | None
    group: str | None = None


def _edge_gap(g: Interval, bound: float, direction: str, beta: float, fraction: float | None) -> tuple[float, float]:
    """``(gap, limit)``: the group's futility limit at ``beta`` and how far it lies beyond the bound on the passing
    side (its drift toward missing counted): the gap is positive where the limit itself clears the bound."""
    sign = 1.0 if direction == "min" else -1.0
    lim = float(g.futility_limit(beta, "low" if direction == "min" else "high"))
    move = min(0.0, sign * drift(g, fraction)) if fraction is not None and 0.0 < fraction < 1.0 else 0.0
    return sign * (lim - float(bound)) + move, lim


def _uncaught(g: Interval, bound: float, direction: str, miss: float, alpha: float, fraction: float | None,
              units_grow: bool, indifference: float | None) -> bool:
    """Whether a miss of ``miss`` is within the margin: the test at ``N`` fails it at most :data:`NEGLIGIBLE_POWER`
    of the time (no outcome can fail, or its power there), or it is within a team's ``indifference``."""
    if indifference is not None and miss < float(indifference):
        return True
    if fraction is None or not 0.0 < fraction < 1.0:
        return False
    if not fails_possible(g, bound, direction, alpha, fraction, units_grow):
        return True
    try:
        return float(_at_n(g, fraction, units_grow).power(bound, direction, miss, alpha)) <= NEGLIGIBLE_POWER
    except (ValueError, ZeroDivisionError, OverflowError):
        return False


def futility(ev: Interval, bound: float, direction: str, beta: float, alpha: float, fraction: float | None, *,
             units_grow: bool = True, indifference: float | None = None, margin: bool = True) -> Futility:
    """Whether a look passes a gate by futility: its one-sided limit at ``beta`` (``futility_limit``; a worst-of
    group by group, no selection counted) clears ``bound`` less the margin, the margin being the largest miss the
    test at ``N`` fails at most :data:`NEGLIGIBLE_POWER` of the time (:func:`futility_margin`: the default,
    fixed-N equivalent) or, where a team chose one, the larger of that and its ``indifference`` margin.
    ``fraction`` ``None`` (no model of ``N``, as under ``--t2i-inconclusive fail``): margin 0 unless chosen.
    The margin is read only for a pass (the message states it), and not at all with ``margin=False``.

    A run passed early misses by more than the margin only where its limit is wrong (at most ``beta``), and a miss
    within the margin is one the fixed-N test fails at most :data:`NEGLIGIBLE_POWER` of the time: the early pass
    costs at most that much of the fixed-N power at any miss (``docs/sequential.md``).

    Example:
        >>> iv = Interval(0.81, 0.79, 0.83, "z", 0.95, 400, se=0.01)     # a look at a quarter of N
        >>> f = futility(iv, 0.8, "min", 0.002, 1e-4, 0.25)              # limit 0.7812: a miss up to 0.0188 possible
        >>> f.clear, round(f.limit, 4), futility(iv, 0.8, "min", 0.002, 1e-4, 0.25, indifference=0.05).clear
        (False, 0.7812, True)
    """
    toward = isinstance(ev, WorstOf) and _toward_worst(ev, direction)
    labels, groups = (ev.labels, ev.groups) if toward else ((None,), (ev,))
    a = alpha / ev.selection if toward else alpha
    nearest = None
    for label, g in zip(labels, groups):
        gap, lim = _edge_gap(g, bound, direction, beta, fraction)
        if not math.isfinite(lim):
            return Futility(False, lim, None, label)
        if gap <= 0.0 and not _uncaught(g, bound, direction, -gap, a, fraction, units_grow, indifference):
            return Futility(False, lim, None, label)
        if nearest is None or gap < nearest[0]:
            nearest = (gap, lim, label, g)
    _, lim, label, g = nearest  # the group nearest its edge: the message states its limit and margin
    if not margin:
        return Futility(True, lim, None, label)
    d = 0.0
    if fraction is not None and 0.0 < fraction < 1.0:
        d = futility_margin(g, bound, direction, a, fraction, units_grow=units_grow)
    if indifference is not None:
        d = max(d, float(indifference))
    return Futility(True, lim, d, label)


def open_groups(ev: WorstOf, bound: float, direction: str, beta: float, alpha: float, fraction: float | None, *,
                units_grow: bool = True, indifference: float | None = None) -> tuple[str, ...]:
    """A worst-of gate's groups a look leaves open, those a sequential run still measures: every group whose own
    limit at ``beta`` does not clear the bound itself (less a team's ``indifference`` margin, where it chose one).
    Stricter than :func:`futility`'s margins at ``N`` (it rules out every miss of the group, so it costs no power),
    and cheap: a paper run's rate floor has 1,000 groups at every look (``alpha``, ``fraction``: the gate's)."""
    if not isinstance(ev, WorstOf) or not _toward_worst(ev, direction):
        return tuple(getattr(ev, "labels", ()))
    d = 0.0 if indifference is None else float(indifference)
    return tuple(label for label, g in zip(ev.labels, ev.groups)
                 if not _edge_gap(g, bound, direction, beta, fraction)[0] + d > 0.0)
