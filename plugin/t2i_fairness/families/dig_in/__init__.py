"""DIG In (Hall et al. 2023, "DIG In: Evaluating Disparities in Image Generations with Indicators for
Geographic Diversity"; shared/papers/dig-in.txt): Region and Object-Region precision and coverage on a
k-NN manifold of real images, and the Object Consistency indicator.

Gate tests: ``fairness_tests/test_dig_in_region.py`` and ``test_dig_in_consistency.py``; the study is the
``dig_in`` fixture (:class:`~t2i_fairness.families.dig_in.study.DigInStudy`).
"""

from __future__ import annotations

from t2i_fairness.families.base import Family, Parameters, param_id
from t2i_fairness.families.dig_in.canaries import CANARIES
from t2i_fairness.families.dig_in.options import OPTIONS

DIG_TEMPLATES = ("object", "object_in_region", "object_in_country")


def _study(bench, options):
    from t2i_fairness.families.dig_in.study import DigInStudy

    return DigInStudy(bench)


def _parameters(names: set[str], core, options) -> list[Parameters]:
    """``reference, template[, object][, region]`` for the region gates (the consistency gates are static)."""
    if not {"reference", "template"} <= names:
        return []
    from t2i_fairness.references.library import references_for

    values, ids = [], []
    for name, ref in references_for(core).items():
        pairs = ref.groups_by_object_region()
        for template in DIG_TEMPLATES:
            if {"region", "object"} <= names:
                rows = [((name, template, o, r), param_id(name, template, o, r)) for (o, r) in pairs]
            elif "region" in names:
                rows = [((name, template, r), param_id(name, template, r)) for r in ref.regions]
            elif "object" in names:
                rows = [((name, template, o), param_id(name, template, o)) for o in ref.objects]
            else:
                rows = [((name, template), param_id(name, template))]
            values += [v for v, _ in rows]
            ids += [i for _, i in rows]
    argnames = ("reference", "template") + tuple(a for a in ("object", "region") if a in names)
    return [Parameters(argnames, values, ids)]


def _labels(core, options) -> dict:
    from t2i_fairness.references.library import reference_regions
    from t2i_fairness.vocab.geode import TEMPLATES

    return {"region": reference_regions(core), "template": list(TEMPLATES)}


FAMILY = Family(
    name="dig_in",
    title="DIG In",
    paper="Hall et al. 2023, DIG In: Evaluating Disparities in Image Generations (shared/papers/dig-in.txt)",
    suite_modules=("test_dig_in_region", "test_dig_in_consistency"),
    study=_study,
    study_type=".study:DigInStudy",
    options=OPTIONS,
    parameters=_parameters,
    labels=_labels,
    needs=".study:needs",
    look=lambda study, n: study.at_images(n),
    null_shares="null_shares.json",
    scorers=("clip", "inception"),
    doc="The session's DIG In study: ``dig_in.scores(reference, template)``, ``dig_in.clipscores(template)``.",
    canaries=CANARIES,
)
