"""DIG In, section 4.4: Object Consistency Indicator.

Claim gated: the 10th-percentile CLIPScore between generated images and the object they were
asked for, averaged over objects, stays above its bound, overall and for each region. Its interval:
the per-object jackknife variance floored at normal theory, t on one degree of freedom per object
(:func:`t2i_fairness.metrics.intervals.percentile_mean_interval`; a bootstrap of a 10th percentile of
6 images covers badly).
"""

from __future__ import annotations

import pytest

from t2i_fairness.families.dig_in.report import report_consistency
from t2i_fairness.vocab.geode import GEODE_REGIONS

REGIONAL_TEMPLATES = ("object_in_region", "object_in_country", "regional_adjective")
CASES = [pytest.param("object", None, id="object")]
CASES += [pytest.param(t, None, id=t) for t in REGIONAL_TEMPLATES]
CASES += [pytest.param(t, r.slug, id=f"{t}-{r.slug}") for t in REGIONAL_TEMPLATES for r in GEODE_REGIONS]


@pytest.mark.parametrize("template, region", CASES)
def test_object_consistency(template, region, dig_in, gate, t2i_report):
    ind = dig_in.object_consistency(template, region)
    gate(ind, details=report_consistency(ind, template, region, t2i_report))
