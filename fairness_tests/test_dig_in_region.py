"""DIG In, sections 4.2-4.3: Region and Object-Region indicators.

Claims gated, for each reference set and prompt template (``{object}``, ``{object} in {region}``,
``{object} in {country}``): generated images of each region (and each object in each region)
are realistic (precision: share of generated images inside the k-NN manifold of that region's
real images) and diverse (coverage: share of real images whose k-NN ball holds a generated
image); the worst region stays above a floor, and the worst/best ratio (parity) above a floor.

Each gate reads its indicator from the study (:class:`~t2i_fairness.families.dig_in.study.DigInStudy`,
one method per gate, of the test's name), with the interval of its indicator type
(:mod:`t2i_fairness.metrics.intervals`): Wilson's for precision, the jackknife-Wilson interval for
coverage (generated images are the unit drawn; the percentile bootstrap of coverage is biased low). The
gate's test is exact for each share (Clopper-Pearson at its effective size); the worst region counts
that it was picked among G (Bonferroni), and parity is the union of the ordered pairs' linear hypotheses
``theta_g - r theta_h >= 0`` (MOVER-R): :mod:`t2i_fairness.metrics.evidence`.
"""

from __future__ import annotations

import math

from t2i_fairness.families.dig_in.evidence import evidence
from t2i_fairness.families.dig_in.report import region_bars, region_bounds, region_intervals, region_lines


def _lowest(scores, metric):
    """The group with the lowest value (an undefined value first): the one whose images the evidence shows."""
    return min(scores, key=lambda g: (not math.isnan(getattr(scores[g], metric)), getattr(scores[g], metric)))


# -- Region Indicator (4.2) -------------------------------------------------------------------------

def test_region_precision(reference, template, region, dig_in, gate, t2i_report):
    ind = dig_in.region_precision(reference, template, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "precision", region))
    gate(ind)


def test_region_coverage(reference, template, region, dig_in, gate, t2i_report):
    ind = dig_in.region_coverage(reference, template, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "coverage", region))
    gate(ind)


def test_worst_region_precision(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.worst_region_precision(reference, template)
    scores = ind.at.scores(reference, template).region
    o = ind.at.bench.options
    t2i_report.png("region_precision_coverage", region_bars(
        f"{reference}: {template}", scores, intervals=region_intervals(scores, o.confidence),
        bounds=region_bounds(gate, reference, template, scores), confidence=o.confidence))
    t2i_report.on_failure(evidence(ind.at, reference, template, "precision", _lowest(scores, "precision")))
    t2i_report.json("regions", {r: s.report() for r, s in scores.items()})
    gate(ind)


def test_worst_region_coverage(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.worst_region_coverage(reference, template)
    sc = ind.at.scores(reference, template)
    t2i_report.section(f"DIG In Region Indicator: {reference} / {template}", region_lines(sc.region, sc.truncation))
    t2i_report.on_failure(evidence(ind.at, reference, template, "coverage", _lowest(sc.region, "coverage")))
    gate(ind)


def test_region_disparity_precision(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.region_disparity_precision(reference, template)
    scores = ind.at.scores(reference, template).region
    t2i_report.on_failure(evidence(ind.at, reference, template, "precision", _lowest(scores, "precision")))
    gate(ind)


def test_region_disparity_coverage(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.region_disparity_coverage(reference, template)
    scores = ind.at.scores(reference, template).region
    t2i_report.on_failure(evidence(ind.at, reference, template, "coverage", _lowest(scores, "coverage")))
    gate(ind)


# -- Object-Region Indicator (4.3) -----------------------------------------------------------------

def test_object_region_precision(reference, template, object, region, dig_in, gate, t2i_report):
    ind = dig_in.object_region_precision(reference, template, object, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "precision", region, object))
    gate(ind)


def test_object_region_coverage(reference, template, object, region, dig_in, gate, t2i_report):
    ind = dig_in.object_region_coverage(reference, template, object, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "coverage", region, object))
    gate(ind)


def _object_lowest(study, reference, template, object, metric):
    scores = study.scores(reference, template).object_region
    groups = {r: scores[(o, r)] for (o, r) in scores if o == object}
    return _lowest(groups, metric) if groups else None


def test_object_worst_region_precision(reference, template, object, dig_in, gate, t2i_report):
    ind = dig_in.object_worst_region_precision(reference, template, object)
    t2i_report.on_failure(evidence(ind.at, reference, template, "precision",
                                   _object_lowest(ind.at, reference, template, object, "precision"), object))
    gate(ind)


def test_object_worst_region_coverage(reference, template, object, dig_in, gate, t2i_report):
    ind = dig_in.object_worst_region_coverage(reference, template, object)
    t2i_report.on_failure(evidence(ind.at, reference, template, "coverage",
                                   _object_lowest(ind.at, reference, template, object, "coverage"), object))
    gate(ind)


def test_object_region_disparity_coverage(reference, template, object, dig_in, gate, t2i_report):
    ind = dig_in.object_region_disparity_coverage(reference, template, object)
    t2i_report.on_failure(evidence(ind.at, reference, template, "coverage",
                                   _object_lowest(ind.at, reference, template, object, "coverage"), object))
    gate(ind)
