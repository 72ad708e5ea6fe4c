"""Deciding one gate: :func:`judge` (plain, no pytest) and the small :class:`Gate` the ``gate`` fixture is.

``judge`` takes a measurement, the thresholds, the provenance and the run's options and returns the
:class:`~t2i_fairness.gating.session.GateRecord` that every report reads (verdict, message, bound,
interval, baseline comparison). The baseline comparison and the project's tests call it directly;
:class:`Gate` adds what a pytest test needs around it: the bootstrap interval from ``resample``, the
record attached to the test report, a provenance warning, and a failed verdict raised as
:class:`~t2i_fairness.errors.GateFailed` (gating knows nothing of pytest: the plugin makes it pytest's failure).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from t2i_fairness.errors import GateFailed, GateSkipped, T2IInconclusiveWarning
from t2i_fairness.gating.baseline import BaselineMeasurement, compare_with_baseline
from t2i_fairness.gating.session import GateRecord
from t2i_fairness.gating.thresholds import ThresholdFile
from t2i_fairness.gating.verdicts import Measurement, Verdict, evaluate
from t2i_fairness.base.cache import content_key

__all__ = ["Gate", "GateContext", "Probed", "bootstrap_seed", "judge", "measure"]


def bootstrap_seed(gate_id: str, base_seed: int) -> int:
    """The seed of a gate's bootstrap: a function of the gate id and ``--t2i-seed`` only.

    Example:
        >>> bootstrap_seed("test_cis[k1]", 0) == bootstrap_seed("test_cis[k1]", 0) != bootstrap_seed("test_cis[k2]", 0)
        True
    """
    return int(content_key(gate=gate_id, seed=base_seed)[:8], 16)


def measure(gate_id: str, value: float, *, n: int, higher_is_better: bool = True, interval=None,
            details: dict | None = None, resample: Callable[[Any], float] | None = None, units: int | None = None,
            strata=None, bootstrap: int = 0, confidence: float = 0.95, seed: int = 0, test=None) -> Measurement:
    """A :class:`~t2i_fairness.gating.verdicts.Measurement` with its uncertainty.

    ``interval`` is a :class:`~t2i_fairness.metrics.intervals.Interval` (the indicator's own method:
    its standard error and degrees of freedom give the gate's p-value) or a ``(low, high)`` pair (its
    width gives a normal standard error). Without one, ``resample(indices) -> value`` over ``units``
    (within ``strata``) gives a seeded percentile-bootstrap interval and its replicates (a shift
    p-value); without either, the estimate is taken as exact. ``test`` (a
    :class:`~t2i_fairness.metrics.decisions.HypothesisTest`) makes the gate that test: it fails when the
    test's H0 is rejected at the run's level, whatever the thresholds file says.
    """
    from t2i_fairness.metrics.intervals import Interval

    uncertainty = replicates = None
    if isinstance(interval, Interval):
        uncertainty, interval = interval, interval.as_tuple()
        confidence = uncertainty.confidence
    if interval is None and resample is not None and bootstrap > 0 and (units or 0) > 0:
        from t2i_fairness.metrics.stats import index_bootstrap

        interval, replicates = index_bootstrap(resample, int(units), strata=strata, n_resamples=bootstrap,
                                               confidence=confidence, seed=bootstrap_seed(gate_id, seed),
                                               name=gate_id, return_replicates=True)
    return Measurement(gate_id, float(value), int(n), "min" if higher_is_better else "max",
                       tuple(interval) if interval is not None else None, dict(details or {}),
                       uncertainty=uncertainty, replicates=replicates, confidence=confidence, test=test)


def judge(m: Measurement, thresholds: ThresholdFile, provenance: dict, options, *, nodeid: str = "",
          family: str | None = None, baseline: BaselineMeasurement | None = None, resample=None,
          units: int | None = None, strata=None, family_size: int = 1, kind: str | None = None
          ) -> tuple[GateRecord, Verdict]:
    """The verdict on one measurement, as the record every report reads.

    Args:
        m: the measurement.
        thresholds: the run's thresholds file.
        provenance: the settings the value was measured under.
        options: the run's :class:`~t2i_fairness.spine.options.T2IOptions` (update flow, gate mode,
            baseline settings, bootstrap).
        nodeid, family: where the gate comes from, for reports.
        baseline: the baseline run's measurement of the same gate (``--t2i-baseline-model``).
        resample, units, strata: the candidate's resampling, for the paired interval.
        family_size: the number of gates in the run (the adjustment's ``m``).
        kind: the gate's kind (``Family.sequential``): its meaningful miss, for the power record
            (:mod:`t2i_fairness.gating.power`).

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.thresholds import Bound
        >>> from t2i_fairness.spine.options import T2IOptions
        >>> t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.5)})
        >>> record, verdict = judge(Measurement("g", 0.4, n=10, interval=(0.35, 0.45)), t, {}, T2IOptions())
        >>> record.status, verdict.failed, record.p_value < 1e-4
        ('fail', True, True)
    """
    comparison = None
    if options.baseline_model and m.test is None:  # a test has its own H0; no candidate-baseline delta
        comparison = compare_with_baseline(
            m, baseline, model=options.baseline_model, allowed=options.baseline_delta, mode=options.gate_mode,
            resample=resample, units=units, strata=strata, n_resamples=options.bootstrap,
            confidence=options.confidence, seed=bootstrap_seed(m.gate, options.seed))
        m.details["baseline"] = comparison
    verdict = evaluate(m, thresholds, provenance, update=options.update_thresholds,
                       allow_loosen=options.allow_loosen, mode=options.gate_mode, alpha=options.alpha,
                       family_size=family_size, multiplicity=options.multiplicity,
                       inconclusive=options.inconclusive, bound_level=options.bound_level)
    if comparison is not None and comparison.get("failed") and not verdict.failed:
        verdict.status, verdict.message = "fail", f"{verdict.message}; {comparison['message']}"
    power = None
    if verdict.bound is not None and m.test is None and options.gate_mode != "point" and verdict.threshold:
        from t2i_fairness.gating.power import power_record, power_words

        power = power_record(m.uncertainty, verdict.bound.value, verdict.bound.direction, verdict.threshold, kind, m.n)
        words = power_words(power, verdict.status)
        if words:
            verdict.message = f"{verdict.message}; {words}"
    record = GateRecord(
        gate=m.gate, nodeid=nodeid, value=m.value, n=m.n, direction=m.direction, status=verdict.status,
        bound=verdict.bound.value if verdict.bound else None, write=verdict.write, message=verdict.message,
        provenance=provenance, interval=list(m.interval) if m.interval else None,
        provenance_changes={k: list(v) for k, v in verdict.provenance_changes.items()}, details=m.details,
        family=family, p_value=verdict.p_value, threshold=verdict.threshold,
        mde=minimum_detectable(m, verdict.bound.value if verdict.bound else m.value, options, family_size),
        uncertainty=uncertainty_record(m), write_margin=verdict.write_margin, write_level=verdict.write_level,
        blocking=verdict.blocking_inconclusive,
        bound_provenance=verdict.bound.provenance if verdict.bound else None, power=power,
    )
    return record, verdict


def minimum_detectable(m: Measurement, at: float, options, family_size: int) -> float | None:
    """The smallest shift of the true value beyond ``at`` the gate detects with 80% power at the run's level:
    from its own test (:meth:`~t2i_fairness.metrics.intervals.Interval.power`: exact for a share, the
    selection counted for worst-of and pairwise gates), else the normal formula from its standard error."""
    import math

    from t2i_fairness.metrics.decisions import minimum_detectable_effect

    size = family_size if options.multiplicity in ("holm", "bh") else 1
    level = options.alpha / max(1, size)
    if m.uncertainty is not None and hasattr(m.uncertainty, "power") and math.isfinite(at):
        from t2i_fairness.metrics.evidence import minimum_detectable as detectable

        try:
            return detectable(m.uncertainty, at, m.direction, level, power=0.8)
        except ValueError:
            pass
    se = m.se_at(at)
    if not math.isfinite(se) or se <= 0:
        return None
    return float(minimum_detectable_effect(se, alpha=options.alpha, power=0.8, family_size=max(1, size)))


def uncertainty_record(m: Measurement) -> dict | None:
    """What the gate's p-value rests on, for reports: the interval method, standard error, units."""
    if m.test is not None:
        return {"method": f"hypothesis test: {m.test.method}", "null": m.test.null, "statistic": m.test.statistic,
                "resolution": m.test.resolution, "se": None}
    if m.uncertainty is not None:
        return m.uncertainty.record()
    if m.replicates is not None:
        return {"method": "percentile bootstrap", "replicates": int(len(m.replicates)), "se": m.se_at(m.value),
                "confidence": m.confidence}
    if m.interval is not None:
        return {"method": "interval (normal approximation from its width)", "se": m.se_at(m.value),
                "confidence": m.confidence}
    return {"method": "none: the estimate is taken as exact", "se": 0.0}


