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
from t2i_fairness.gating.sequential.look import Look, Reason
from t2i_fairness.gating.sequential.messages import cannot_fail_clause, early_record
from t2i_fairness.gating.session import GateRecord
from t2i_fairness.gating.thresholds import ThresholdFile
from t2i_fairness.gating.verdicts import Measurement, Verdict, evaluate
from t2i_fairness.base.cache import content_key

__all__ = ["Gate", "GateContext", "bootstrap_seed", "early_record", "judge", "measure"]  # early_record: re-exported


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
    if isinstance(interval, Interval) or (hasattr(interval, "p_value") and hasattr(interval, "as_tuple")):
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

    from t2i_fairness.metrics.decisions import gate_level

    size = family_size if options.multiplicity in ("holm", "bh") else 1
    level = gate_level(options.alpha, family_size, options.multiplicity)
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
    kind: str | None = None  # the kind of a bare-value gate (an Indicator carries its own)

    @property
    def level(self) -> float:
        """The level each gate of this run is decided at (:func:`~t2i_fairness.metrics.decisions.gate_level`)."""
        from t2i_fairness.metrics.decisions import gate_level

        return gate_level(self.options.alpha, self.family_size, self.options.multiplicity)

    @property
    def level_text(self) -> str:
        from t2i_fairness.metrics.decisions import level_text

        return level_text(self.options.alpha, self.family_size, self.options.multiplicity)


class Gate:
    """``gate(indicator)`` checks a study's :class:`~t2i_fairness.gating.indicator.Indicator` against its bound
    (``gate(value, n=..., ...)`` a bare value); ``gate.undefined(reason)`` says it cannot be computed here.

    The gate id is the test's name (``test_object_consistency[object_in_region-africa]``) unless
    ``name`` is given. ``provenance`` adds what this test's number also depends on (its sample
    sizes, a prompt file digest) to the session's, so a bound is never compared silently with a
    number measured under other settings. A verdict is raised as the package's own outcome
    (:class:`~t2i_fairness.errors.GateFailed`, :class:`~t2i_fairness.errors.GateSkipped`); the plugin
    turns it into pytest's.
    """

    def __init__(self, context: GateContext):
        self.context = context

    def __call__(self, value, *, n: int | None = None, higher_is_better: bool = True, interval=None,
                 details: dict[str, Any] | None = None, name: str | None = None,
                 resample: Callable[[Any], float] | None = None, units: int | None = None, strata=None,
                 provenance: dict[str, Any] | None = None, test=None) -> Measurement:
        """``value``: an :class:`~t2i_fairness.gating.indicator.Indicator` (its value, test, kind and, under
        ``--t2i-sequential``, where it stopped), or a number with its ``n`` and ``interval``.
        ``resample(indices) -> value`` with ``units`` (and optional ``strata`` labels) gives a seeded
        percentile-bootstrap interval over those units (``--t2i-bootstrap`` resamples); ``test`` (a
        :class:`~t2i_fairness.metrics.decisions.HypothesisTest`) makes the gate that test (see :func:`measure`)."""
        __tracebackhide__ = True
        from t2i_fairness.gating.indicator import Indicator

        ctx, o = self.context, self.context.options
        gate_id = name or ctx.gate_id
        kind, seq = ctx.kind, None
        if isinstance(value, Indicator):
            ind = value
            if ind.skip is not None:
                raise GateSkipped(ind.skip)
            if ind.undefined is not None:
                self.undefined(ind.undefined, name=name, inconclusive=ind.inconclusive, sequential=ind.sequential)
                return None
            kind, seq = ind.kind, Look.of(ind.sequential)
            value, n, higher_is_better, test = ind.value, ind.n, ind.higher_is_better, ind.test
            # a test is judged by its p-value; its evidence (effect sizes) serves the round loop
            interval = None if test is not None else ind.evidence
            provenance = {**ind.provenance, **(provenance or {})}
            details = {**ind.details, **(details or {}), **({"sequential": seq.to_dict()} if seq else {})}
            if seq and not seq.early and interval is not None and hasattr(interval, "p_value"):
                from t2i_fairness.gating.sequential.rules import SequentialEvidence

                interval = SequentialEvidence(interval, float(seq.alpha_share), seq.earlier_looks_p)
        m = measure(gate_id, value, n=n, higher_is_better=higher_is_better, interval=interval, details=details,
                    resample=resample, units=units, strata=strata, bootstrap=o.bootstrap,
                    confidence=o.confidence, seed=o.seed, test=test)
        prov = {**ctx.provenance(), **(provenance or {})}
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
                                family_size=ctx.family_size, kind=kind)
        if seq and seq.early:
            record = early_record(record, seq, ctx.thresholds.gates.get(m.gate))
        ctx.emit(record)
        # a bound written under other settings is said once per run, at the top of the summary
        # (report.changes.provenance_summary), not as one warning per gate
        early_failed = record.status == "fail" or (record.status == "inconclusive" and record.blocking)
        if early_failed if (seq and seq.early) else verdict.failed:
            raise GateFailed(record.message)
        if record.status == "inconclusive":
            warnings.warn(T2IInconclusiveWarning(record.message), stacklevel=2)
        return m

    def undefined(self, reason: str, name: str | None = None, inconclusive: bool = False,
                  sequential: Look | None = None) -> None:
        """An indicator that cannot be computed here: skip while the gate has no bound, fail once it has one.

        ``inconclusive=True`` is for a value left undefined by sampling noise that another gate judges
        (a ratio whose denominator's estimate fell to 0 or below: the denominator's own gate fails if that
        is a regression): with a bound, the verdict is ``inconclusive`` (a warning, or a failure under
        ``--t2i-inconclusive fail``), never evidence of a regression by itself."""
        __tracebackhide__ = True
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
        look = Look.of(sequential)
        if look is not None:  # undefined at N after its looks, or at the look that curtailed it
            details["sequential"] = look.to_dict()
            if look.reason is Reason.CURTAIL and look.conditional_power == 0.0:
                message += f"; {cannot_fail_clause(look)}"
        # recorded like any judged gate, so the summary, run.json and a canary's tally count it
        self.context.emit(GateRecord(
            gate=gate_id, nodeid=self.context.nodeid, value=float("nan"), n=0, direction=bound.direction,
            status=status, bound=bound.value, write=None, message=message, provenance=self.context.provenance(),
            family=self.context.family, details=details, blocking=blocking and inconclusive))
        if blocking:
            raise GateFailed(message)
        warnings.warn(T2IInconclusiveWarning(message), stacklevel=2)
