"""Decomposed-DIG (Sureddy et al., "Decomposed evaluations of geographic disparities in text-to-image
models"; shared/papers/decomposed-dig.txt): object and background precision and coverage per region from
segmentation masks and ViT patch masking, Table 1, the ``{regional adjective} {object}`` template.

Gate tests: ``fairness_tests/test_decomposed_dig.py``; the study is the ``decomposed`` fixture
(:class:`~t2i_fairness.families.decomposed.study.DecomposedStudy`); the paper's rules are in
:mod:`t2i_fairness.families.decomposed.rules`.
"""

from __future__ import annotations

from t2i_fairness.families.base import Family, Parameters, param_id
from t2i_fairness.families.decomposed.options import OPTIONS, resolve

TEMPLATES = ("object_in_region", "regional_adjective")  # Table 1: Orig. and New
SETUP_METRICS = tuple((s, m) for s in ("obj", "bg") for m in ("precision", "coverage"))


def _parameters(names: set[str], core, options) -> list[Parameters]:
    """``reference[, template][, region | setup, metric]`` for the Decomposed-DIG gates."""
    if "reference" not in names:
        return []
    from t2i_fairness.references.library import references_for

    values, ids = [], []
    for name, ref in references_for(core).items():
        if "template" not in names:
            values.append((name,))
            ids.append(name)
            continue
        for template in TEMPLATES:
            if "region" in names:
                rows = [((name, template, r), param_id(name, template, r)) for r in ref.regions]
            elif "setup" in names:
                rows = [((name, template, s, m), param_id(name, template, s, m)) for s, m in SETUP_METRICS]
            else:
                rows = [((name, template), param_id(name, template))]
            values += [v for v, _ in rows]
            ids += [i for _, i in rows]
    argnames = ("reference",)
    if "template" in names:
        argnames += ("template",) + (("region",) if "region" in names else ("setup", "metric") if "setup" in names else ())
    return [Parameters(argnames, values, ids)]


def _header(core, options) -> str:
    masks = f"masks from {options.masks}" if options.masks else "LangSAM masks"
    bg = (f"; BG-only needs {options.bg_min_patches} background patches" if options.bg_min_patches > 1 else "")
    bg += "; unsegmented generated images are BG-only misses" if options.bg_unsegmented == "miss" else ""
    return (f"t2i-fairness Decomposed-DIG: {masks}; classes with more than {options.limit_text} failed "
            f"segmentations excluded ({options.limit_source}){bg}")


def _labels(core, options) -> dict:
    from t2i_fairness.references.library import reference_regions

    return {"region": reference_regions(core), "template": list(TEMPLATES)}


FAMILY = Family(
    name="decomposed",
    title="Decomposed-DIG",
    paper="Sureddy et al., Decomposed-DIG: objects versus backgrounds (shared/papers/decomposed-dig.txt)",
    suite_modules=("test_decomposed_dig",),
    study_type=".study:DecomposedStudy",
    options=OPTIONS,
    resolve=resolve,
    parameters=_parameters,
    header=_header,
    labels=_labels,
    needs=".study:needs",
    look=lambda study, n: study.at_images(n),
    scorers=("decomposed_vit", "segmenter"),
    replaced=lambda options: ("segmenter",) if options.masks else (),
    doc="The session's Decomposed-DIG study: ``decomposed.scores(reference, template)``, ``.real(reference)``, "
        "``.diagnostics(reference, template)``, ``.models()``.",
)
