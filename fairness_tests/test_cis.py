"""Components Inclusion Score (Foong et al. 2023, arXiv:2311.13620): do models draw every component?

Prompts name K ImageNet classes ("A photo of a crab, a macaw, a steel drum, and a red butterfly.");
CLIP picks, for each generated image, the best entry of a table holding every subset of the
components and the empty string; S = components of that entry / K and CIS_K = mean S (section 4).

Claims gated:

* ``test_cis[k<K>]`` (min): CIS_K stays above its bound.
* ``test_cis_drop_per_component`` (max): the least-squares drop of CIS_K per added component
  (section 6.3: 8.53% per component across the paper's models) stays below its bound.
* ``test_cis_order_invariance`` (a test, no bound): fails when "shuffling the component order changes
  nothing" (section 8.1) is rejected at the run's adjusted level. The statistic reads inclusion by
  position within each prompt: per position, the change in detection of the component the shuffle
  moved there minus that of the component it moved away (each component against itself), summed over
  prompts and standardised (any direction: primacy, recency or a lost middle), with the shuffled
  images scored against the original prompt's table so that both groups meet the same scorer. The
  p-value is a Monte Carlo permutation test, original/shuffled labels permuted within each prompt
  (never 0: at least ``1 / (B + 1)``, B from the run's level). The section prints its power against
  the first-named component drawn 0.2 more often than the last-named, at this run's size and level
  and at the paper's 1,000 prompts x 16 images. ``--t2i-cis-order-test paper`` gates on the paper's
  chi-square by component instead (same permutations; less power against small effects). The chi-square
  on the number of components detected per image is printed for comparison: it has no power against an
  order effect.
* ``test_cis_component_rate_floor`` (min): the lowest per-component generation rate (section 8.2)
  among components requested in at least ``--t2i-cis-rate-min-images`` images by at least two prompts;
  each rate's interval is over the prompts naming it (their images move together), and the worst is
  judged as picked among all counted components (Bonferroni: :func:`t2i_fairness.metrics.evidence.worst_of`).
* ``test_cis_drop_per_component``'s interval: MOVER over the independent CIS_K's exact limits.

Reported beside them: the scorer ceiling (section 5.1's self-check on tiled single-component
images; at a ``--t2i-sequential`` look, over the first look's prompts: :attr:`~t2i_fairness.families.cis.study.CisStudy.ceiling_size`), Inception Score per K and FID per K (section 6.2), the most ignored and most prominent
components. Each gate's number is made by the study (:class:`~t2i_fairness.families.cis.study.CisStudy`, one
indicator method per gate, of the test's name); the test attaches its report
(:mod:`t2i_fairness.families.cis.report`) and judges it. Rules for sampling, the
77-token limit, the composites and the splits: :mod:`t2i_fairness.families.cis.study`.
"""

from __future__ import annotations

from t2i_fairness.families.cis.report import report_cis_k, report_drop, report_order, report_rates


def test_cis(cis_k, cis, gate, t2i_report):
    ind = cis.cis(cis_k)
    gate(ind, details=report_cis_k(ind, cis_k, t2i_report))


def test_cis_drop_per_component(cis, gate, t2i_report):
    ind = cis.cis_drop_per_component()
    gate(ind, details=report_drop(ind, t2i_report))


def test_cis_order_invariance(cis, gate, t2i_report):
    ind = cis.cis_order_invariance(gate.context.level.value)
    report_order(ind, gate.context.level, t2i_report)
    # A test, not an indicator with a bound: it fails when its H0 is rejected at the run's adjusted level.
    gate(ind)


def test_cis_component_rate_floor(cis, gate, t2i_report):
    ind = cis.cis_component_rate_floor()
    gate(ind, details=report_rates(ind, t2i_report))
