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
from t2i_fairness.families.decomposed.report import diagnostics_grids, diagnostics_report, table1_section
from t2i_fairness.families.decomposed.rules import summarize
from t2i_fairness.families.decomposed.study import DECOMPOSED_TEMPLATES


@pytest.fixture
def table1(request, decomposed, t2i_report):
    """``table1(reference)``: print the Table 1 block in the terminal summary and attach its JSON.

    It covers the Table 1 templates for which this run selected a gate that reads every region
    (worst region, spread, improvement, diagnostics; both templates when both are, whatever the
    order or the worker): a region's gate alone (``-k "bg_coverage and africa"``) measures that
    region only, and Table 1 needs them all.
    """

    def emit(reference: str, study=None) -> None:
        study = decomposed if study is None else study  # the study at the look where the gate stopped
        selected: dict[str, set] = {}  # template -> the regions its selected tests read (None: every region)
        for item in request.session.items:
            params = getattr(getattr(item, "callspec", None), "params", {})
            if params.get("reference") != reference:
                continue
            for t in [params["template"]] if "template" in params else DECOMPOSED_TEMPLATES:
                selected.setdefault(t, set()).add(params.get("region"))
        templates = [t for t in DECOMPOSED_TEMPLATES if t in selected]
        if not templates:
            return
        # a selection of one region's gates (triage) shows that region's table alone, computing nothing more
        by_template = {t: study.scores(reference, t, next(iter(selected[t])) if len(selected[t]) == 1 else None)
                       for t in templates}
        real = study.real(reference)
        lines = table1_section(reference, study.reference_sets[reference], real, by_template,
                               study.options.limit_source)
        t2i_report.section(f"Decomposed-DIG (Table 1): {reference}", lines)
        t2i_report.json("decomposed_dig", {
            "reference": reference,
            "real_images": real.selection.report(),
            "templates": {t: dict(sc.report(), summary=summarize(sc.per_region()) if sc.scores else None)
                          for t, sc in by_template.items()},
        })

    return emit


# -- per region (Sec. 4.1-4.2) -----------------------------------------------------------------

def test_obj_precision(reference, template, region, decomposed, gate, t2i_report):
    ind = decomposed.obj_precision(reference, template, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "obj", "precision", region))
    gate(ind)


def test_obj_coverage(reference, template, region, decomposed, gate, t2i_report):
    ind = decomposed.obj_coverage(reference, template, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "obj", "coverage", region))
    gate(ind)


def test_bg_precision(reference, template, region, decomposed, gate, t2i_report):
    ind = decomposed.bg_precision(reference, template, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "bg", "precision", region))
    gate(ind)


def test_bg_coverage(reference, template, region, decomposed, gate, table1, t2i_report):
    ind = decomposed.bg_coverage(reference, template, region)
    t2i_report.on_failure(evidence(ind.at, reference, template, "bg", "coverage", region))
    if ind.undefined is None:
        table1(reference, ind.at)
    gate(ind)


# -- across regions ----------------------------------------------------------------------------

def test_worst_region_bg_coverage(reference, template, decomposed, gate, table1, t2i_report):
    ind = decomposed.worst_region_bg_coverage(reference, template)
    t2i_report.on_failure(evidence(ind.at, reference, template, "bg", "coverage",
                                   lambda: ind.details["worst_region"]))
    if ind.undefined is None:
        table1(reference, ind.at)
    gate(ind)


def test_region_spread(reference, template, setup, metric, decomposed, gate, t2i_report):
    """Best minus worst region; the paper finds backgrounds spread about 1.5-2x more than objects."""
    ind = decomposed.region_spread(reference, template, setup, metric)
    if ind.undefined is None and ind.skip is None:  # the region that widens it
        t2i_report.on_failure(evidence(ind.at, reference, template, setup, metric, ind.details["worst"]))
    gate(ind)


def test_template_improvement(reference, decomposed, gate, table1, t2i_report):
    """``{regional adjective} {object}`` minus ``{object} in {region}`` on worst-region BG-only coverage."""
    ind = decomposed.template_improvement(reference)
    if ind.undefined is None:
        table1(reference, ind.at)
        t2i_report.on_failure(evidence(ind.at, reference, DECOMPOSED_TEMPLATES[1], "bg", "coverage",
                                       ind.details["regional_adjective"]["worst_region"]))
    gate(ind)


# -- diagnostics (Sec. 4.3): reported, not gated ------------------------------------------------

def test_decomposed_diagnostics(reference, template, decomposed, t2i_report):
    sc = decomposed.scores(reference, template)
    if not sc.scores:
        pytest.skip(f"{reference}/{template}: no region has scores ({sc.skipped})")
    real = decomposed.real(reference)
    diags = decomposed.diagnostics(reference, template)
    t2i_report.json("diagnostics", diagnostics_report(real, sc, diags))
    for kind, png in diagnostics_grids(real, sc, diags, decomposed.models()[1]).items():
        t2i_report.png(kind, png)
    for region, (d, _) in diags.items():  # each list names real (or generated) images of that region, once
        for found in (d.low_diversity_backgrounds, d.low_diversity_objects, d.low_realism_backgrounds):
            assert len(set(found)) == len(found)
        assert len(d.low_realism_backgrounds) <= sc.scores[region]["bg"].n_used
    t2i_report.section(f"Decomposed-DIG diagnostics: {reference} / {template}", [
        f"{region:<16} low-diversity backgrounds {len(d.low_diversity_backgrounds):>3}  "
        f"low-diversity objects {len(d.low_diversity_objects):>3}  "
        f"low-realism backgrounds {len(d.low_realism_backgrounds):>3}/{sc.scores[region]['bg'].n_used}"
        for region, (d, _) in diags.items()
    ])
