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
from t2i_fairness.families.decomposed.rules import SETUP_NAMES, spread, summarize
from t2i_fairness.families.decomposed.study import DECOMPOSED_TEMPLATES
from t2i_fairness.metrics.evidence import combination, pairs, worst_of


@pytest.fixture
def table1(request, decomposed, t2i_report):
    """``table1(reference)``: print the Table 1 block in the terminal summary and attach its JSON.

    It covers the Table 1 templates for which this run selected a gate that reads every region
    (worst region, spread, improvement, diagnostics; both templates when both are, whatever the
    order or the worker): a region's gate alone (``-k "bg_coverage and africa"``) measures that
    region only, and Table 1 needs them all.
    """

    def emit(reference: str) -> None:
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
        by_template = {t: decomposed.scores(reference, t, next(iter(selected[t])) if len(selected[t]) == 1 else None)
                       for t in templates}
        real = decomposed.real(reference)
        lines = table1_section(reference, decomposed.reference_sets[reference], real, by_template,
                               decomposed.options.limit_source)
        t2i_report.section(f"Decomposed-DIG (Table 1): {reference}", lines)
        t2i_report.json("decomposed_dig", {
            "reference": reference,
            "real_images": real.selection.report(),
            "templates": {t: dict(sc.report(), summary=summarize(sc.per_region()) if sc.scores else None)
                          for t, sc in by_template.items()},
        })

    return emit


def _scored(decomposed, reference, template, gate, region=None):
    """The template's scores (the region's alone for a region's gate); a gate that cannot be computed
    is undefined: skipped while it has no bound, failed once it has one."""
    sc = decomposed.scores(reference, template, region)
    if region is not None and region not in sc.scores:
        gate.undefined(f"{reference}/{template}/{region}: {sc.skipped.get(region, 'no scores')}")
    if not sc.scores:
        gate.undefined(f"{reference}/{template}: no region has scores ({sc.skipped})")
    return sc


def _interval(sc, region, setup, metric, confidence):
    """The region's interval over its generated images (the unit drawn; unsegmented ones stay in as
    misses): Wilson's for precision, the jackknife-Wilson interval for coverage."""
    from t2i_fairness.metrics.intervals import coverage_interval, precision_interval

    member = sc.membership(region, setup)
    if metric == "precision":
        return precision_interval(member, confidence=confidence)
    return coverage_interval(member, confidence=confidence)


def _region_gate(sc, region, setup, metric, gate, t2i, decomposed):
    """Gate one region's value with its interval (``sweeps``: how it is made from images, for
    ``--t2i-sequential``'s early stops)."""
    s = sc.scores[region][setup]
    gate(getattr(s, metric), n=s.n_fake if metric == "precision" else s.n_real,
         interval=_interval(sc, region, setup, metric, t2i.options.confidence),
         details={"n_fake": s.n_fake, "n_used": s.n_used, "n_missing": s.n_missing, "n_real": s.n_real},
         sweeps=decomposed.sweeps(s))


# -- per region (Sec. 4.1-4.2) -----------------------------------------------------------------

def test_obj_precision(reference, template, region, decomposed, gate, t2i, t2i_report):
    t2i_report.on_failure(evidence(decomposed, reference, template, "obj", "precision", region))
    _region_gate(_scored(decomposed, reference, template, gate, region), region, "obj", "precision", gate, t2i, decomposed)


def test_obj_coverage(reference, template, region, decomposed, gate, t2i, t2i_report):
    t2i_report.on_failure(evidence(decomposed, reference, template, "obj", "coverage", region))
    _region_gate(_scored(decomposed, reference, template, gate, region), region, "obj", "coverage", gate, t2i, decomposed)


def test_bg_precision(reference, template, region, decomposed, gate, t2i, t2i_report):
    t2i_report.on_failure(evidence(decomposed, reference, template, "bg", "precision", region))
    _region_gate(_scored(decomposed, reference, template, gate, region), region, "bg", "precision", gate, t2i, decomposed)


