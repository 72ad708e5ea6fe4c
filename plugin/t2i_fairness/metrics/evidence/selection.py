"""The worst of G groups (:class:`WorstOf`) and the spread or ratio of groups (:class:`Pairs`), every selection
counted.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from t2i_fairness.metrics.evidence.power import _normal_power, _se
from t2i_fairness.metrics.intervals import BASES, P_FLOOR, Interval, invert_limit

__all__ = ["Pairs", "WorstOf", "pair_limit", "pairs", "worst_of"]


def _display(evidence: Interval) -> Interval:
    """``evidence`` with its displayed interval: its limits at ``(1 - confidence) / 2`` each side."""
    a = (1.0 - evidence.confidence) / 2.0
    return dataclasses.replace(evidence, low=float(evidence.limit(a, "low")), high=float(evidence.limit(a, "high")))


def _check_groups(groups: Mapping[str, Interval] | Sequence[Interval], minimum: int) -> tuple[tuple[str, ...], tuple[Interval, ...]]:
    items = list(groups.items()) if isinstance(groups, Mapping) else [(str(i), g) for i, g in enumerate(groups)]
    if len(items) < minimum:
        raise ValueError(f"`groups` must hold at least {minimum} interval(s), but got {len(items)}")
    for label, iv in items:
        if not isinstance(iv, Interval):
            raise ValueError(f"group {label!r} must be an Interval, but got {type(iv).__name__}")
    return tuple(str(k) for k, _ in items), tuple(v for _, v in items)


@dataclass(frozen=True)
class WorstOf(Interval):
    """The worst of G groups' values (``worst="min"``: the lowest), the selection counted: its limit is the worst
    of the groups' limits at ``alpha / G``, its p-value ``min(1, G min_g p_g)``, its power the least of the groups'.
    """

    labels: tuple[str, ...] = ()
    groups: tuple[Interval, ...] = ()
    worst: str = "min"
    total: int | None = None  # the groups the worst is picked from when only some are measured here

    @property
    def basis(self) -> str:
        """The weakest basis among the groups' (a worst-of is as valid as its least valid group)."""
        return max((g.basis for g in self.groups), key=BASES.index, default=super().basis)

    @property
    def selection(self) -> int:
        """How many groups the worst was picked from (the Bonferroni factor): every group of the gate, also
        those a sequential run no longer measures (``total``)."""
        return max(len(self.groups), int(self.total or 0))

    def open_groups(self, bound: float, direction: str, beta: float, delta: float) -> tuple[str, ...]:
        """The groups whose one-sided limit at ``beta`` does not clear ``bound - delta`` (``+`` for ``max``): those a
        sequential run still measures. Each group at ``beta`` itself: the futility promise counts no selection.

        Example:
            >>> import numpy as np
            >>> from t2i_fairness.metrics.intervals import precision_interval
            >>> g = {r: precision_interval(np.r_[np.ones(k, bool), np.zeros(400 - k, bool)]) for r, k in
            ...      [("a", 390), ("b", 300)]}
            >>> worst_of(g).open_groups(0.8, "min", 0.002, 0.05)
            ('b',)
        """
        side = "low" if direction == "min" else "high"
        clear = (lambda v: v > bound - delta) if direction == "min" else (lambda v: v < bound + delta)
        return tuple(label for label, g in zip(self.labels, self.groups) if not clear(g.futility_limit(beta, side)))

    @property
    def worst_label(self) -> str:
        pick = min if self.worst == "min" else max
        return self.labels[pick(range(len(self.groups)), key=lambda i: self.groups[i].estimate)]

    def _worst_group(self) -> Interval:
        return self.groups[self.labels.index(self.worst_label)]

    def limit(self, alpha: float, side: str) -> float:
        pick = min if self.worst == "min" else max
        return float(pick(g.limit(alpha / self.selection, side) for g in self.groups))

    def futility_limit(self, alpha: float, side: str) -> float:
        """The limit the futility rule reads: toward the worst, the worst of the groups' own limits at ``alpha`` (the
        true worst is one fixed group's value, so no selection is counted); away from it, :meth:`limit`.

        Example:
            >>> import numpy as np
            >>> from t2i_fairness.metrics.intervals import precision_interval
            >>> g = {r: precision_interval(np.r_[np.ones(k, bool), np.zeros(400 - k, bool)]) for r, k in
            ...      [("a", 390), ("b", 300), ("c", 310)]}
            >>> w = worst_of(g)
            >>> w.futility_limit(0.01, "low") == g["b"].limit(0.01, "low") > w.limit(0.01, "low")
            True
        """
        pick = min if self.worst == "min" else max
        if (self.worst == "min") != (side == "low"):
            return self.limit(alpha, side)
        return float(pick(g.futility_limit(alpha, side) for g in self.groups))

    def p_value(self, bound: float, direction: str) -> float:
        if (self.worst == "min") == (direction == "min"):
            p = min(g.p_value(bound, direction) for g in self.groups)
            return min(1.0, max(P_FLOOR, self.selection * p))
        return invert_limit(self.limit, float(bound), direction)

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        return float(min(g.power(bound, direction, effect, alpha / self.selection) for g in self.groups))

    def se_at(self, value: float) -> float | None:
        return self._worst_group().se_at(value)

    def scaled(self, factor: float) -> "WorstOf":
        return _display(dataclasses.replace(self, groups=tuple(g.scaled(factor) for g in self.groups),
                                            n_units=int(math.ceil(self.n_units * factor))))

    def record(self) -> dict:
        w = self._worst_group()
        return {**super().record(), "selection": self.selection, "worst": self.worst_label,
                "worst_group": w.record()}