@dataclass
class GateContext:
    """What a :class:`Gate` needs from its test session (the fixture builds one per test).

    Attributes:
        gate_id: the test's gate id (its name, the baseline/candidate part removed).
        nodeid: the test's node id.
        family: the paper family of the test's module, if any.
        options: the run's options.
        thresholds: the run's thresholds file.
        provenance: the workbench's provenance (settings, versions, device).
        role: ``candidate``, or ``baseline`` for the baseline model's run of the test.
        baselines: gate id -> the baseline's measurement, shared by the process.
        emit: called with every record (the fixture attaches it to the test report, and Allure).
    """

    gate_id: str
    nodeid: str
    family: str | None
    options: Any
    thresholds: ThresholdFile
    provenance: Callable[[], dict]
    role: str = "candidate"
    baselines: dict = field(default_factory=dict)
    emit: Callable[[GateRecord], None] = lambda record: None
    family_size: int = 1  # the number of gates in the run
    kind: str | None = None  # the test's sequential kind (Family.sequential), under --t2i-sequential


class Probed(Exception):
    """Raised by a probing :class:`Gate` (``--t2i-sequential``'s looks) instead of deciding: the test's
    measurement at this look and how it was made (``sweeps``; ``None`` when the test gave none or the
    value is undefined here)."""

    def __init__(self, measurement: Measurement | None, sweeps=None):
        super().__init__("a look of --t2i-sequential (not an error)")
        self.measurement, self.sweeps = measurement, sweeps


