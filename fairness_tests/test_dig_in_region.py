"""DIG In, sections 4.2-4.3: Region and Object-Region indicators.

Claims gated, for each reference set and prompt template (``{object}``, ``{object} in {region}``,
``{object} in {country}``): generated images of each region (and each object in each region)
are realistic (precision: share of generated images inside the k-NN manifold of that region's
real images) and diverse (coverage: share of real images whose k-NN ball holds a generated
image); the worst region stays above a floor, and the worst/best ratio (parity) above a floor.

Every value carries the interval of its indicator type (:mod:`t2i_fairness.metrics.intervals`):
Wilson's for precision, the jackknife-Wilson interval for coverage (generated images are the unit
drawn; the percentile bootstrap of coverage is biased low). The gate's test is exact for each share
(Clopper-Pearson at its effective size); the worst region counts that it was picked among G (Bonferroni),
and parity is the union of the ordered pairs' linear hypotheses ``theta_g - r theta_h >= 0`` (MOVER-R):
:mod:`t2i_fairness.metrics.evidence`.
"""

from __future__ import annotations

import math

import pytest

from t2i_fairness.families.dig_in.evidence import evidence
from t2i_fairness.families.dig_in.report import region_bars, region_bounds, region_intervals, region_lines
from t2i_fairness.families.dig_in.study import disparity
from t2i_fairness.metrics.evidence import pairs, worst_of


def _gate_group(s, metric, gate, confidence, sweeps=None, **extra):
    """Gate one group's precision or coverage with its interval; a collapsed group's undefined precision
    is that gate's failure (once it has a bound), never its neighbours'. ``sweeps``: how the value is made
    from images (``--t2i-sequential``'s early stops)."""
    value = getattr(s, metric)
    if math.isnan(value):
        gate.undefined(s.note or f"{metric} is undefined")
    gate(value, n=s.n_fake if metric == "precision" else s.n_real, interval=s.interval(metric, confidence),
         details={**_sizes(s), "n_scored": s.member.n_fake, **extra,
                  **({"note": s.note} if s.note else {})}, sweeps=sweeps)


def _lowest(scores, metric):
    """The group with the lowest value (an undefined value first): the one whose images the evidence shows."""
    return min(scores, key=lambda g: (not math.isnan(getattr(scores[g], metric)), getattr(scores[g], metric)))


def _worst(scores, metric, gate, confidence, **extra):
    undefined = [g for g, s in scores.items() if math.isnan(getattr(s, metric))]
    if undefined:
        gate.undefined(f"{metric} is undefined for {', '.join(map(str, undefined))}: "
                       + "; ".join(scores[g].note for g in undefined if scores[g].note))
    worst = _lowest(scores, metric)
    s = scores[worst]
    evidence = worst_of({str(g): v.interval(metric, confidence) for g, v in scores.items()}, confidence=confidence)
    gate(evidence.estimate, n=s.n_fake if metric == "precision" else s.n_real, interval=evidence,
         details={"worst": worst, "by_group": {str(g): getattr(v, metric) for g, v in scores.items()},
                  "selected_from": evidence.selection, **extra})


def _parity(scores, metric, gate, confidence):
    """Worst / best ratio (1 = every group alike); the best/worst disparity of the paper's figures is in the details."""
    values = {g: getattr(s, metric) for g, s in scores.items()}
    undefined = [g for g, v in values.items() if math.isnan(v)]
    if undefined:
        gate.undefined(f"{metric} is undefined for {', '.join(map(str, undefined))}")
    if len(values) < 2:
        pytest.skip(f"parity needs two groups with {metric}; only {', '.join(map(str, values))} has one")
    iv = pairs({str(g): s.interval(metric, confidence) for g, s in scores.items()}, contrast="ratio",
               confidence=confidence)
    worst, best = min(values, key=values.get), max(values, key=values.get)
    gate(iv.estimate, n=len(scores), interval=iv,
         details={"worst": str(worst), "best": str(best), "best_over_worst": disparity(values),
                  "by_group": {str(g): v for g, v in values.items()}, "pairs_tested": iv.selection})


# -- Region Indicator (4.2) -------------------------------------------------------------------------

def _sizes(s) -> dict:
    """Group sizes: generated images scored (after de-duplication, the bootstrap's units) and before it."""
    return {"n_real": s.n_real, "n_fake": s.n_fake, "n_generated": s.n_generated, "n_duplicates": s.n_duplicates}


def test_region_precision(reference, template, region, dig_in, gate, t2i, t2i_report):
    t2i_report.on_failure(evidence(dig_in, reference, template, "precision", region))
    s = dig_in.scores(reference, template).region[region]
    _gate_group(s, "precision", gate, t2i.options.confidence, dig_in.sweeps(template, s))


