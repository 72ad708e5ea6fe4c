"""DIG In, section 4.4: Object Consistency Indicator.

Claim gated: the 10th-percentile CLIPScore between generated images and the object they were
asked for, averaged over objects, stays above its bound, overall and for each region. Its interval:
the per-object jackknife variance floored at normal theory, t on one degree of freedom per object
(:func:`t2i_fairness.metrics.intervals.percentile_mean_interval`; a bootstrap of a 10th percentile of
6 images covers badly).
"""

from __future__ import annotations

import warnings

import pytest

from t2i_fairness.families.dig_in.report import lowest_scoring
from t2i_fairness.report.grids import image_grid
from t2i_fairness.errors import T2ISmallSampleWarning
from t2i_fairness.vocab.geode import GEODE_REGIONS

REGIONAL_TEMPLATES = ("object_in_region", "object_in_country", "regional_adjective")
CASES = [pytest.param("object", None, id="object")]
CASES += [pytest.param(t, None, id=t) for t in REGIONAL_TEMPLATES]
CASES += [pytest.param(t, r.slug, id=f"{t}-{r.slug}") for t in REGIONAL_TEMPLATES for r in GEODE_REGIONS]


@pytest.mark.parametrize("template, region", CASES)
def test_object_consistency(template, region, dig_in, gate, t2i_report):
    ind = dig_in.object_consistency(template, region)
    scored = ind.at.clipscores(template, region)  # the region's prompts only (all without a region)
    lowest = lowest_scoring(scored)
    if lowest and all(s.image is not None for s in lowest):
        t2i_report.png("lowest_scoring", image_grid([s.image.load() for s in lowest],
                                                    [f"{s.score:.3f} {s.object}" for s in lowest]))
    small = {o: n for o, n in ind.details["images_by_object"].items() if n < 10}
    if small:
        warnings.warn(T2ISmallSampleWarning(
            f"10th percentile from fewer than 10 images for {len(small)} object(s) ({small}); the figure is unstable"))
    gate(ind)
