"""Deciding one gate (plain, no pytest): :func:`decide` turns a study's indicator into the
:class:`~t2i_fairness.gating.session.GateRecord` every report reads; :class:`Gate`, the ``gate`` fixture, emits it
and raises a failed verdict as :class:`~t2i_fairness.errors.GateFailed` (the plugin makes it pytest's failure).
:func:`measure` and :func:`judge` are its steps for a bare value.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from t2i_fairness.errors import GateFailed, GateSkipped, T2IInconclusiveWarning
from t2i_fairness.gating.baseline import BaselineMeasurement, compare_with_baseline
from t2i_fairness.gating.sequential.look import Look
from t2i_fairness.gating.sequential.messages import early_record
from t2i_fairness.gating.session import GateRecord
from t2i_fairness.gating.thresholds import ThresholdFile
from t2i_fairness.gating.verdicts import Measurement, Verdict, evaluate
from t2i_fairness.metrics.decisions import GateLevel
from t2i_fairness.base.cache import content_key

__all__ = ["Gate", "GateContext", "bootstrap_seed", "decide", "early_record", "gate_provenance", "judge", "measure",
           "undefined_record", "unit_values"]


def gate_provenance(run: dict, study: dict | None = None, given: dict | None = None) -> dict:
    """The settings a gate's value was measured under: the run's (the workbench's), then its study's own
    (an indicator's ``provenance``: CIS's sample sizes), then those the test passed; later ones win.

    Example:
        >>> gate_provenance({"model": "m", "objects": "bag"}, {"objects": None, "cis_k": "1,2"})
        {'model': 'm', 'objects': None, 'cis_k': '1,2'}
    """
    return {**run, **(study or {}), **(given or {})}


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

    Args:
        interval: an :class:`~t2i_fairness.metrics.intervals.Interval` (its se and degrees of freedom
            give the p-value) or a ``(low, high)`` pair (a normal se from its width).
        resample: without an interval, ``resample(indices) -> value`` over ``units`` (within
            ``strata``) gives a seeded bootstrap; without either the estimate is taken as exact.
        test: a :class:`~t2i_fairness.metrics.decisions.HypothesisTest` makes the gate that test.
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
          units: int | None = None, strata=None, level: GateLevel | None = None, kind: str | None = None
          ) -> tuple[GateRecord, Verdict]:
    """The verdict on one measurement, as the record every report reads, and the :class:`Verdict`.

    Args:
        provenance: what ``m`` was measured under.
        baseline: the baseline run's measurement of the gate (``--t2i-baseline-model``); ``resample``,
            ``units``, ``strata``: the candidate's resampling, for the paired interval.
        level: the run's per-gate level (default: ``options.alpha`` over one gate).
        kind: the gate's kind, whose meaningful miss the power record uses.

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.thresholds import Bound
        >>> from t2i_fairness.spine.options import T2IOptions
        >>> t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.5)})
        >>> record, verdict = judge(Measurement("g", 0.4, n=10, interval=(0.35, 0.45)), t, {}, T2IOptions())
        >>> record.status, verdict.failed, record.p_value < 1e-4
        ('fail', True, True)
    """
    level = level or GateLevel.of(options)
    comparison = None
    if options.baseline_model and m.test is None:  # a test has its own H0; no candidate-baseline delta
        comparison = compare_with_baseline(
            m, baseline, model=options.baseline_model, allowed=options.baseline_delta, mode=options.gate_mode,
            resample=resample, units=units, strata=strata, n_resamples=options.bootstrap,
            confidence=options.confidence, seed=bootstrap_seed(m.gate, options.seed))
        m.details["baseline"] = comparison
    verdict = evaluate(m, thresholds, provenance, update=options.update_thresholds,
                       allow_loosen=options.allow_loosen, mode=options.gate_mode, level=level,
                       inconclusive=options.inconclusive, bound_level=options.bound_level)
    if comparison is not None and comparison.get("failed") and not verdict.failed:
        verdict.status, verdict.message = "fail", f"{verdict.message}; {comparison['message']}"
    power = None
    if verdict.bound is not None and m.test is None and options.gate_mode != "point" and verdict.threshold:
        from t2i_fairness.gating.power import power_record

        power = power_record(m.uncertainty, verdict.bound.value, verdict.bound.direction, verdict.threshold, kind, m.n)
    elif m.test is not None:  # a test gate: the power its test states against its own effect
        from t2i_fairness.gating.power import hypothesis_power_record

        power = hypothesis_power_record(m.test.power, m.n)
    if power is not None:
        from t2i_fairness.gating.power import power_words

        words = power_words(power, verdict.status)
        if words:
            verdict.message = f"{verdict.message}; {words}"
    record = GateRecord(
        gate=m.gate, nodeid=nodeid, value=m.value, n=m.n, direction=m.direction, status=verdict.status,
        bound=verdict.bound.value if verdict.bound else None, write=verdict.write, message=verdict.message,
        provenance=provenance, interval=list(m.interval) if m.interval else None,
        provenance_changes={k: list(v) for k, v in verdict.provenance_changes.items()}, details=m.details,
        family=family, p_value=verdict.p_value, threshold=verdict.threshold,
        mde=minimum_detectable(m, verdict.bound.value if verdict.bound else m.value, level),
        uncertainty=uncertainty_record(m), write_margin=verdict.write_margin, write_level=verdict.write_level,
        blocking=verdict.blocking_inconclusive,
        bound_provenance=verdict.bound.provenance if verdict.bound else None, power=power, units=unit_values(m),
    )
    return record, verdict


def unit_values(m: Measurement) -> dict | None:
    """The units (prompts) the estimate is the mean of, as its evidence keeps them (a :class:`UnitMean`'s values, a
    clustered interval's prompt shares), with their ids: ``details["unit_ids"]`` where the study names them, else
    their ordinals in draw order (which the run's prompts and seeds fix). None when the evidence keeps none or their
    mean is not the estimate (an image-weighted mean over unequal prompts).

    Example:
        >>> from t2i_fairness.metrics.evidence import unit_mean
        >>> unit_values(measure("g", 0.5, n=2, interval=unit_mean([0.25, 0.75], (0.0, 1.0))))
        {'ids': ['0', '1'], 'values': [0.25, 0.75]}
    """
    import math

    ev = m.uncertainty
    values = getattr(ev, "values", None) if hasattr(ev, "value_range") else None
    if values is None:
        values = getattr(getattr(ev, "bounded", None), "values", None)
    if not values or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        return None
    values = [float(v) for v in values]
    if abs(math.fsum(values) / len(values) - float(m.value)) > 1e-9 * max(1.0, abs(float(m.value))):
        return None
    ids = (m.details or {}).get("unit_ids")
    ids = [str(i) for i in ids] if ids is not None and len(ids) == len(values) else [str(i) for i in range(len(values))]
    return {"ids": ids, "values": values}


def minimum_detectable(m: Measurement, at: float, level: GateLevel) -> float | None:
    """The smallest shift of the true value beyond ``at`` the gate detects with 80% power at the run's level:
    from its own test (:meth:`~t2i_fairness.metrics.intervals.Interval.power`: exact for a share, the
    selection counted for worst-of and pairwise gates), else the normal formula from its standard error."""
    import math

    from t2i_fairness.metrics.decisions import minimum_detectable_effect

    if m.uncertainty is not None and hasattr(m.uncertainty, "power") and math.isfinite(at):
        from t2i_fairness.metrics.evidence import minimum_detectable as detectable

        try:
            return detectable(m.uncertainty, at, m.direction, level.value, power=0.8)
        except ValueError:
            pass
    se = m.se_at(at)
    if not math.isfinite(se) or se <= 0:
        return None
    return float(minimum_detectable_effect(se, alpha=level.value, power=0.8))


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
    """What a :class:`Gate` needs from its test session (one per test): ids, family, the run's options,
    thresholds and provenance, the role and baselines, ``emit`` for every record, and the gate count.
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
    level: GateLevel | None = None  # the run's per-gate level; made from options and family_size when not given

    def __post_init__(self) -> None:
        if self.level is None:
            self.level = GateLevel.of(self.options, self.family_size)


def decide(indicator, context: GateContext, *, name: str | None = None, provenance: dict | None = None,
           details: dict | None = None, resample=None, units: int | None = None, strata=None) -> GateRecord:
    """The gate record of a study's indicator against its bound, or of the look where the round loop stopped it.

    Args:
        name: the gate id (default ``context.gate_id``).
        provenance, details: what the test adds to the indicator's.
        resample, units, strata: a bootstrap over the units (``--t2i-bootstrap``).

    Raises:
        GateSkipped: the indicator does not apply, or it is undefined and the gate has no bound.

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.indicator import Indicator
        >>> from t2i_fairness.gating.thresholds import Bound
        >>> from t2i_fairness.spine.options import T2IOptions
        >>> ctx = GateContext("g", "t::g", None, T2IOptions(), ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.5)}),
        ...                   dict)
        >>> record = decide(Indicator(0.4, 10, "share", (0.35, 0.45)), ctx)
        >>> record.status, record.failed
        ('fail', True)
    """
    return _decided(indicator, context, name, provenance, details, resample, units, strata)[0]


def _decided(indicator, context: GateContext, name, provenance, details, resample, units,
             strata) -> tuple[GateRecord, Measurement | None]:
    gate_id = name or context.gate_id
    if indicator.skip is not None:
        raise GateSkipped(indicator.skip)
    if indicator.undefined is not None:
        return undefined_record(context, indicator.undefined, gate_id, indicator.inconclusive,
                                indicator.sequential), None
    if indicator.judged is not None and (indicator.sequential is None or not Look.of(indicator.sequential).early):
        return _audited(indicator, context, gate_id, provenance, details, resample, units, strata)
    m, look = _measured(indicator, gate_id, context.options, details, resample, units, strata)
    prov = gate_provenance(context.provenance(), indicator.provenance, provenance)
    return _judged(m, context, prov, indicator.kind, look, resample, units, strata), m


def _audited(ind, ctx: GateContext, gate_id: str, provenance, details, resample, units,
             strata) -> tuple[GateRecord, Measurement | None]:
    """A gate over a judged share: its judgements written for ``t2i-fairness audit``; with ``--t2i-audit``, decided
    on the labels and the judgements (:func:`t2i_fairness.audit.audited`), saying what it rests on and whether the
    scorer-only verdict differs."""
    from t2i_fairness.audit import audited, write_judged

    o = ctx.options
    write_judged(o.artifacts, gate_id, ind.judged, o.seed)
    plain = ind.replace(judged=None)
    if o.audit is None:
        return _decided(plain, ctx, gate_id, provenance, details, resample, units, strata)
    scorer_only, _ = _decided(plain, ctx, gate_id, provenance, details, resample, units, strata)
    result = audited(gate_id, ind.judged, o.audit, confidence=o.confidence)
    note = {"audit": {"rests_on": result.rests_on(), "labels": result.labels, "judgements": result.judgements,
                      "agreement": result.agreement, "scorer_only": {"status": scorer_only.status,
                                                                     "value": scorer_only.value,
                                                                     "interval": scorer_only.interval}}}
    if result.evidence is None:
        record = scorer_only
    else:
        record, _ = _decided(plain.replace(value=result.evidence.estimate, evidence=result.evidence), ctx, gate_id,
                             provenance, {**(details or {}), **note}, None, None, None)
    record.details.update(note)
    record.message = f"{record.message}; {'' if result.evidence is None else 'rests on '}{result.rests_on()}"
    if result.evidence is not None and record.status != scorer_only.status:
        record.message += (f"; the verdict differs from the scorer-only one ({scorer_only.status}, "
                           f"{scorer_only.value:.4f}): the audit changed it")
    return record, None


def _measured(ind, gate_id: str, options, details, resample, units, strata) -> tuple[Measurement, Look | None]:
    """An indicator's measurement and its look (at ``N`` after looks, judged as the sequential test)."""
    look = Look.of(ind.sequential)
    # a test is judged by its p-value; its evidence (effect sizes) serves the round loop
    interval = None if ind.test is not None else ind.evidence
    if look and not look.early and interval is not None and hasattr(interval, "p_value"):
        from t2i_fairness.gating.sequential.rules import SequentialEvidence

        interval = SequentialEvidence(interval, float(look.alpha_share), look.earlier_looks_p)
    details = {**ind.details, **(details or {}), **({"sequential": look.to_dict()} if look else {})}
    m = measure(gate_id, ind.value, n=ind.n, higher_is_better=ind.higher_is_better, interval=interval, details=details,
                resample=resample, units=units, strata=strata, bootstrap=options.bootstrap,
                confidence=options.confidence, seed=options.seed, test=ind.test)
    return m, look


def _judged(m: Measurement, ctx: GateContext, provenance: dict, kind: str | None, look: Look | None, resample, units,
            strata) -> GateRecord:
    record, _ = judge(m, ctx.thresholds, provenance, ctx.options, nodeid=ctx.nodeid, family=ctx.family,
                      baseline=ctx.baselines.get(m.gate), resample=resample, units=units, strata=strata,
                      level=ctx.level, kind=kind)
    if look and look.early:
        record = early_record(record, look, ctx.thresholds.gates.get(m.gate))
    return record


def undefined_record(ctx: GateContext, reason: str, gate_id: str, inconclusive: bool = False,
                     sequential: Look | None = None) -> GateRecord:
    """The record of an indicator that cannot be computed here: it fails once the gate has a bound (``GateSkipped``
    before), or is inconclusive where noise left it undefined and another gate judges the cause (``inconclusive``).
    """
    thresholds = ctx.thresholds
    if gate_id not in thresholds.gates:
        raise GateSkipped(reason)
    bound = thresholds.gates[gate_id]
    if inconclusive:
        status, blocking = "inconclusive", ctx.options.inconclusive == "fail"
        message = f"{gate_id}: {reason}; inconclusive (the gate has a bound in {thresholds.path})"
    else:
        status, blocking = "fail", False
        message = f"{gate_id}: {reason}; the gate has a bound in {thresholds.path}, so it cannot pass"
    details: dict[str, Any] = {"undefined": reason}
    look = Look.of(sequential)
    if look is not None:  # undefined at N after its looks (a look never stops a gate its value leaves undefined)
        details["sequential"] = look.to_dict()
    # recorded like any judged gate, so the summary, run.json and a canary's tally count it
    return GateRecord(gate=gate_id, nodeid=ctx.nodeid, value=float("nan"), n=0, direction=bound.direction,
                      status=status, bound=bound.value, write=None, message=message, provenance=ctx.provenance(),
                      family=ctx.family, details=details, blocking=blocking)


class Gate:
    """``gate(indicator)`` decides a study's :class:`~t2i_fairness.gating.indicator.Indicator` (:func:`decide`);
    ``gate(value, n=..., ...)`` a bare value; ``gate.undefined(reason)`` one that cannot be computed here. A verdict is
    raised as the package's own outcome (:class:`~t2i_fairness.errors.GateFailed`, ``GateSkipped``).
    """

    def __init__(self, context: GateContext):
        self.context = context

    def __call__(self, value, *, n: int | None = None, higher_is_better: bool = True, interval=None,
                 details: dict[str, Any] | None = None, name: str | None = None,
                 resample: Callable[[Any], float] | None = None, units: int | None = None, strata=None,
                 provenance: dict[str, Any] | None = None, test=None) -> Measurement | None:
        """``value``: an :class:`~t2i_fairness.gating.indicator.Indicator` (decided by :func:`decide`), or a number
        with its ``n`` and ``interval``. ``resample(indices) -> value`` with ``units`` (and optional ``strata``)
        gives a seeded bootstrap interval (``--t2i-bootstrap``); ``test`` makes the gate that test (:func:`measure`)."""
        __tracebackhide__ = True
        from t2i_fairness.gating.indicator import Indicator

        ctx, o = self.context, self.context.options
        gate_id = name or ctx.gate_id
        if isinstance(value, Indicator) and ctx.role != "baseline":
            record, m = _decided(value, ctx, name, provenance, details, resample, units, strata)
            return self._outcome(record, m)
        if isinstance(value, Indicator):
            if value.skip is not None:
                raise GateSkipped(value.skip)
            if value.undefined is not None:
                return self._outcome(undefined_record(ctx, value.undefined, gate_id, value.inconclusive,
                                                      value.sequential), None)
            m, _ = _measured(value, gate_id, o, details, resample, units, strata)
            provenance = gate_provenance({}, value.provenance, provenance)
        else:
            m = measure(gate_id, value, n=n, higher_is_better=higher_is_better, interval=interval, details=details,
                        resample=resample, units=units, strata=strata, bootstrap=o.bootstrap,
                        confidence=o.confidence, seed=o.seed, test=test)
        prov = gate_provenance(ctx.provenance(), None, provenance)
        if ctx.role == "baseline":
            ctx.baselines[gate_id] = BaselineMeasurement(m, resample, units, strata)
            ctx.emit(GateRecord(
                gate=m.gate, nodeid=ctx.nodeid, value=m.value, n=m.n, direction=m.direction, status="baseline",
                bound=None, write=None, message=f"{m.gate}: baseline {o.baseline_model} measured {m.value:.4f}",
                provenance=prov, interval=list(m.interval) if m.interval else None, details=m.details,
                family=ctx.family))
            return m
        return self._outcome(_judged(m, ctx, prov, ctx.kind, None, resample, units, strata), m)

    def _outcome(self, record: GateRecord, measured: Measurement | None) -> Measurement | None:
        """Emit the record; raise a failed verdict, warn an inconclusive one (a bound written under other settings
        is said once per run, at the top of the summary, not as one warning per gate)."""
        __tracebackhide__ = True
        self.context.emit(record)
        if record.failed:
            raise GateFailed(record.message)
        if record.status == "inconclusive":
            warnings.warn(T2IInconclusiveWarning(record.message), stacklevel=3)
        return measured

    def undefined(self, reason: str, name: str | None = None, inconclusive: bool = False,
                  sequential: Look | None = None) -> None:
        """An indicator that cannot be computed here: skip while the gate has no bound, fail once it has one
        (``inconclusive``: a value noise left undefined whose cause another gate judges; :func:`undefined_record`)."""
        __tracebackhide__ = True
        self._outcome(undefined_record(self.context, reason, name or self.context.gate_id, inconclusive, sequential),
                      None)
