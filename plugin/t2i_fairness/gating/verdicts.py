"""Threshold gates: the YAML file, the verdict on one measurement, and what to write back.

Semantics follow pytest-regressions and syrupy: nothing new passes silently.
- A gate missing from the file fails, and its measured value is proposed in ``<file>.proposed.yaml``.
- ``--t2i-update-thresholds`` writes measured values and reports each change, but refuses to loosen
  a gate (lower a ``min``, raise a ``max``) unless ``--t2i-allow-loosen`` is given.
- Every gate records the provenance it was set under; a measurement made under other settings
  warns, so a bound is never silently compared with a number it was not meant for.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from t2i_fairness.gating.thresholds import (  # noqa: F401  (re-exported: the gate's vocabulary)
    Bound,
    Direction,
    ThresholdFile,
    ThresholdFileError,
    proposed_path,
    provenance_id,
)

DECIMALS = 6


@dataclass
class Measurement:
    """One indicator value as a gate sees it.

    ``interval`` is a (low, high) confidence interval when one was computed; ``details`` holds
    what a person triaging a failure wants (per-object values, group sizes).
    """

    gate: str
    value: float
    n: int
    direction: Direction = "min"
    interval: tuple[float, float] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["interval"] = list(self.interval) if self.interval is not None else None
        return d


def safe_round(value: float, direction: Direction) -> float:
    """Round to 6 decimals towards passing, so the measured value itself passes the written bound.

    Example:
        >>> safe_round(0.12345678, "min"), safe_round(0.12345612, "max")
        (0.123456, 0.123457)
    """
    if not math.isfinite(value):
        return value
    scale = 10**DECIMALS
    if not math.isfinite(value * scale) or abs(value) >= 2**52 / scale:
        return value  # too large for 6 decimals to matter (or to round without overflow)
    if direction == "min":
        out = math.floor(value * scale) / scale
        return out if out <= value else out - 1 / scale
    out = math.ceil(value * scale) / scale
    return out if out >= value else out + 1 / scale


def passes(value: float, bound: Bound, interval: tuple[float, float] | None = None, mode: str = "point") -> bool:
    """``point``: the estimate meets the bound. ``significant``: some of the interval does (fail only
    when the whole interval misses); without an interval, significant falls back to the estimate."""
    if math.isnan(value):
        return False
    if mode == "significant" and interval is not None:
        value = interval[1] if bound.direction == "min" else interval[0]
    return value >= bound.value if bound.direction == "min" else value <= bound.value


def loosens(new: float, old: Bound) -> bool:
    return new < old.value if old.direction == "min" else new > old.value


def provenance_diff(stored: dict | None, current: dict) -> dict[str, tuple[Any, Any]]:
    """Fields whose value differs: name -> (stored, current)."""
    if stored is None:
        return {}
    keys = sorted(set(stored) | set(current))
    return {k: (stored.get(k), current.get(k)) for k in keys if stored.get(k) != current.get(k)}


@dataclass
class Verdict:
    """What the gate decided and what the controller should write."""

    status: Literal["pass", "fail", "missing", "written", "refused"]
    bound: Bound | None
    message: str
    write: float | None = None  # new bound to write (update mode) or propose (missing)
    provenance_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "missing", "refused")


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def evaluate(
    m: Measurement,
    thresholds: ThresholdFile,
    provenance: dict,
    *,
    update: bool = False,
    allow_loosen: bool = False,
    mode: str = "point",
) -> Verdict:
    """Decide one gate.

    Example:
        >>> t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.5)})
        >>> evaluate(Measurement("g", 0.6, n=10), t, {}).status
        'pass'
        >>> evaluate(Measurement("g", 0.4, n=10), t, {}, update=True).status
        'refused'
    """
    bound = thresholds.gates.get(m.gate)
    stored = thresholds.provenances.get(bound.provenance) if bound and bound.provenance else None
    changes = provenance_diff(stored, provenance)
    interval = f" [{_fmt(m.interval[0])}, {_fmt(m.interval[1])}]" if m.interval else ""
    measured = f"measured {_fmt(m.value)}{interval} (n={m.n})"
    where = f"{thresholds.path}"
    if bound is None:
        proposal = None if math.isnan(m.value) else safe_round(m.value, m.direction)
        if update and proposal is not None:
            return Verdict("written", None, f"{m.gate}: new gate {m.direction}: {proposal} written to {where}", proposal)
        if proposal is None:
            return Verdict("missing", None, f"{m.gate}: no gate in {where}; {measured}: not a finite number, nothing to propose.")
        return Verdict(
            "missing",
            None,
            f"{m.gate}: no gate in {where}; {measured}. Proposed `{m.direction}: {proposal}` in "
            f"{proposed_path(thresholds.path)}: review it and copy it over, or run with --t2i-update-thresholds.",
            proposal,
        )
    ok = passes(m.value, bound, m.interval, mode)
    text = f"{m.gate}: {measured}, bound {bound.direction} {bound.value:g}" + (" (significant mode)" if mode == "significant" else "")
    if update and not math.isnan(m.value):
        new = safe_round(m.value, bound.direction)
        if loosens(new, bound) and not allow_loosen:
            return Verdict("refused", bound, f"{text}: refusing to loosen the gate to {new:g} without --t2i-allow-loosen", None, changes)
        if new != bound.value or changes:
            return Verdict("written", bound, f"{text}: bound {bound.value:g} -> {new:g}", new, changes)
        return Verdict("pass", bound, text, None, changes)
    return Verdict("pass" if ok else "fail", bound, text + ("" if ok else " FAILED"), None, changes)