def worst_of(groups: Mapping[str, Interval] | Sequence[Interval], *, worst: str = "min",
             confidence: float = 0.95, total: int | None = None) -> WorstOf:
    """The worst group's value with its selection counted (:class:`WorstOf`).

    Args:
        groups: label -> the group's :class:`Interval`.
        worst: ``"min"`` (the lowest value is the worst) or ``"max"``.
        total: the gate's number of groups when ``groups`` holds only those still measured (a sequential run's
            open groups): the Bonferroni factor stays the gate's.

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> g = {r: precision_interval(np.r_[np.ones(k, bool), np.zeros(60 - k, bool)])
        ...      for r, k in [("africa", 45), ("europe", 57), ("asia", 55)]}
        >>> w = worst_of(g)
        >>> w.estimate, w.worst_label, w.selection
        (0.75, 'africa', 3)
    """
    labels, ivs = _check_groups(groups, 1)
    if worst not in ("min", "max"):
        raise ValueError(f"`worst` must be 'min' or 'max', but got {worst!r}")
    pick = min if worst == "min" else max
    i = pick(range(len(ivs)), key=lambda j: ivs[j].estimate)
    shares = all(g.is_share for g in ivs)
    ev = WorstOf(float(ivs[i].estimate), 0.0, 0.0, f"worst of {len(ivs)} groups (Bonferroni over the groups)",
                 float(confidence), min(g.n_units for g in ivs), se=ivs[i].se, df=ivs[i].df,
                 n_effective=ivs[i].n_effective if shares else None, labels=labels, groups=ivs, worst=worst,
                 total=total)
    return _display(ev)


