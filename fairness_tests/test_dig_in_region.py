"""DIG In, sections 4.2-4.3: Region and Object-Region indicators.

Claims gated, for each reference set and prompt template (``{object}``, ``{object} in {region}``,
``{object} in {country}``): generated images of each region (and each object in each region)
are realistic (precision: share of generated images inside the k-NN manifold of that region's
real images) and diverse (coverage: share of real images whose k-NN ball holds a generated
image); the worst region stays above a floor, and the best/worst ratio below a ceiling.
"""

from __future__ import annotations

import pytest

from fixtures.dig import DIG_TEMPLATES, references_of, region_bars
from t2i_fairness.references.grouping import disparity


def pytest_generate_tests(metafunc):
    refs = references_of(metafunc.config)
    names = set(metafunc.fixturenames)
    cases = []
    for name, ref in refs.items():
        pairs = ref.groups_by_object_region()
        for template in DIG_TEMPLATES:
            if {"region", "object"} <= names:
                cases += [pytest.param(name, template, o, r, id=f"{name}-{template}-{o}-{r}") for (o, r) in pairs]
            elif "region" in names:
                cases += [pytest.param(name, template, r, id=f"{name}-{template}-{r}") for r in ref.regions]
            elif "object" in names:
                cases += [pytest.param(name, template, o, id=f"{name}-{template}-{o}") for o in ref.objects]
            elif "template" in names:
                cases.append(pytest.param(name, template, id=f"{name}-{template}"))
    argnames = ["reference", "template"] + [a for a in ("object", "region") if a in names]
    if "template" in names:
        metafunc.parametrize(argnames, cases)


def _bootstrap(score, metric):
    """Resample generated images (the unit DIG In draws) for a percentile interval."""
    if score.inside is None:
        return {}
    return {"resample": getattr(score, f"{metric}_of"), "units": score.n_fake}


# -- Region Indicator (4.2) -------------------------------------------------------------------------

def test_region_precision(reference, template, region, dig_scores, gate):
    s = dig_scores(reference, template).region[region]
    gate(s.precision, n=s.n_fake, details={"n_real": s.n_real, "n_fake": s.n_fake}, **_bootstrap(s, "precision"))


def test_region_coverage(reference, template, region, dig_scores, gate):
    s = dig_scores(reference, template).region[region]
    gate(s.coverage, n=s.n_real, details={"n_real": s.n_real, "n_fake": s.n_fake}, **_bootstrap(s, "coverage"))


def test_worst_region_precision(reference, template, dig_scores, gate, t2i_report):
    scores = dig_scores(reference, template).region
    worst = min(scores, key=lambda r: scores[r].precision)
    t2i_report.png("region_precision_coverage", region_bars(f"{reference}: {template}", scores))
    t2i_report.json("regions", {r: {k: v for k, v in vars(s).items() if k != "inside"} for r, s in scores.items()})
    gate(scores[worst].precision, n=scores[worst].n_fake, details={"worst_region": worst})


def test_worst_region_coverage(reference, template, dig_scores, gate, t2i_report):
    scores = dig_scores(reference, template).region
    worst = min(scores, key=lambda r: scores[r].coverage)
    t2i_report.section(
        f"DIG In Region Indicator: {reference} / {template}",
        [f"{r:<16} precision {s.precision:.3f}  coverage {s.coverage:.3f}  (real {s.n_real}, generated {s.n_fake})"
         for r, s in scores.items()],
    )
    gate(scores[worst].coverage, n=scores[worst].n_real, details={"worst_region": worst})


def test_region_disparity_precision(reference, template, dig_scores, gate):
    scores = dig_scores(reference, template).region
    gate(disparity({r: s.precision for r, s in scores.items()}), n=len(scores), higher_is_better=False)


def test_region_disparity_coverage(reference, template, dig_scores, gate):
    scores = dig_scores(reference, template).region
    gate(disparity({r: s.coverage for r, s in scores.items()}), n=len(scores), higher_is_better=False)


# -- Object-Region Indicator (4.3) -----------------------------------------------------------------

def _object_region(dig_scores, reference, template, object, region, k):
    scores = dig_scores(reference, template).object_region
    if (object, region) not in scores:
        pytest.skip(f"{reference}: {object} in {region} has fewer than k+2={k + 2} real images; no manifold")
    return scores[(object, region)]


def test_object_region_precision(reference, template, object, region, dig_scores, gate, t2i):
    s = _object_region(dig_scores, reference, template, object, region, t2i.options.nearest_k)
    gate(s.precision, n=s.n_fake, details={"n_real": s.n_real}, **_bootstrap(s, "precision"))


def test_object_region_coverage(reference, template, object, region, dig_scores, gate, t2i):
    s = _object_region(dig_scores, reference, template, object, region, t2i.options.nearest_k)
    gate(s.coverage, n=s.n_real, details={"n_fake": s.n_fake}, **_bootstrap(s, "coverage"))


def _per_region(dig_scores, reference, template, object, metric):
    scores = dig_scores(reference, template).object_region
    values = {r: getattr(s, metric) for (o, r), s in scores.items() if o == object}
    if not values:
        pytest.skip(f"{reference}: no region has enough real images of {object}")
    return values


def test_object_worst_region_precision(reference, template, object, dig_scores, gate):
    values = _per_region(dig_scores, reference, template, object, "precision")
    worst = min(values, key=values.get)
    gate(values[worst], n=len(values), details={"worst_region": worst, "by_region": values})


def test_object_worst_region_coverage(reference, template, object, dig_scores, gate):
    values = _per_region(dig_scores, reference, template, object, "coverage")
    worst = min(values, key=values.get)
    gate(values[worst], n=len(values), details={"worst_region": worst, "by_region": values})


def test_object_region_disparity_coverage(reference, template, object, dig_scores, gate):
    values = _per_region(dig_scores, reference, template, object, "coverage")
    gate(disparity(values), n=len(values), higher_is_better=False, details={"by_region": values})
