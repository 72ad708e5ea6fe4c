"""Two runs' gates compared: per gate the change, its interval, and whether it is a change beyond noise.

A change is ``b - a`` (the later run minus the earlier). Its standard error is
``sqrt(se_a^2 + se_b^2)``: the runs' samples are independent (other seeds), or share prompts and
seeds (``paired``), where the same seeds make the two estimates positively correlated and the
independent standard error is conservative (the store keeps each gate's estimate and standard
error, not its per-image scores, so no tighter paired interval can be made from it); two runs of
one sample that measured the same value show no change at all. Each gate's two-sided p-value of
"no change" is adjusted across the gates compared (Holm: the chance of calling any unchanged gate
changed stays within the level); a *regression* is a change beyond noise in the gate's failing
direction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

from t2i_fairness.history.store import GateRow

__all__ = ["GateChange", "compare_gates"]


@dataclass(frozen=True)
class GateChange:
    """One gate across two runs.

    Attributes:
        delta, interval: ``b - a`` and its interval at ``1 - alpha`` (two-sided, not adjusted); None when not compared.
        pairing: ``paired`` (same prompts and seeds) or ``independent``.
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


def _one(gate: str, a: GateRow | None, b: GateRow | None, z: float) -> GateChange:
    if a is None or b is None:
        return GateChange(gate, a, b, note="only in run " + ("B" if a is None else "A"))
    if not (_usable(a) and _usable(b)):
        return GateChange(gate, a, b, note="no value in one run (undefined)")
    paired = bool(a.sample) and a.sample == b.sample
    pairing = "paired" if paired else "independent"
    delta = b.value - a.value
    if a.se is None or b.se is None:
        return GateChange(gate, a, b, delta=delta, pairing=pairing,
                          note="no standard error (a hypothesis test without an estimate's interval): not compared")
    se = math.hypot(a.se, b.se)
    if paired and delta == 0.0:  # one sample measured alike: no change, exactly
        return GateChange(gate, a, b, delta=0.0, interval=(0.0, 0.0), pairing=pairing, p_value=1.0)
    if se <= 0.0:  # both exact: any difference is a change
        p = 1.0 if delta == 0.0 else 0.0
        return GateChange(gate, a, b, delta=delta, interval=(delta, delta), pairing=pairing, p_value=p)
    p = 2.0 * (1.0 - NormalDist().cdf(abs(delta) / se))
    return GateChange(gate, a, b, delta=delta, interval=(delta - z * se, delta + z * se), pairing=pairing, p_value=p)


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
    changes = [_one(g, by_a.get(g), by_b.get(g), z) for g in sorted(set(by_a) | set(by_b))]
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
