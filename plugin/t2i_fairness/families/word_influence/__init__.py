"""Word-level explanations (Lin et al., "Word-Level Explanations for Analyzing Bias in Text-to-Image Models";
shared/papers/word-level-explanations.txt): masked-LM word replacement, k-level word influence on a
group's share, Hoeffding bounds, HEIM's representation gap.

Gate tests: ``fairness_tests/test_word_influence.py``; the study is the ``word_influence`` fixture
(:class:`~t2i_fairness.families.word_influence.study.WordInfluenceStudy`); the definitions are the
project's (docs/indicators.md, "Word-level explanations").
"""

from __future__ import annotations

from t2i_fairness.families.base import Family, Parameters
from t2i_fairness.families.word_influence.canaries import CANARIES
from t2i_fairness.families.word_influence.options import OPTIONS, resolve


def _parameters(names: set[str], core, s) -> list[Parameters]:
    from t2i_fairness.families.word_influence.study import representation_ids, word_ids

    out = []
    if "word_case" in names:
        cases = word_ids(s.prompts, s.groups, s.levels)
        out.append(Parameters(("word_case",), [(c[:3],) for c in cases], [c[3] for c in cases]))
    if "prompt_case" in names:
        cases = representation_ids(s.prompts, s.groups)
        out.append(Parameters(("prompt_case",), [(c[:2],) for c in cases], [c[2] for c in cases]))
    return out


def _header(core, s) -> str:
    levels = sorted({k for ks in s.levels.values() for k in ks})
    return (f"t2i-fairness word influence: {s.suite} ({len(s.prompts)} prompts), groups {','.join(s.groups)} "
            f"via {s.template!r}, {s.m} replacements, k={','.join(map(str, levels))}, {s.images_per_text} images "
            f"per candidate prompt ({s.images_per_distribution} per distribution)")


FAMILY = Family(
    name="word_influence",
    title="Word-level explanations",
    paper="Lin et al., Word-Level Explanations for Analyzing Bias in Text-to-Image Models "
          "(shared/papers/word-level-explanations.txt)",
    study_type=".study:WordInfluenceStudy",
    options=OPTIONS,
    resolve=resolve,
    parameters=_parameters,
    header=_header,
    needs=".study:needs",
    scorers=("masked_lm", "clip"),
    doc="The session's word-level analysis: ``word_influence.result`` (computed on first use).",
    canaries=CANARIES,
    look=lambda study, n: study.at_images(n),
)
