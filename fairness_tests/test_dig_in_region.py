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

from t2i_fairness.families.dig_in.evidence import evidence
from t2i_fairness.families.dig_in.report import report_region_bars, report_region_lines

# A failing gate shows the images of its group: the region (or object in a region) it names, or the group its
# indicator names as the worst (the one behind a worst-region or parity value).

# -- Region Indicator (4.2) -------------------------------------------------------------------------

def test_region_precision(reference, template, region, dig_in, gate, t2i_report):
    ind = dig_in.region_precision(reference, template, region)
    t2i_report.on_failure(evidence(ind, reference, template, "precision", region))
    gate(ind)


def test_region_coverage(reference, template, region, dig_in, gate, t2i_report):
    ind = dig_in.region_coverage(reference, template, region)
    t2i_report.on_failure(evidence(ind, reference, template, "coverage", region))
    gate(ind)


def test_worst_region_precision(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.worst_region_precision(reference, template)
    report_region_bars(ind, gate, reference, template, t2i_report)
    t2i_report.on_failure(evidence(ind, reference, template, "precision"))
    gate(ind)


def test_worst_region_coverage(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.worst_region_coverage(reference, template)
    report_region_lines(ind, reference, template, t2i_report)
    t2i_report.on_failure(evidence(ind, reference, template, "coverage"))
    gate(ind)


def test_region_disparity_precision(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.region_disparity_precision(reference, template)
    t2i_report.on_failure(evidence(ind, reference, template, "precision"))
    gate(ind)


def test_region_disparity_coverage(reference, template, dig_in, gate, t2i_report):
    ind = dig_in.region_disparity_coverage(reference, template)
    t2i_report.on_failure(evidence(ind, reference, template, "coverage"))
    gate(ind)


# -- Object-Region Indicator (4.3) -----------------------------------------------------------------

def test_object_region_precision(reference, template, object, region, dig_in, gate, t2i_report):
    ind = dig_in.object_region_precision(reference, template, object, region)
    t2i_report.on_failure(evidence(ind, reference, template, "precision", region, object))
    gate(ind)


def test_object_region_coverage(reference, template, object, region, dig_in, gate, t2i_report):
    ind = dig_in.object_region_coverage(reference, template, object, region)
    t2i_report.on_failure(evidence(ind, reference, template, "coverage", region, object))
    gate(ind)


def test_object_worst_region_precision(reference, template, object, dig_in, gate, t2i_report):
    ind = dig_in.object_worst_region_precision(reference, template, object)
    t2i_report.on_failure(evidence(ind, reference, template, "precision", object=object))
    gate(ind)


def test_object_worst_region_coverage(reference, template, object, dig_in, gate, t2i_report):
    ind = dig_in.object_worst_region_coverage(reference, template, object)
    t2i_report.on_failure(evidence(ind, reference, template, "coverage", object=object))
    gate(ind)


def test_object_region_disparity_coverage(reference, template, object, dig_in, gate, t2i_report):
    ind = dig_in.object_region_disparity_coverage(reference, template, object)
    t2i_report.on_failure(evidence(ind, reference, template, "coverage", object=object))
    gate(ind)