class Gate:
    """``gate(value, n=..., ...)`` checks a measured indicator against its bound; ``gate.undefined(reason)``
    says it cannot be computed here.

    The gate id is the test's name (``test_object_consistency[object_in_region-africa]``) unless
    ``name`` is given. ``provenance`` adds what this test's number also depends on (its sample
    sizes, a prompt file digest) to the session's, so a bound is never compared silently with a
    number measured under other settings.
    """

    def __init__(self, context: GateContext, *, probe: bool = False, stop: dict | None = None):
        self.context = context
        self.probe = probe  # --t2i-sequential: measure, raise Probed, decide nothing
        self.stop = stop  # --t2i-sequential: the gate's record (details["sequential"]) once it stopped

    def probing(self) -> "Gate":
        """This gate at a look of ``--t2i-sequential``: calling it raises :class:`Probed`."""
        return Gate(self.context, probe=True)

    def stopped(self, record: dict) -> "Gate":
        """This gate deciding with the sequential ``record`` (an early stop, or ``ran to N``)."""
        return Gate(self.context, stop=record)

    def __call__(self, value: float, *, n: int, higher_is_better: bool = True, interval=None,
                 details: dict[str, Any] | None = None, name: str | None = None,
                 resample: Callable[[Any], float] | None = None, units: int | None = None, strata=None,
                 provenance: dict[str, Any] | None = None, test=None, sweeps=None) -> Measurement:
        """``resample(indices) -> value`` with ``units`` (and optional ``strata`` labels) gives a seeded
        percentile-bootstrap interval over those units (``--t2i-bootstrap`` resamples); ``test`` (a
        :class:`~t2i_fairness.metrics.decisions.HypothesisTest`) makes the gate that test (see :func:`measure`).
        ``sweeps`` (a :class:`~t2i_fairness.metrics.sequential.Sweeps`) says how the value is made from
        images, for ``--t2i-sequential``'s early stops (ignored otherwise)."""
        __tracebackhide__ = True
        ctx, o = self.context, self.context.options
        gate_id = name or ctx.gate_id
        if self.probe:
            m = measure(gate_id, value, n=n, higher_is_better=higher_is_better, interval=interval, details=details,
                        confidence=o.confidence, seed=o.seed, test=test)
            raise Probed(m, sweeps)
        m = measure(gate_id, value, n=n, higher_is_better=higher_is_better, interval=interval, details=details,
                    resample=resample, units=units, strata=strata, bootstrap=o.bootstrap,
                    confidence=o.confidence, seed=o.seed, test=test)
        prov = {**ctx.provenance(), **(provenance or {})}
        if o.sequential and ctx.role != "baseline":
            return self._sequential(m, prov, resample, units, strata)
        if ctx.role == "baseline":
            ctx.baselines[gate_id] = BaselineMeasurement(m, resample, units, strata)
            ctx.emit(GateRecord(
                gate=m.gate, nodeid=ctx.nodeid, value=m.value, n=m.n, direction=m.direction, status="baseline",
                bound=None, write=None, message=f"{m.gate}: baseline {o.baseline_model} measured {m.value:.4f}",
                provenance=prov, interval=list(m.interval) if m.interval else None, details=m.details,
                family=ctx.family))
            return m
        record, verdict = judge(m, ctx.thresholds, prov, o, nodeid=ctx.nodeid, family=ctx.family,
                                baseline=ctx.baselines.get(gate_id), resample=resample, units=units, strata=strata,
                                family_size=ctx.family_size, kind=ctx.kind)
        ctx.emit(record)
        # a bound written under other settings is said once per run, at the top of the summary
        # (report.changes.provenance_summary), not as one warning per gate
        if verdict.failed:
            raise GateFailed(verdict.message)
        if verdict.status == "inconclusive":
            warnings.warn(T2IInconclusiveWarning(verdict.message), stacklevel=2)
        return m

    def _sequential(self, m: Measurement, prov: dict, resample, units, strata) -> Measurement:
        """The verdict under ``--t2i-sequential``: an early stop's (fail: the e-process excluded the bound;
        pass: the bound met, or futility), or the fixed-N test at ``alpha / 2`` (the other half of the
        run's level is the early fails'); the record says which, in ``details["sequential"]``."""
        __tracebackhide__ = True
        import dataclasses

        from t2i_fairness.gating.sequential import stopped_verdict

        ctx = self.context
        record = dict(self.stop) if self.stop is not None else _ran_to_n(ctx.kind)
        m.details["sequential"] = record
        level = dataclasses.replace(ctx.options, alpha=ctx.options.alpha / 2)
        rec, verdict = judge(m, ctx.thresholds, prov, level, nodeid=ctx.nodeid, family=ctx.family,
                             resample=resample, units=units, strata=strata, family_size=ctx.family_size, kind=ctx.kind)
        if record.get("early"):
            bound = ctx.thresholds.gates[m.gate]
            status, message, p = stopped_verdict(m.gate, m.value, record, bound)
            rec = dataclasses.replace(rec, status=status, message=message, p_value=p, threshold=None, blocking=False)
        ctx.emit(rec)
        if (rec.status == "fail") if record.get("early") else verdict.failed:
            raise GateFailed(rec.message)
        if rec.status == "inconclusive":
            warnings.warn(T2IInconclusiveWarning(rec.message), stacklevel=3)
        return m

    def undefined(self, reason: str, name: str | None = None, inconclusive: bool = False) -> None:
        """An indicator that cannot be computed here: skip while the gate has no bound, fail once it has one.

        ``inconclusive=True`` is for a value left undefined by sampling noise that another gate judges
        (a ratio whose denominator's estimate fell to 0 or below: the denominator's own gate fails if that
        is a regression): with a bound, the verdict is ``inconclusive`` (a warning, or a failure under
        ``--t2i-inconclusive fail``), never evidence of a regression by itself."""
        __tracebackhide__ = True
        if self.probe:
            raise Probed(None)
        gate_id = name or self.context.gate_id
        thresholds = self.context.thresholds
        if gate_id not in thresholds.gates:
            raise GateSkipped(reason)
        bound = thresholds.gates[gate_id]
        if inconclusive:
            status, blocking = "inconclusive", self.context.options.inconclusive == "fail"
            message = f"{gate_id}: {reason}; inconclusive (the gate has a bound in {thresholds.path})"
        else:
            status, blocking = "fail", True
            message = f"{gate_id}: {reason}; the gate has a bound in {thresholds.path}, so it cannot pass"
        details: dict[str, Any] = {"undefined": reason}
        if self.context.options.sequential:  # undefined at N, after its looks (or with none)
            details["sequential"] = dict(self.stop) if self.stop is not None else _ran_to_n(self.context.kind)
        # recorded like any judged gate, so the summary, run.json and a canary's tally count it
        self.context.emit(GateRecord(
            gate=gate_id, nodeid=self.context.nodeid, value=float("nan"), n=0, direction=bound.direction,
            status=status, bound=bound.value, write=None, message=message, provenance=self.context.provenance(),
            family=self.context.family, details=details, blocking=blocking and inconclusive))
        if blocking:
            raise GateFailed(message)
        warnings.warn(T2IInconclusiveWarning(message), stacklevel=2)


def _ran_to_n(kind: str | None) -> dict:
    """The sequential record of a gate that was not looked at before ``N`` (its kind has no valid early stop)."""
    from t2i_fairness.metrics.sequential import KINDS, REASONS

    rec = {"kind": kind or "undeclared", "reason": REASONS["full"], "early": False}
    if kind is None or kind not in KINDS:
        rec["note"] = "no sequential kind declared for this test (Family.sequential): runs to N"
    elif KINDS[kind] == "fixed":
        rec["note"] = f"no valid early stop for a {kind} gate: runs to N"
    return rec
