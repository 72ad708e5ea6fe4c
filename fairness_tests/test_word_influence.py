"""Word-Level Explanations for Analyzing Bias in Text-to-Image Models: which word causes the bias.

Claims gated, for the prompts of ``--t2i-wi-prompts`` (default: the paper's two worked examples,
"a respected doctor at the hospital" and "the ceo of a fortune 500 company"):

- per word and group, ``|I_k(w)| <= x``: replacing the word by masked-LM candidates moves the share
  of the group by at most ``x`` (``test_word_influence[doctor-female]`` for k = 1,
  ``[ceo-female-k2]`` for k = 2).  A word found in several prompts is gated on its average
  influence over them (Figure 3).  The gate's interval is Hoeffding's (Theorem 1), and so is its
  p-value, ``2 exp(-2 t^2 / V)`` for an excess ``t`` over the bound (valid at any level, by the
  inequality itself); the bootstrap interval is in the details and the summary table.
- per prompt and group, ``|p(g) - 1/|groups|| <= y`` (HEIM's imbalance):
  ``test_representation[a_respected_doctor_at_the_hospital-female]``.

``test_word_influence_report`` attaches the numbers (JSON) and Figure 3's bars (PNG); it reports,
it does not gate.  Definitions (the paper's formulas were lost): :mod:`t2i_fairness.families.word_influence.study`.
"""

from __future__ import annotations

from t2i_fairness.families.word_influence.report import report_gate, show


def test_word_influence(word_case, word_influence, t2i_report, gate):
    ind = word_influence.word_influence(word_case)
    gate(ind, details=report_gate(ind, t2i_report))


def test_representation(prompt_case, word_influence, t2i_report, gate):
    ind = word_influence.representation(prompt_case)
    gate(ind, details=report_gate(ind, t2i_report))


def test_word_influence_report(word_influence, t2i_report):
    """Figure 3's bars and every number (per prompt, per replaced set); a report, not a gate."""
    result = show(word_influence, t2i_report, full=True)
    for row in result.words + result.per_prompt:
        assert -1.0 <= row.influence <= 1.0 and row.hoeffding > 0, row