def test_region_coverage(reference, template, region, dig_in, gate, t2i, t2i_report):
    t2i_report.on_failure(evidence(dig_in, reference, template, "coverage", region))
    s = dig_in.scores(reference, template).region[region]
    _gate_group(s, "coverage", gate, t2i.options.confidence, dig_in.sweeps(template, s))


def test_worst_region_precision(reference, template, dig_in, gate, t2i, t2i_report):
    scores = dig_in.scores(reference, template).region
    o = dig_in.bench.options
    t2i_report.png("region_precision_coverage", region_bars(
        f"{reference}: {template}", scores, intervals=region_intervals(scores, o.confidence),
        bounds=region_bounds(gate, reference, template, scores), confidence=o.confidence))
    t2i_report.on_failure(evidence(dig_in, reference, template, "precision", _lowest(scores, "precision")))
    t2i_report.json("regions", {r: s.report() for r, s in scores.items()})
    _worst(scores, "precision", gate, t2i.options.confidence)


def test_worst_region_coverage(reference, template, dig_in, gate, t2i, t2i_report):
    scores = dig_in.scores(reference, template).region
    t2i_report.section(f"DIG In Region Indicator: {reference} / {template}", region_lines(scores, dig_in.scores(reference, template).truncation))
    t2i_report.on_failure(evidence(dig_in, reference, template, "coverage", _lowest(scores, "coverage")))
    _worst(scores, "coverage", gate, t2i.options.confidence)


def test_region_disparity_precision(reference, template, dig_in, gate, t2i, t2i_report):
    scores = dig_in.scores(reference, template).region
    t2i_report.on_failure(evidence(dig_in, reference, template, "precision", _lowest(scores, "precision")))
    _parity(scores, "precision", gate, t2i.options.confidence)


def test_region_disparity_coverage(reference, template, dig_in, gate, t2i, t2i_report):
    scores = dig_in.scores(reference, template).region
    t2i_report.on_failure(evidence(dig_in, reference, template, "coverage", _lowest(scores, "coverage")))
    _parity(scores, "coverage", gate, t2i.options.confidence)


# -- Object-Region Indicator (4.3) -----------------------------------------------------------------

def _object_region(dig_in, reference, template, object, region, k):
    scores = dig_in.scores(reference, template).object_region
    if (object, region) not in scores:
        pytest.skip(f"{reference}: {object} in {region} has fewer than k+2={k + 2} real images; no manifold")
    return scores[(object, region)]


def test_object_region_precision(reference, template, object, region, dig_in, gate, t2i, t2i_report):
    s = _object_region(dig_in, reference, template, object, region, t2i.options.nearest_k)
    t2i_report.on_failure(evidence(dig_in, reference, template, "precision", region, object))
    _gate_group(s, "precision", gate, t2i.options.confidence, dig_in.sweeps(template, s))


def test_object_region_coverage(reference, template, object, region, dig_in, gate, t2i, t2i_report):
    s = _object_region(dig_in, reference, template, object, region, t2i.options.nearest_k)
    t2i_report.on_failure(evidence(dig_in, reference, template, "coverage", region, object))
    _gate_group(s, "coverage", gate, t2i.options.confidence, dig_in.sweeps(template, s))


def _per_region(dig_in, reference, template, object):
    scores = dig_in.scores(reference, template).object_region
    scores = {r: scores[(o, r)] for (o, r) in scores if o == object}  # this object's groups only (computed on access)
    if not scores:
        pytest.skip(f"{reference}: no region has enough real images of {object}")
    return scores


def test_object_worst_region_precision(reference, template, object, dig_in, gate, t2i, t2i_report):
    scores = _per_region(dig_in, reference, template, object)
    t2i_report.on_failure(evidence(dig_in, reference, template, "precision", _lowest(scores, "precision"), object))
    _worst(scores, "precision", gate, t2i.options.confidence)


def test_object_worst_region_coverage(reference, template, object, dig_in, gate, t2i, t2i_report):
    scores = _per_region(dig_in, reference, template, object)
    t2i_report.on_failure(evidence(dig_in, reference, template, "coverage", _lowest(scores, "coverage"), object))
    _worst(scores, "coverage", gate, t2i.options.confidence)


def test_object_region_disparity_coverage(reference, template, object, dig_in, gate, t2i, t2i_report):
    scores = _per_region(dig_in, reference, template, object)
    t2i_report.on_failure(evidence(dig_in, reference, template, "coverage", _lowest(scores, "coverage"), object))
    _parity(scores, "coverage", gate, t2i.options.confidence)