def test_bg_coverage(reference, template, region, decomposed, gate, t2i, table1, t2i_report):
    t2i_report.on_failure(evidence(decomposed, reference, template, "bg", "coverage", region))
    sc = _scored(decomposed, reference, template, gate, region)
    table1(reference)
    _region_gate(sc, region, "bg", "coverage", gate, t2i, decomposed)


# -- across regions ----------------------------------------------------------------------------

def _regions(sc, setup, metric, confidence):
    """Every region's interval of one setup and metric (the groups a worst-of or spread gate picks from)."""
    return {r: _interval(sc, r, setup, metric, confidence) for r in sc.scores}


def test_worst_region_bg_coverage(reference, template, decomposed, gate, table1, t2i, t2i_report):
    sc = _scored(decomposed, reference, template, gate)
    values = {r: by["bg"].coverage for r, by in sc.scores.items()}
    worst = min(values, key=values.get)
    t2i_report.on_failure(evidence(decomposed, reference, template, "bg", "coverage", worst))
    table1(reference)
    picked = worst_of(_regions(sc, "bg", "coverage", t2i.options.confidence), confidence=t2i.options.confidence)
    gate(picked.estimate, n=sc.scores[worst]["bg"].n_real, interval=picked,
         details={"worst_region": worst, "by_region": values, "selected_from": picked.selection})


def test_region_spread(reference, template, setup, metric, decomposed, gate, t2i, t2i_report):
    """Best minus worst region; the paper finds backgrounds spread about 1.5-2x more than objects."""
    sc = _scored(decomposed, reference, template, gate)
    values = {r: getattr(by[setup], metric) for r, by in sc.scores.items()}
    other = "obj" if setup == "bg" else "bg"
    other_spread = spread({r: getattr(by[other], metric) for r, by in sc.scores.items()})
    best, worst = max(values, key=values.get), min(values, key=values.get)
    t2i_report.on_failure(evidence(decomposed, reference, template, setup, metric, worst))  # the region that widens it
    if len(values) < 2:
        pytest.skip(f"{reference}/{template}: a spread needs two regions with scores; only {best} has them")
    interval = pairs(_regions(sc, setup, metric, t2i.options.confidence), confidence=t2i.options.confidence)
    gate(spread(values), n=len(values), higher_is_better=False, interval=interval,
         details={"by_region": values, f"{other}_spread": other_spread, "setup": SETUP_NAMES[setup],
                  "best": best, "worst": worst, "pairs_tested": interval.selection})


def test_template_improvement(reference, decomposed, gate, table1, t2i, t2i_report):
    """``{regional adjective} {object}`` minus ``{object} in {region}`` on worst-region BG-only coverage."""
    worst, picked = {}, {}
    conf = t2i.options.confidence
    for template in DECOMPOSED_TEMPLATES:
        sc = _scored(decomposed, reference, template, gate)
        values = {r: by["bg"].coverage for r, by in sc.scores.items()}
        region = min(values, key=values.get)
        worst[template] = (values[region], region, sc.scores[region]["bg"].n_real)
        picked[template] = worst_of(_regions(sc, "bg", "coverage", conf), confidence=conf)
    table1(reference)
    (old, old_region, n_old), (new, new_region, n_new) = (worst[t] for t in DECOMPOSED_TEMPLATES)
    t2i_report.on_failure(evidence(decomposed, reference, DECOMPOSED_TEMPLATES[1], "bg", "coverage", new_region))
    # each template's worst region counts its selection (WorstOf); the two templates' images are independent
    interval = combination([picked[t] for t in reversed(DECOMPOSED_TEMPLATES)], [1.0, -1.0], confidence=conf,
                           method="difference of two templates' worst regions (MOVER over worst-of limits)",
                           bounds=(-1.0, 1.0))
    gate(new - old, n=min(n_old, n_new), interval=interval, details={
        "object_in_region": {"worst_bg_coverage": old, "worst_region": old_region},
        "regional_adjective": {"worst_bg_coverage": new, "worst_region": new_region},
    })


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
