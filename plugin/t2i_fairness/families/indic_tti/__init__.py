"""IndicTTI (Mittal et al., ECCV 2024, "Navigating Text-to-Image Generative Bias across Indic Languages";
shared/papers/indic-tti.txt): CLGC, IGC, LGC, SCAL, SCWL and DWL for each of 30 Indic languages and English.

Gate tests: ``fairness_tests/test_indic_tti.py``; the study is the ``indic`` fixture
(:class:`~t2i_fairness.families.indic_tti.study.IndicEvaluation`).
"""

from __future__ import annotations

from t2i_fairness.families.base import Family, Parameters
from t2i_fairness.families.indic_tti.canaries import CANARIES
from t2i_fairness.families.indic_tti.options import OPTIONS, resolve


def _study(bench, selection):
    from t2i_fairness.families.indic_tti.study import IndicEvaluation

    return IndicEvaluation(bench, selection.prompts, selection.images_per_prompt)


def _parameters(names: set[str], core, selection) -> list[Parameters]:
    from t2i_fairness.vocab.languages import lang_slug

    out = []
    for argname, codes in (("indic_language", selection.languages), ("indic_non_english", selection.non_english)):
        if argname in names:
            out.append(Parameters((argname,), [(c,) for c in codes], [lang_slug(c) for c in codes]))
    return out


def _header(core, sel) -> str:
    note = f" [{sel.prompts.comments[0]}]" if sel.prompts.comments else ""
    return (f"t2i-fairness IndicTTI: {sel.prompts.source}{note}; {len(sel.prompts.prompt_ids)} prompt ids x "
            f"{len(sel.languages)} languages ({', '.join(sel.languages)}); {sel.images_per_prompt} images per prompt "
            "and language")


def _labels(core, sel) -> dict:
    from t2i_fairness.vocab.languages import LANGUAGES

    return {"language": [lang.code for lang in LANGUAGES]}


FAMILY = Family(
    name="indic_tti",
    title="IndicTTI",
    paper="Mittal et al. 2024, Navigating Text-to-Image Generative Bias across Indic Languages "
          "(shared/papers/indic-tti.txt)",
    fixture="indic",
    study=_study,
    study_type=".study:IndicEvaluation",
    options=OPTIONS,
    resolve=resolve,
    parameters=_parameters,
    header=_header,
    labels=_labels,
    look=lambda study, n: study.at_images(n),
    needs=".study:needs",
    scorers=("indic-blip2-captioner", "indic-blip2-image-features", "indic-sentence-encoder", "clip"),
    doc="The session's IndicTTI evaluation: ``indic.scores(lang)``, ``indic.scal(a, b)``, ``indic.scal_matrix()``.",
    canaries=CANARIES,
)
