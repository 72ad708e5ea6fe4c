"""Two runs' gates compared: per gate the change, its interval, and whether it is a change beyond noise.

A change is ``b - a`` (the later run minus the earlier). Where both runs drew the same prompts and seeds
(one sample digest) and stored the units the gate's value is the mean of over the same unit ids, its
interval is the paired t interval of the units' differences (``paired``): the same seeds make the two
runs' units positively correlated, and the differences' spread carries it. Otherwise it is MOVER's
(Newcombe; Zou and Donner) from the two stored intervals (``independent``, or ``same sample`` where the
runs share prompts and seeds but a gate has no units: conservative there): each side combines the sides
of the two intervals it moves toward, so an interval asymmetric near 0 or 1 keeps its shape, and two
normal intervals give the z-test of independent samples. One sample measured alike shows no change at
all. Each gate's two-sided p-value of "no change" (the level at which the interval reaches 0) is adjusted
across the gates compared (Holm: the chance of calling any unchanged gate changed stays within the
level); a gate that had a value and lost it is listed as changed. A *regression* is a change beyond
noise in the gate's failing direction.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

from t2i_fairness.history.store import GateRow

__all__ = ["GateChange", "compare_gates"]

FAILED = ("fail", "missing", "refused")


@dataclass(frozen=True)
class GateChange:
    """One gate across two runs.

    Attributes:
        delta, interval: ``b - a`` and its interval at ``1 - alpha`` (two-sided, not adjusted); None when not compared.
        pairing: ``paired`` (the units' differences), ``same sample`` (same prompts and seeds, no units: the
            independent interval) or ``independent``.
        p_value, p_adjusted: two-sided, of "no change"; adjusted across the compared gates.
        changed: beyond noise at the level across the compared gates; ``regressed``: in the failing direction.
        note: why a gate was not compared.
    """

    gate: str
    a: GateRow | None
    b: GateRow | None
    delta: float | None = None
    interval: tuple[float, float] | None = None
    pairing: str | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    changed: bool = False
    regressed: bool = False
    note: str = ""


def _usable(row: GateRow | None) -> bool:
    return row is not None and row.value is not None and math.isfinite(row.value)


def _limits(row: GateRow) -> tuple[float, float, float] | None:
    """``(value - low, high - value, z of its level)``: the stored interval's reach down and up, or the normal one of
    its standard error; None without either."""
    conf = row.confidence if row.confidence and 0.0 < row.confidence < 1.0 else 0.95
    z = NormalDist().inv_cdf(0.5 + conf / 2)
    if row.low is not None and row.high is not None and row.low <= row.value <= row.high:
        return row.value - row.low, row.high - row.value, z
    if row.se is not None:
        return z * row.se, z * row.se, z
    return None


def _differences(a: GateRow, b: GateRow) -> list[float] | None:
    """The units' differences ``b - a`` by unit id, when both runs kept units over the same ids whose means are
    their values; None otherwise."""
    ua, ub = a.unit_values(), b.unit_values()
    if not ua or not ub or set(ua) != set(ub) or len(ua) < 2:
        return None
    for units, row in ((ua, a), (ub, b)):
        if abs(math.fsum(units.values()) / len(units) - row.value) > 1e-9 * max(1.0, abs(row.value)):
            return None
    return [ub[k] - ua[k] for k in sorted(ua)]


def _paired(gate: str, a: GateRow, b: GateRow, d: list[float], alpha: float) -> GateChange:
    """The paired t interval of the mean difference over ``G`` units (exact for normal differences, by the central
    limit theorem over the units otherwise) and its two-sided p-value."""
    from scipy import stats

    g, delta = len(d), b.value - a.value
    sd = statistics.stdev(d)
    if sd == 0.0:  # every unit moved alike: the change is exact
        return GateChange(gate, a, b, delta=delta, interval=(delta, delta), pairing="paired",
                          p_value=1.0 if delta == 0.0 else 0.0)
    se = sd / math.sqrt(g)
    half = float(stats.t.ppf(1.0 - alpha / 2, g - 1)) * se
    p = float(2.0 * stats.t.sf(abs(delta) / se, g - 1))
    return GateChange(gate, a, b, delta=delta, interval=(delta - half, delta + half), pairing="paired", p_value=p)


def _one(gate: str, a: GateRow | None, b: GateRow | None, z: float, alpha: float = 0.05) -> GateChange:
    if a is None or b is None:
        return GateChange(gate, a, b, note="only in run " + ("B" if a is None else "A"))
    if not _usable(a):
        return GateChange(gate, a, b, note="no value in run A (undefined)")
    if not _usable(b):  # it had a value and lost it (a collapsed group): a change no interval measures
        return GateChange(gate, a, b, changed=True, regressed=b.verdict in FAILED,
                          note=f"undefined in run B (A measured {a.value:.4f}); verdict {b.verdict}")
    paired = bool(a.sample) and a.sample == b.sample
    d = _differences(a, b) if paired else None
    if d is not None:
        return _paired(gate, a, b, d, alpha)
    pairing = "same sample" if paired else "independent"
    delta = b.value - a.value
    la, lb = _limits(a), _limits(b)
    if la is None or lb is None:
        return GateChange(gate, a, b, delta=delta, pairing=pairing,
                          note="no interval or standard error (a hypothesis test): not compared")
    if paired and delta == 0.0:  # one sample measured alike: no change, exactly
        return GateChange(gate, a, b, delta=0.0, interval=(0.0, 0.0), pairing="paired", p_value=1.0)
    # MOVER: each side of the difference's interval from the sides of the two intervals it moves toward
    down = math.hypot(lb[0] / lb[2], la[1] / la[2])  # B's reach down, A's up: the change's reach down (in se units)
    up = math.hypot(lb[1] / lb[2], la[0] / la[2])  # B's reach up, A's down
    reach = up if delta < 0 else down
    if reach <= 0.0:  # both exact: any difference is a change
        p = 1.0 if delta == 0.0 else 0.0
        return GateChange(gate, a, b, delta=delta, interval=(delta, delta), pairing=pairing, p_value=p)
    p = 2.0 * (1.0 - NormalDist().cdf(abs(delta) / reach))
    return GateChange(gate, a, b, delta=delta, interval=(delta - z * down, delta + z * up), pairing=pairing, p_value=p)


def compare_gates(a: Sequence[GateRow], b: Sequence[GateRow], alpha: float = 0.05,
                  method: str = "holm") -> list[GateChange]:
    """Every gate of either run, compared where both measured it; Holm (``method``) over those compared.

    Example:
        >>> row = lambda run, v, se: GateRow(run, "g", None, v, None, None, se, 0.95, 10, 0.5, "min", "pass",
        ...                                  None, None, None, "s" + str(run))
        >>> c = compare_gates([row(1, 0.8, 0.02)], [row(2, 0.6, 0.02)])[0]
        >>> round(c.delta, 3), c.changed, c.regressed, c.pairing
        (-0.2, True, True, 'independent')
    """
    from t2i_fairness.metrics.decisions import adjust_p_values

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"the level must be in (0, 1), got {alpha!r}")
    z = NormalDist().inv_cdf(1.0 - alpha / 2)
    by_a, by_b = {r.gate: r for r in a}, {r.gate: r for r in b}
    changes = [_one(g, by_a.get(g), by_b.get(g), z, alpha) for g in sorted(set(by_a) | set(by_b))]
    tested = [i for i, c in enumerate(changes) if c.p_value is not None]
    if not tested:
        return changes
    adjusted = adjust_p_values([changes[i].p_value for i in tested], method)
    for i, pa in zip(tested, adjusted):
        c = changes[i]
        changed = bool(pa <= alpha)
        worse = c.delta < 0 if (c.b.direction or "min") == "min" else c.delta > 0
        changes[i] = GateChange(c.gate, c.a, c.b, c.delta, c.interval, c.pairing, c.p_value, float(pa), changed,
                                changed and worse, c.note)
    return changes
