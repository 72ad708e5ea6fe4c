"""Decomposed-DIG (Sureddy et al.): geographic disparities in objects and in backgrounds.

Claims gated, for each reference set and prompt template (``{object} in {region}`` and
``{regional adjective} {object}``): generated objects and backgrounds of each region are realistic
(precision) and diverse (coverage) against the region's real objects and backgrounds (Obj-only and
BG-only ViT features, Sec. 3); the worst region's background diversity stays above a floor; the
spread of per-region values (best minus worst) stays below a ceiling for objects and backgrounds
(Sec. 4.2); the adjective template is not worse than the original on worst-region background
coverage (Sec. 5, Table 1). Each region's test is exact (Clopper-Pearson at its effective size); the
worst region counts its selection among the regions, the spread every ordered pair of regions (MOVER),
and the template improvement is MOVER over the two templates' worst-of limits
(:mod:`t2i_fairness.metrics.evidence`). The diagnostics of Sec. 4.3 are written as JSON and image grids. A
failing precision or coverage gate carries its evidence (the region's generated images beside their
nearest real ones in the gate's Obj-only or BG-only space; for coverage, the real images no generated
image reached: :mod:`t2i_fairness.families.decomposed.evidence`).
"""

from __future__ import annotations

import pytest

from t2i_fairness.families.decomposed.evidence import evidence
from t2i_fairness.families.decomposed.report import report_diagnostics, report_table1
from t2i_fairness.families.decomposed.study import DECOMPOSED_TEMPLATES


@pytest.fixture
def table1(request, t2i_report):
    """``table1(ind, reference)``: the Table 1 block in the terminal summary and its JSON, on the indicator's study,
    over the Table 1 templates for which this run selected a gate that reads every region
    (:func:`~t2i_fairness.families.decomposed.report.report_table1`)."""

    def emit(ind, reference: str) -> None:
        selected = (getattr(getattr(item, "callspec", None), "params", {}) for item in request.session.items)
        report_table1(ind, reference, selected, t2i_report)

    return emit


# -- per region (Sec. 4.1-4.2) -----------------------------------------------------------------

def test_obj_precision(reference, template, region, decomposed, gate, t2i_report):
    ind = decomposed.obj_precision(reference, template, region)
    t2i_report.on_failure(evidence(ind, reference, template, "obj", "precision", region))
    gate(ind)


def test_obj_coverage(reference, template, region, decomposed, gate, t2i_report):
    ind = decomposed.obj_coverage(reference, template, region)
    t2i_report.on_failure(evidence(ind, reference, template, "obj", "coverage", region))
    gate(ind)


def test_bg_precision(reference, template, region, decomposed, gate, t2i_report):
    ind = decomposed.bg_precision(reference, template, region)
    t2i_report.on_failure(evidence(ind, reference, template, "bg", "precision", region))
    gate(ind)


def test_bg_coverage(reference, template, region, decomposed, gate, table1, t2i_report):
    ind = decomposed.bg_coverage(reference, template, region)
    t2i_report.on_failure(evidence(ind, reference, template, "bg", "coverage", region))
    table1(ind, reference)
    gate(ind)


# -- across regions ----------------------------------------------------------------------------

def test_worst_region_bg_coverage(reference, template, decomposed, gate, table1, t2i_report):
    ind = decomposed.worst_region_bg_coverage(reference, template)
    t2i_report.on_failure(evidence(ind, reference, template, "bg", "coverage", lambda: ind.details["worst_region"]))
    table1(ind, reference)
    gate(ind)


def test_region_spread(reference, template, setup, metric, decomposed, gate, t2i_report):
    """Best minus worst region; the paper finds backgrounds spread about 1.5-2x more than objects."""
    ind = decomposed.region_spread(reference, template, setup, metric)
    if ind.undefined is None and ind.skip is None:  # the region that widens it
        t2i_report.on_failure(evidence(ind, reference, template, setup, metric, ind.details["worst"]))
    gate(ind)


def test_template_improvement(reference, decomposed, gate, table1, t2i_report):
    """``{regional adjective} {object}`` minus ``{object} in {region}`` on worst-region BG-only coverage."""
    ind = decomposed.template_improvement(reference)
    table1(ind, reference)
    if ind.undefined is None:
        t2i_report.on_failure(evidence(ind, reference, DECOMPOSED_TEMPLATES[1], "bg", "coverage",
                                       ind.details["regional_adjective"]["worst_region"]))
    gate(ind)


# -- diagnostics (Sec. 4.3): reported, not gated ------------------------------------------------

def test_decomposed_diagnostics(reference, template, decomposed, t2i_report):
    sc = decomposed.scores(reference, template)
    if not sc.scores:
        pytest.skip(f"{reference}/{template}: no region has scores ({sc.skipped})")
    diags = report_diagnostics(decomposed, reference, template, t2i_report)
    for region, (d, _) in diags.items():  # each list names real (or generated) images of that region, once
        for found in (d.low_diversity_backgrounds, d.low_diversity_objects, d.low_realism_backgrounds):
            assert len(set(found)) == len(found)
        assert len(d.low_realism_backgrounds) <= sc.scores[region]["bg"].n_used
