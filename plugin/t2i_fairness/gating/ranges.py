"""Which values a gate's number can take, by its kind: the one table bounds are checked against.

A study method declares its kind (:func:`~t2i_fairness.families.base.indicator`) and, when it
differs from the kind's, its ``value_range``. A bound no value can meet (``min: 5.0`` on a share)
is refused when the file is read (usage error, exit 4); one that can never fail is kept and listed.
"""

from __future__ import annotations

import math
from typing import Mapping

__all__ = ["KIND_RANGES", "Range", "bound_outside", "bounds_outside", "describe"]

Range = tuple[float | None, float | None]  # (lowest, highest) value; None: unbounded on that side

#: kind (an indicator method's) -> the values a gate of that kind measures
KIND_RANGES: dict[str, Range] = {
    "share": (0.0, 1.0),  # a share of images (precision, CIS)
    "coverage": (0.0, 1.0),  # a share of the real images covered
    "worst": (0.0, 1.0),  # the lowest (or highest) of several groups' shares
    "spread": (-1.0, 1.0),  # best minus worst, an improvement, a drop per component: differences of shares
    "ratio": (0.0, None),  # ratios of shares (parity, disparity)
    "percentile": (-1.0, 1.0),  # a low percentile of cosine similarities (DIG In's consistency)
    "hoeffding": (0.0, 1.0),  # word-level |influence| and representation gap: absolute differences of shares
    "test": (0.0, 1.0),  # a hypothesis test's p-value
    "score": (-1.0, 1.0),  # a mean of cosine similarities (IndicTTI's CLGC, IGC, LGC, SCWL, SCAL)
}


def describe(rng: Range) -> str:
    """``[0, 1]``, ``>= 0``, ``any value``.

    Example:
        >>> describe((0.0, 1.0)), describe((0.0, None)), describe((None, None))
        ('[0, 1]', '>= 0', 'any value')
    """
    low, high = rng
    if low is not None and high is not None:
        return f"[{low:g}, {high:g}]"
    if low is not None:
        return f">= {low:g}"
    return f"<= {high:g}" if high is not None else "any value"


def bound_outside(direction: str, value: float, rng: Range) -> str | None:
    """Why a ``min``/``max`` bound can never be met by a value in ``rng``, or ``None`` if it can.

    Example:
        >>> bound_outside("min", 5.0, (0.0, 1.0))
        'min 5 can never be met: the values lie in [0, 1]'
        >>> bound_outside("min", -0.2, (0.0, 1.0)) is None, bound_outside("max", 1.0, (0.0, 1.0)) is None
        (True, True)
    """
    low, high = rng
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return None  # what a bound may be at all is bound_problem's (gating.thresholds)
    never = (direction == "min" and high is not None and value > high) or (
        direction == "max" and low is not None and value < low)
    return f"{direction} {value:g} can never be met: the values lie in {describe(rng)}" if never else None


def bounds_outside(thresholds, ranges: Mapping[str, tuple[str, Range]]) -> list[str]:
    """One ``file:line: ...`` message per bound of a thresholds file that no value of its gate's range can meet.

    ``ranges``: test function -> ``(kind, range)``; a gate whose function is not in it is not checked.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(path="t.yaml", bound_lines={"test_cis[k1]": 3}, gates={"test_cis[k1]": NS(direction="min", value=5.0),
        ...        "test_cis[k2]": NS(direction="min", value=0.5), "mine": NS(direction="min", value=9)})
        >>> bounds_outside(t, {"test_cis": ("share", (0.0, 1.0))})
        ["t.yaml:3: gate 'test_cis[k1]': min 5 can never be met: the values lie in [0, 1] (test_cis is a share gate)"]
    """
    out = []
    for gate, bound in thresholds.gates.items():
        function = gate.split("[", 1)[0]
        if function not in ranges:
            continue
        kind, rng = ranges[function]
        why = bound_outside(bound.direction, bound.value, rng)
        if why:
            out.append(f"{thresholds.path}:{thresholds.bound_lines.get(gate, '?')}: gate {gate!r}: {why} "
                       f"({function} is a {kind} gate)")
    return out
