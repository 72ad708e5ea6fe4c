"""IndicTTI (Mittal et al., ECCV 2024), Sections 4-5: correctness and representation per language.

Claims gated, for each language l of ``--t2i-indic-prompts`` / ``--t2i-languages``:

- correctness: CLGC(l), IGC(l) and LGC(l) stay above their floors (Eqs. 3-5);
- representation: SCWL(l) and DWL(l) stay above their floors (Eqs. 10-12);
- relative to English: CLGC(l) / CLGC(English) >= r (Section 5's headline: Indic prompts lose
  correctness) and SCAL(English, l) stays above its floor (Figure 3's English row).

``test_scal_matrix`` measures every language, draws Figure 3 and attaches every number as JSON; it
reports, it does not gate. Each test puts the per-language table, with each language's drop
relative to English, in the terminal summary. Which model serves which indicator:
:mod:`t2i_fairness.families.indic_tti.study`.
"""

from __future__ import annotations

from t2i_fairness.families.indic_tti.report import report_gate, show


def test_clgc(indic_language, indic, t2i_report, gate):
    ind = indic.clgc(indic_language)
    report_gate(ind, t2i_report)
    gate(ind)


def test_igc(indic_language, indic, t2i_report, gate):
    ind = indic.igc(indic_language)
    report_gate(ind, t2i_report)
    gate(ind)


def test_lgc(indic_language, indic, t2i_report, gate):
    ind = indic.lgc(indic_language)
    report_gate(ind, t2i_report)
    gate(ind)


def test_scwl(indic_language, indic, t2i_report, gate):
    ind = indic.scwl(indic_language)
    report_gate(ind, t2i_report)
    gate(ind)


def test_dwl(indic_language, indic, t2i_report, gate):
    ind = indic.dwl(indic_language)
    report_gate(ind, t2i_report)
    gate(ind)


def test_clgc_vs_english(indic_non_english, indic, t2i_report, gate):
    ind = indic.clgc_vs_english(indic_non_english)
    report_gate(ind, t2i_report)
    gate(ind)


def test_scal_with_english(indic_non_english, indic, t2i_report, gate):
    ind = indic.scal_with_english(indic_non_english)
    report_gate(ind, t2i_report)
    gate(ind)


def test_scal_matrix(indic, t2i_report):
    """Figure 3 and the per-language table over every selected language; a report, not a gate."""
    summary = show(indic, t2i_report, full=True)
    assert summary.scal_matrix is not None
