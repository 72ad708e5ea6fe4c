"""Betting bounds on a mean of independent units in [0, 1] (Waudby-Smith & Ramdas, JRSS-B 2024).

A candidate mean ``m`` is bet against: the capital ``K_t(m) = prod_{i <= t} (1 + l_i(m) (x_i - m))`` is a
nonnegative supermartingale when the units' mean is at most ``m``, so by Ville's inequality it reaches ``1 / a``
at any time with chance at most ``a``, whatever the units' law. The bets are the paper's predictable plug-in
(variance-adaptive) ones, ``l_t = sqrt(2 log(1 / a) / (s2_{t-1} h_t))`` on the regularised running variance
``s2``, with ``h_t = n`` (a fixed horizon: the limit at ``n``, or at a sequential design's planned ``N``) or
``h_t = t log(1 + t)`` (no horizon: a confidence sequence), hedged by ``l_t(m) = min(l_t, c / m)`` (``c`` =
:data:`TRUNCATION`), which keeps the capital positive and decreasing in ``m``: the limit is the one ``m`` where
the largest capital so far meets ``1 / a`` (bisection). One-sided: the ``"high"`` side is the ``"low"`` side on
``1 - x``. Every function is vectorised over leading axes (runs); the units lie along the last axis, in the
order they were drawn (an order that does not depend on their values; never sorted).
"""

from __future__ import annotations

import math

import numpy as np

from t2i_fairness.metrics.intervals.tails import _check_alpha

__all__ = ["NARROW_TRUNCATION", "TRUNCATION", "TUNED_LEVEL", "betting_limit", "betting_limits",
           "betting_p_value", "betting_sequence_limits"]

#: ``c`` of the hedged bets ``min(l_t, c / m)`` (the paper's default, 1/2)
TRUNCATION = 0.5

#: ``c`` for units narrow against their range (a mean of prompts' cosines on [-1, 1]): there every bet is capped,
#: and any ``c < 1`` is as valid; 0.9 fails about half the miss 1/2 needs, near the least any law-free test can.
#: Units often near the range's far edge (a rate's prompt shares) lose power with it, so they keep 1/2
NARROW_TRUNCATION = 0.9

#: the level a p-value's bets are tuned for (the presets' per-gate levels are 1.03e-4 and 3.49e-5); the
#: p-value is valid at every level, its power near-best near this one
TUNED_LEVEL = 5e-5


def _units(values, name: str = "values") -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 0 or x.shape[-1] == 0 or not np.all((x >= 0.0) & (x <= 1.0)):
        raise ValueError(f"`{name}` must be a non-empty array of values in [0, 1] (units on the last axis)")
    return x


def _horizon(horizon, n: int):
    if horizon is None:
        return None
    if isinstance(horizon, str):
        if horizon != "n":
            raise ValueError(f"`horizon` must be None, 'n' or a positive count, but got {horizon!r}")
        return n
    h = int(horizon)
    if h < 1:
        raise ValueError(f"`horizon` must be at least 1 unit, but got {horizon!r}")
    return h


def plugin_bets(x: np.ndarray, alpha: float, horizon: int | None) -> np.ndarray:
    """The predictable plug-in bets ``l_t`` (before hedging) for units ``x`` (last axis): each reads only the
    units before it (the regularised mean and variance start at 1/2 and 1/4, one pseudo-unit)."""
    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    mu = np.minimum((0.5 + np.cumsum(x, axis=-1)) / (t + 1.0), 1.0)
    var = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1.0)
    before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), var[..., :-1]], axis=-1)
    scale = float(horizon) if horizon is not None else t * np.log1p(t)
    return np.sqrt(2.0 * math.log(1.0 / alpha) / (scale * before))


def _max_log_capital(x: np.ndarray, bets: np.ndarray, m, truncation: float) -> np.ndarray:
    """``max_t log K_t(m)`` (0 included: the starting capital) over the last axis; ``m`` broadcasts against the
    leading axes."""
    m = np.asarray(m, dtype=np.float64)[..., None]
    with np.errstate(divide="ignore", over="ignore"):  # m near 0: no cap
        cap = np.where(m > 0.0, truncation / np.where(m > 0.0, m, 1.0), np.inf)
    steps = np.log1p(np.minimum(bets, cap) * (x - m))
    return np.maximum(np.cumsum(steps, axis=-1).max(axis=-1), 0.0)


def betting_p_value(values, bound, direction: str, *, alpha: float = TUNED_LEVEL, horizon="n",
                    truncation: float = TRUNCATION):
    """One-sided p-value of "the units' mean meets ``bound``" (``>=`` for ``min``, ``<=`` for ``max``), free of
    their law: ``1 / max_t K_t``, the capital of bets tuned for level ``alpha`` (valid at every level).

    Example:
        >>> x = np.tile([0.25, 0.5, 0.75], 40)                       # 120 prompt shares, mean 0.5
        >>> round(float(betting_p_value(x, 0.6, "min")), 6), round(float(betting_p_value(x, 0.4, "min")), 2)
        (1.7e-05, 0.89)
    """
    x = _units(values)
    alpha = _check_alpha(alpha)
    if direction not in ("min", "max"):
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    b = np.asarray(bound, dtype=np.float64)
    if direction == "min":  # H0 mean >= b: bet that 1 - x has a mean above 1 - b
        x, b = 1.0 - x, 1.0 - b
    bets = plugin_bets(x, alpha, _horizon(horizon, x.shape[-1]))
    log_k = _max_log_capital(x, bets, np.clip(b, 0.0, 1.0), truncation)
    return np.where(b >= 1.0, 1.0, np.exp(-log_k))


