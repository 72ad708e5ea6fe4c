"""The verdict on one measurement against its bound, and the bound the update flow writes.

A gate is a decision procedure (arithmetic in :mod:`t2i_fairness.metrics.decisions`): ``fail``
when the estimate misses the bound with a significant one-sided p-value at the run's level,
``pass`` when it meets the bound, ``inconclusive`` otherwise; ``--t2i-gate point`` compares the
estimate alone, and a hypothesis-test gate fails when its own H0 is rejected. The rules, the
update flow's margin and policy bounds are in docs/decisions.md and docs/thresholds.md.
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
    bound_problem,
    proposed_path,
    provenance_id,
)
from t2i_fairness.metrics.decisions import GateLevel
from t2i_fairness.metrics.intervals import bound_cannot_fail  # noqa: F401  (re-exported: reports call it here)

DECIMALS = 6
#: The smallest p-value a sampled measurement reports (the largest: the float below 1): the normal tail in
#: float64 is 0 beyond 38 standard errors and 1 beyond 8.3; neither is a claim a sample can make.
P_FLOOR = 1e-300
#: A standard error at most this (relative to max(1, |estimate|)) is float noise around 0 (2.3e-17 from
#: identical images), not a measured uncertainty.
SE_NOISE = 1e-12


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
    uncertainty: Any = field(default=None, repr=False)  # a metrics.intervals.Interval (se, df, n_effective)
    replicates: Any = field(default=None, repr=False)  # bootstrap replicates (when no Interval is known)
    confidence: float = 0.95  # of ``interval``
    test: Any = field(default=None, repr=False)  # a metrics.decisions.HypothesisTest: the gate is that test

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("uncertainty", "replicates")}
        d["interval"] = list(self.interval) if self.interval is not None else None
        return d

    def se_at(self, value: float) -> float:
        """The standard error a test of ``true value == value`` uses (0 when nothing says otherwise)."""
        if self.uncertainty is not None:
            se = self.uncertainty.se_at(value)
            if se is not None:
                return float(se)
        if self.replicates is not None and len(self.replicates) > 1:
            import numpy as np

            return float(np.std(self.replicates, ddof=1))
        if self.interval is not None:
            from scipy.stats import norm

            return max(0.0, (self.interval[1] - self.interval[0]) / (2 * norm.ppf(0.5 + self.confidence / 2)))
        return 0.0

    def p_value(self, bound: float) -> float:
        """One-sided p-value of H0 "the true value meets ``bound``" (small: evidence it does not); a
        hypothesis-test gate's own p-value (``test``) whatever the bound."""
        from t2i_fairness.metrics import decisions

        if self.test is not None:
            return float(self.test.p_value)
        if self.uncertainty is not None and hasattr(self.uncertainty, "p_value") and (
                self.uncertainty.se_at(bound) is not None or self.uncertainty.is_share):
            p = self.uncertainty.p_value(bound, self.direction)  # the gate's own test (exact for shares)
        elif self.replicates is not None and len(self.replicates) > 1:
            return decisions.p_value_bootstrap(self.value, self.replicates, bound, self.direction)
        else:
            p = decisions.p_value_normal(self.value, self.se_at(bound), bound, self.direction)
        # a sampled value is never certain: the normal tail's float saturation is not a 0 or a 1
        return min(max(p, P_FLOOR), math.nextafter(1.0, 0.0))


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

    status: Literal["pass", "fail", "inconclusive", "missing", "written", "refused"]
    bound: Bound | None
    message: str
    write: float | None = None  # new bound to write (update mode) or propose (missing)
    provenance_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    p_value: float | None = None  # one-sided, against the bound (None: no bound, or point mode)
    threshold: float | None = None  # the run-time significance level it was held to
    write_margin: float | None = None  # how far the written/proposed bound is from the estimate
    write_level: float | None = None  # the probability that an equivalent model passes it
    blocking_inconclusive: bool = False  # --t2i-inconclusive fail

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "missing", "refused") or (self.status == "inconclusive" and self.blocking_inconclusive)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


#: The floor of a written bound's margin, relative to max(1, |estimate|): a value with no measured
#: uncertainty (a deterministic score) still differs in the 5th decimal between CPUs and batch
#: compositions, which must never fail a gate.
FLOAT_MARGIN = 1e-4


def share_se_floor(value: float, n_effective: float) -> float:
    """The standard error of a share taken at Agresti and Coull's adjusted share and size.

    A share at 0 or 1 has zero standard error; the update flow uses the larger of the two, so a bound
    written from it is not failed by an equivalent model's next sample (docs/decisions.md).

    Example:
        >>> round(share_se_floor(1.0, 18), 4), round(share_se_floor(0.5, 18), 4)
        (0.0606, 0.107)
    """
    from t2i_fairness.metrics.intervals import agresti_coull

    return agresti_coull(min(max(float(value), 0.0), 1.0) * float(n_effective), n_effective)[1]