@dataclass(frozen=True)
class Pairs(Interval):
    """Best minus worst (``contrast="difference"``) or worst / best (``"ratio"``) over G groups, as the
    union of the ``G (G - 1)`` ordered pairs' tests (module docstring)."""

    labels: tuple[str, ...] = ()
    groups: tuple[Interval, ...] = ()
    contrast: str = "difference"

    @property
    def selection(self) -> int:
        """The ordered pairs tested (the Bonferroni factor)."""
        g = len(self.groups)
        return g * (g - 1)

    def _group_limits(self, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = alpha / self.selection
        e = np.array([g.estimate for g in self.groups])
        lo = np.array([g.limit(a, "low") for g in self.groups])
        hi = np.array([g.limit(a, "high") for g in self.groups])
        return e, lo, hi

    def pair_limits(self, alpha: float, side: str) -> np.ndarray:
        """``(G, G)`` limits at ``alpha / (G (G - 1))`` of ``theta_g - theta_h`` (difference) or
        ``theta_g / theta_h`` (ratio, MOVER-R); the diagonal is NaN."""
        e, lo, hi = self._group_limits(alpha)
        out = pair_limit(self.contrast, side, e[:, None], lo[:, None], hi[:, None], e[None, :], lo[None, :],
                          hi[None, :])
        np.fill_diagonal(out, np.nan)
        return out

    def limit(self, alpha: float, side: str) -> float:
        lim = self.pair_limits(alpha, side)
        if self.contrast == "difference":  # the spread is the largest pairwise difference
            return float(max(0.0, np.nanmax(lim)))
        return float(min(1.0, max(0.0, np.nanmin(lim))))  # parity is the smallest pairwise ratio

    def p_value(self, bound: float, direction: str) -> float:
        return invert_limit(self.limit, float(bound), direction)

    def _pair_se(self, alpha: float | None = None) -> np.ndarray:
        se = np.array([_se(g, alpha) for g in self.groups])
        if self.contrast == "difference":
            return np.sqrt(se[:, None] ** 2 + se[None, :] ** 2)
        e = np.array([g.estimate for g in self.groups])
        best = max(float(e.max()), 1e-12)  # theta_g - r theta_h per unit of theta_h, at the best group
        return np.sqrt(se[:, None] ** 2 + se[None, :] ** 2) / best

    def power(self, bound: float, direction: str, effect: float, alpha: float) -> float:
        se = self._pair_se(alpha / self.selection)
        np.fill_diagonal(se, np.nan)
        return _normal_power(effect, float(np.nanmax(se)), alpha / self.selection)

    def se_at(self, value: float) -> float | None:
        e = np.array([g.estimate for g in self.groups])
        i, j = int(np.argmax(e)), int(np.argmin(e))
        if i == j:
            return float(self._pair_se()[0, 1]) if len(e) > 1 else None
        return float(self._pair_se()[i, j])

    def scaled(self, factor: float) -> "Pairs":
        return _display(dataclasses.replace(self, groups=tuple(g.scaled(factor) for g in self.groups),
                                            n_units=int(math.ceil(self.n_units * factor))))

    def record(self) -> dict:
        return {**super().record(), "selection": self.selection, "contrast": self.contrast}


def pair_limit(contrast: str, side: str, g, gl, gh, h, hl, hh) -> np.ndarray:
    """The limit on ``side`` of ``theta_g - theta_h`` (MOVER) or ``theta_g / theta_h`` (MOVER-R) from each group's
    value and limits; broadcasts over pair tables and simulated runs.
    """
    if contrast == "ratio":
        return _mover_ratio(g, gl, gh, h, hl, hh, side)
    if side == "low":
        return (g - h) - np.sqrt((g - gl) ** 2 + (hh - h) ** 2)
    return (g - h) + np.sqrt((gh - g) ** 2 + (h - hl) ** 2)


def _mover_ratio(g, gl, gh, h, hl, hh, side: str) -> np.ndarray:
    """MOVER-R limits of ``theta_g / theta_h`` (Donner & Zou 2012), vectorised; ``inf`` where the
    denominator's limit reaches 0 (the ratio is then unbounded on that side)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a denominator's limit near 0: inf
        if side == "high":
            disc = (g * h) ** 2 - gh * hl * (2 * g - gh) * (2 * h - hl)
            den = hl * (2 * h - hl)
            out = (g * h + np.sqrt(np.maximum(disc, 0.0))) / den
            bad = (hl <= 0) | (den <= 0) | (disc < 0)
            return np.where(bad, np.inf, out)
        disc = (g * h) ** 2 - gl * hh * (2 * g - gl) * (2 * h - hh)
        den = hh * (2 * h - hh)
        out = (g * h - np.sqrt(np.maximum(disc, 0.0))) / den
        bad = (den <= 0) | (disc < 0) | (gl <= 0)
        return np.where(bad, 0.0, np.maximum(out, 0.0))


def pairs(groups: Mapping[str, Interval] | Sequence[Interval], *, contrast: str = "difference",
          confidence: float = 0.95) -> Pairs:
    """Best minus worst (``contrast="difference"``) or worst / best (``"ratio"``) of ``groups``, every ordered
    pair counted (:class:`Pairs`).

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> g = [precision_interval(np.r_[np.ones(k, bool), np.zeros(6 - k, bool)]) for k in (6, 0)]
        >>> s = pairs(g)
        >>> s.estimate, round(s.low, 3), s.high, s.selection     # 6/6 minus 0/6: inside [0, 1]
        (1.0, 0.267, 1.0, 2)
    """
    labels, ivs = _check_groups(groups, 2)
    if contrast not in ("difference", "ratio"):
        raise ValueError(f"`contrast` must be 'difference' or 'ratio', but got {contrast!r}")
    e = [g.estimate for g in ivs]
    best, worst = max(e), min(e)
    if contrast == "difference":
        value, method = best - worst, f"best minus worst of {len(ivs)} groups (MOVER, Bonferroni over ordered pairs)"
    else:
        value = 1.0 if best <= 0 else worst / best
        method = f"worst / best of {len(ivs)} groups (MOVER-R, Bonferroni over ordered pairs)"
    ev = Pairs(float(value), 0.0, 0.0, method, float(confidence), min(g.n_units for g in ivs),
               labels=labels, groups=ivs, contrast=contrast)
    return _display(ev)