def betting_limits(values, alpha: float, side: str, *, horizon="n", tuned: float | None = None,
                   truncation: float = TRUNCATION, steps: int = 50) -> np.ndarray:
    """One-sided limits at level ``alpha`` of the mean of each run's units (last axis): ``"low"``, the smallest
    ``m`` whose capital never reaches ``1 / alpha`` up to the last unit (the running intersection over looks);
    ``"high"``, the same on ``1 - values``. ``horizon="n"``: bets tuned for this many units (the fixed-n limit);
    ``None``: a confidence sequence's bets; a count: a design's planned units (valid at every look too).
    ``tuned``: the level the bets are tuned for (default ``alpha``; :data:`TUNED_LEVEL` inverts
    :func:`betting_p_value`: the limit at ``a`` is where that p-value crosses ``a``).

    Example:
        >>> x = np.tile([0.25, 0.5, 0.75], 40)
        >>> betting_limits(np.stack([x, x[::-1]]), 0.001, "low").round(3).tolist()
        [0.427, 0.427]
    """
    x = _units(values)
    alpha = _check_alpha(alpha)
    tuned = alpha if tuned is None else _check_alpha(tuned)
    if side not in ("low", "high"):
        raise ValueError(f"`side` must be 'low' or 'high', but got {side!r}")
    if not 0.0 < float(truncation) < 1.0:
        raise ValueError(f"`truncation` must be in (0, 1), but got {truncation!r}")
    if side == "high":
        return 1.0 - betting_limits(1.0 - x, alpha, "low", horizon=horizon, tuned=tuned, truncation=truncation,
                                    steps=steps)
    bets = plugin_bets(x, tuned, _horizon(horizon, x.shape[-1]))
    target = math.log(1.0 / alpha)
    lo, hi = np.zeros(x.shape[:-1]), np.ones(x.shape[:-1])  # K(1) <= 1: never rejected; lo rejected or 0
    rejected0 = _max_log_capital(x, bets, lo, truncation) >= target
    for _ in range(int(steps)):
        mid = 0.5 * (lo + hi)
        rejected = _max_log_capital(x, bets, mid, truncation) >= target
        lo, hi = np.where(rejected, mid, lo), np.where(rejected, hi, mid)
    return np.where(rejected0, lo, 0.0)


def betting_limit(values, alpha: float, side: str, *, truncation: float = TRUNCATION, steps: int = 50) -> float:
    """The fixed-n one-sided limit of the mean of independent values in [0, 1], free of their law, by hedged
    betting (:func:`betting_limits` with bets tuned for ``n = len(values)``), at most the mean (``"low"``) or at
    least it (``"high"``). The bets read the values' spread: near the normal-theory limit at hundreds of units.

    Example:
        >>> x = np.tile([0.25, 0.5, 0.75], 40)                       # 120 prompt shares, mean 0.5
        >>> round(betting_limit(x, 0.001, "low"), 3), round(betting_limit(x, 0.001, "high"), 3)
        (0.427, 0.573)
        >>> round(betting_limit(x, 0.001, "high", truncation=NARROW_TRUNCATION), 3)  # c = 0.9
        0.568
    """
    x = _units(np.asarray(values, dtype=np.float64).ravel())
    lim = float(betting_limits(x, alpha, side, truncation=truncation, steps=steps))
    return min(lim, float(x.mean())) if side == "low" else max(lim, float(x.mean()))


def betting_sequence_limits(values, alpha: float, side: str, *, looks=None, horizon=None,
                            truncation: float = TRUNCATION, steps: int = 50) -> np.ndarray:
    """A confidence sequence's one-sided limits at each look: ``looks`` (increasing unit counts; default every
    unit) of the units in draw order; with probability at least ``1 - alpha`` every one of them holds at once,
    so a sequential design may read it at any look, stop on it, and still keep ``alpha``. ``horizon``: ``None``
    (bets ``sqrt(2 log(1/alpha) / (s2 t log(1 + t)))``) or the planned units (tighter near them).

    Example:
        >>> x = np.tile([0.25, 0.5, 0.75], 100)
        >>> betting_sequence_limits(x, 0.001, "low", looks=[30, 90, 300]).round(3).tolist()
        [0.312, 0.408, 0.451]
    """
    x = _units(np.asarray(values, dtype=np.float64).ravel())
    n = x.size
    at = np.arange(1, n + 1) if looks is None else np.asarray(looks, dtype=np.int64).ravel()
    if at.size == 0 or at[0] < 1 or at[-1] > n or np.any(np.diff(at) <= 0):
        raise ValueError(f"`looks` must be increasing unit counts in [1, {n}], but got {looks!r}")
    h = _horizon(horizon, n)
    return np.array([float(betting_limits(x[:k], alpha, side, horizon=h if h is not None else None,
                                          truncation=truncation, steps=steps)) for k in at])