def bound_for(m: Measurement, direction: Direction, level: float) -> tuple[float | None, float, str | None]:
    """The bound the update flow writes for ``m``: ``(bound, margin, problem)``.

    ``bound = estimate -+ margin`` with ``margin = max(q_level * sqrt(2) * se, float margin)``, kept
    inside [0, 1] for shares and rounded towards passing; ``problem`` says why no bound can be written.

    Example:
        >>> b, margin, problem = bound_for(Measurement("g", 0.8, n=100, interval=(0.7, 0.9)), "min", 0.99)
        >>> round(b, 4), round(margin, 4), problem
        (0.6321, 0.1679, None)
    """
    from t2i_fairness.metrics.decisions import bound_from_estimate

    if not math.isfinite(m.value):
        return None, 0.0, f"the measured value is {m.value}, not a finite number"
    se = m.se_at(m.value)
    if not math.isfinite(se):
        return None, 0.0, f"its standard error is {se}"
    n_eff = getattr(m.uncertainty, "n_effective", None)
    if n_eff:  # a share: never take its error as 0 at 0 or 1 (Agresti-Coull's adjusted share and n)
        se = max(se, share_se_floor(m.value, n_eff))
    # a standard error estimated from few units (the interval's degrees of freedom): t, not z
    ub = bound_from_estimate(m.value, se, direction, pass_probability=level, df=getattr(m.uncertainty, "df", None))
    margin = max(abs(m.value - ub.bound), FLOAT_MARGIN * max(1.0, abs(m.value)))
    raw = m.value - margin if direction == "min" else m.value + margin
    if n_eff:  # a share lies in [0, 1]: a bound beyond an edge says no more than the edge (and reads as a typo)
        raw = min(max(raw, 0.0), 1.0)
    bound = safe_round(raw, direction)
    problem = bound_problem(bound)
    return (None, margin, problem) if problem else (bound, float(f"{abs(m.value - bound):.6g}"), None)


def evaluate(
    m: Measurement,
    thresholds: ThresholdFile,
    provenance: dict,
    *,
    update: bool = False,
    allow_loosen: bool = False,
    mode: str = "significant",
    level: GateLevel = GateLevel(),
    inconclusive: str = "warn",
    bound_level: float = 0.99,
) -> Verdict:
    """Decide one gate at run time.

    Args:
        provenance: the settings ``m`` was measured under.
        update, allow_loosen: the update flow (``--t2i-update-thresholds``, ``--t2i-allow-loosen``).
        mode: ``significant`` (p-values, three verdicts) or ``point`` (the estimate alone).
        level: the run's per-gate level (``alpha / m`` over its ``m`` gates under Holm or BH).
        bound_level: the probability that an equivalent model passes a bound the update flow writes.

    Example:
        >>> t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.5)})
        >>> evaluate(Measurement("g", 0.6, n=10, interval=(0.5, 0.7)), t, {}).status
        'pass'
        >>> evaluate(Measurement("g", 0.45, n=10, interval=(0.3, 0.6)), t, {}).status
        'inconclusive'
        >>> evaluate(Measurement("g", 0.2, n=100, interval=(0.15, 0.25)), t, {}).status
        'fail'
    """
    if m.test is not None:
        return evaluate_test(m, thresholds, provenance, level=level, inconclusive=inconclusive)
    bound = thresholds.gates.get(m.gate)
    stored = thresholds.provenances.get(bound.provenance) if bound and bound.provenance else None
    changes = provenance_diff(stored, provenance)
    interval = f" [{_fmt(m.interval[0])}, {_fmt(m.interval[1])}]" if m.interval else ""
    measured = f"measured {_fmt(m.value)}{interval} (n={m.n})"
    where = f"{thresholds.path}"
    write_level = float(bound_level)
    if bound is None:
        proposal, margin, problem = bound_for(m, m.direction, write_level)
        if problem is not None:
            return Verdict("missing", None, f"{m.gate}: no gate in {where}; {measured}: {problem}, nothing to propose.")
        note = f" (margin {margin:.4g} at level {write_level:g})"
        if update:
            return Verdict("written", None, f"{m.gate}: new gate {m.direction}: {proposal}{note} written to {where}",
                           proposal, write_margin=margin, write_level=write_level)
        return Verdict(
            "missing", None,
            f"{m.gate}: no gate in {where}; {measured}. Proposed `{m.direction}: {proposal}`{note} in "
            f"{proposed_path(thresholds.path)}: review it and copy it over, or run with --t2i-update-thresholds.",
            proposal, write_margin=margin, write_level=write_level,
        )
    meets = not math.isnan(m.value) and (m.value >= bound.value if bound.direction == "min" else m.value <= bound.value)
    text = f"{m.gate}: {measured}, bound {bound.direction} {bound.value:g}"
    if update and not bound.policy:
        new, margin, problem = bound_for(m, bound.direction, write_level)
        if problem is not None:
            return Verdict("refused", bound, f"{text}: cannot write a bound: {problem}", None, changes)
        if loosens(new, bound) and not allow_loosen:
            return Verdict("refused", bound, f"{text}: refusing to loosen the gate to {new:g} without --t2i-allow-loosen",
                           None, changes)
        if new != bound.value:
            return Verdict("written", bound, f"{text}: bound {bound.value:g} -> {new:g} (margin {margin:.4g} at level "
                           f"{write_level:g})", new, changes, write_margin=margin, write_level=write_level)
    if mode == "point" or math.isnan(m.value):
        return Verdict("pass" if meets else "fail", bound, text + ("" if meets else " FAILED"), None, changes)
    from t2i_fairness.metrics.decisions import decide

    threshold = level.value
    if m.replicates is None and not m.se_at(bound.value) > SE_NOISE * max(1.0, abs(m.value)):
        # no measured uncertainty at the bound: a sampled value is never certain, so no p-value (not 0 or 1)
        if meets:
            return Verdict("pass", bound, f"{text}; no uncertainty measured at the bound (se 0): passes on its "
                           "estimate, no p-value", None, changes, None, threshold)
        blocking = inconclusive == "fail"
        return Verdict("inconclusive", bound, f"{text} INCONCLUSIVE: the estimate misses the bound but its "
                       "uncertainty is not measured (se 0), so there is no evidence either way", None, changes,
                       None, threshold, blocking_inconclusive=blocking)
    p = m.p_value(bound.value)
    status = decide(m.value, bound.value, bound.direction, p, threshold)
    stats = f"; p = {p:.3g} (one-sided{_basis_words(m.uncertainty)}, vs {threshold:.3g}: {level.text})"
    if status == "fail":
        return Verdict("fail", bound, f"{text}{stats} FAILED", None, changes, p, threshold)
    if status == "inconclusive":
        blocking = inconclusive == "fail"
        tail = " INCONCLUSIVE" + (" (--t2i-inconclusive fail)" if blocking else ": the estimate misses the bound but "
                                  "the evidence does not decide at this sample size")
        return Verdict("inconclusive", bound, f"{text}{stats}{tail}", None, changes, p, threshold,
                       blocking_inconclusive=blocking)
    return Verdict("pass", bound, text + stats, None, changes, p, threshold)


