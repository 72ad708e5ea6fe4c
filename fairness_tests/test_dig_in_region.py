"""DIG In, sections 4.2-4.3: Region and Object-Region indicators.

Claims gated, for each reference set and prompt template (``{object}``, ``{object} in {region}``,
``{object} in {country}``): generated images of each region (and each object in each region)
are realistic (precision: share of generated images inside the k-NN manifold of that region's
real images) and diverse (coverage: share of real images whose k-NN ball holds a generated
image); the worst region stays above a floor, and the best/worst ratio below a ceiling.
"""

from __future__ import annotations

import pytest

from t2i_fairness.families.dig_in.report import region_bars, region_lines
from t2i_fairness.families.dig_in.study import disparity


def _bootstrap(score, metric):
    """Resample generated images (the unit DIG In draws) for a percentile interval."""
    if score.member is None:
        return {}
    return {"resample": getattr(score, f"{metric}_of"), "units": score.member.n_fake}


# -- Region Indicator (4.2) -------------------------------------------------------------------------

def test_region_precision(reference, template, region, dig_in, gate):
    s = dig_in.scores(reference, template).region[region]
    gate(s.precision, n=s.n_fake, details={"n_real": s.n_real, "n_fake": s.n_fake}, **_bootstrap(s, "precision"))


def test_region_coverage(reference, template, region, dig_in, gate):
    s = dig_in.scores(reference, template).region[region]
    gate(s.coverage, n=s.n_real, details={"n_real": s.n_real, "n_fake": s.n_fake}, **_bootstrap(s, "coverage"))


def test_worst_region_precision(reference, template, dig_in, gate, t2i_report):
    scores = dig_in.scores(reference, template).region
    worst = min(scores, key=lambda r: scores[r].precision)
    t2i_report.png("region_precision_coverage", region_bars(f"{reference}: {template}", scores))
    t2i_report.json("regions", {r: s.report() for r, s in scores.items()})
    gate(scores[worst].precision, n=scores[worst].n_fake, details={"worst_region": worst})


def test_worst_region_coverage(reference, template, dig_in, gate, t2i_report):
    scores = dig_in.scores(reference, template).region
    worst = min(scores, key=lambda r: scores[r].coverage)
    t2i_report.section(f"DIG In Region Indicator: {reference} / {template}", region_lines(scores))
    gate(scores[worst].coverage, n=scores[worst].n_real, details={"worst_region": worst})


def test_region_disparity_precision(reference, template, dig_in, gate):
    scores = dig_in.scores(reference, template).region
    gate(disparity({r: s.precision for r, s in scores.items()}), n=len(scores), higher_is_better=False)


def test_region_disparity_coverage(reference, template, dig_in, gate):
    scores = dig_in.scores(reference, template).region
    gate(disparity({r: s.coverage for r, s in scores.items()}), n=len(scores), higher_is_better=False)


# -- Object-Region Indicator (4.3) -----------------------------------------------------------------

def _object_region(dig_in, reference, template, object, region, k):
    scores = dig_in.scores(reference, template).object_region
    if (object, region) not in scores:
        pytest.skip(f"{reference}: {object} in {region} has fewer than k+2={k + 2} real images; no manifold")
    return scores[(object, region)]


def test_object_region_precision(reference, template, object, region, dig_in, gate, t2i):
    s = _object_region(dig_in, reference, template, object, region, t2i.options.nearest_k)
    gate(s.precision, n=s.n_fake, details={"n_real": s.n_real}, **_bootstrap(s, "precision"))


def test_object_region_coverage(reference, template, object, region, dig_in, gate, t2i):
    s = _object_region(dig_in, reference, template, object, region, t2i.options.nearest_k)
    gate(s.coverage, n=s.n_real, details={"n_fake": s.n_fake}, **_bootstrap(s, "coverage"))


def _per_region(dig_in, reference, template, object, metric):
    scores = dig_in.scores(reference, template).object_region
    values = {r: getattr(scores[(o, r)], metric) for (o, r) in scores if o == object}  # this object's groups only
    if not values:
        pytest.skip(f"{reference}: no region has enough real images of {object}")
    return values


def test_object_worst_region_precision(reference, template, object, dig_in, gate):
    values = _per_region(dig_in, reference, template, object, "precision")
    worst = min(values, key=values.get)
    gate(values[worst], n=len(values), details={"worst_region": worst, "by_region": values})


def test_object_worst_region_coverage(reference, template, object, dig_in, gate):
    values = _per_region(dig_in, reference, template, object, "coverage")
    worst = min(values, key=values.get)
    gate(values[worst], n=len(values), details={"worst_region": worst, "by_region": values})


def test_object_region_disparity_coverage(reference, template, object, dig_in, gate):
    values = _per_region(dig_in, reference, template, object, "coverage")
    gate(disparity(values), n=len(values), higher_is_better=False, details={"by_region": values})