def _basis_words(uncertainty: Any) -> str:
    """``", normal-theory t on 6 df"`` for a p-value from a normal or t tail (valid for any law of the units only
    approximately), else ``""``: exact, design-based and law-free tests need no warning."""
    if getattr(uncertainty, "basis", None) != "normal-theory":
        return ""
    df = getattr(uncertainty, "df", None)
    return f", normal-theory t on {df:g} df" if df is not None and math.isfinite(df) else ", normal-theory"


def evaluate_test(m: Measurement, thresholds: ThresholdFile, provenance: dict, *, level: GateLevel = GateLevel(),
                  inconclusive: str = "warn") -> Verdict:
    """Decide a hypothesis-test gate (``m.test``): it fails when its H0 is rejected at the run's level.

    A bound the file still holds for it is ignored (the message says so; the update flow removes it).

    Example:
        >>> from t2i_fairness.metrics.decisions import HypothesisTest
        >>> t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.03)})
        >>> m = Measurement("g", 0.0244, n=16, test=HypothesisTest(0.0244, "no order effect", "permutation", 7.1, 5e-5))
        >>> v = evaluate_test(m, t, {}, level=GateLevel(0.05, 475))
        >>> v.status, v.bound, "not used" in v.message
        ('inconclusive', None, True)
    """
    from t2i_fairness.metrics.decisions import decide_test

    test = m.test
    threshold = level.value
    p = float(test.p_value)
    status = decide_test(p, level.alpha, threshold)
    resolution = f", resolution {test.resolution:.2g}" if test.resolution else ""
    text = (f"{m.gate}: H0 {test.null}: {test.method} p = {p:.4g} (n={m.n}{resolution}; vs {threshold:.3g}: "
            f"{level.text})")
    stale = thresholds.gates.get(m.gate)
    if stale is not None:
        text += (f"; the bound `{stale.direction}: {stale.value:g}` in {thresholds.path} is not used (a test is "
                 "judged at the run's level; --t2i-update-thresholds removes it)")
    if status == "fail":
        return Verdict("fail", None, f"{text}: H0 rejected FAILED", None, {}, p, threshold)
    if status == "inconclusive":
        blocking = inconclusive == "fail"
        return Verdict("inconclusive", None, f"{text} INCONCLUSIVE: significant at alpha but not at the first step; "
                       "the run's step-down decides", None, {}, p, threshold, blocking_inconclusive=blocking)
    return Verdict("pass", None, f"{text}: H0 not rejected", None, {}, p, threshold)
