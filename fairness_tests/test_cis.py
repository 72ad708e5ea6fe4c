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
indicator method per gate, of the test's name); the test reports and judges it. Rules for sampling, the
77-token limit, the composites and the splits: :mod:`t2i_fairness.families.cis.study`.
"""

from __future__ import annotations

from t2i_fairness.families.cis.options import EXTREMES, PAPER_PRESET_GATES
from t2i_fairness.families.cis.report import cis_figure, fmt_rate, order_lines, order_record
from t2i_fairness.families.cis.study import cis_interval
from t2i_fairness.metrics.cis import degradation_slope, extreme_components

PAPER_DROP = 0.0853  # section 6.3, averaged over the paper's four models


def test_cis(cis_k, cis, gate, t2i_report):
    ind = cis.cis(cis_k)
    r = ind.at.scores(cis_k)
    low, high = ind.evidence.as_tuple()
    t2i_report.json(f"cis_k{cis_k}", {
        "k": cis_k, "cis": r.cis, "interval95": [low, high], "redrawn_77_tokens": r.redrawn,
        "prompts": [{"components": list(p), "scores": s.tolist(), "detected": [list(d) for d in det]}
                    for p, s, det in zip(r.prompts, r.scores, r.detected)],
    })
    gate(ind, details={"generator_truncation": ind.at.truncation(cis_k).details()})


def test_cis_drop_per_component(cis, gate, t2i_report):
    ind = cis.cis_drop_per_component()
    at = ind.at
    ks = list(at.options.ks)
    model = [at.scores(k) for k in ks]
    ceiling = [at.ceiling(k) for k in ks]
    inception = [at.inception_score(k) for k in ks]
    fids = [at.fid(k) for k in ks]

    lines = [f"{'K':>2}  {'prompts':>7}  {'images':>6}  {'CIS_K':>5}  {'95% CI':<15}  {'ceiling':>7}  "
             f"{'CIS/ceil':>8}  {'IS':<24}  FID"]
    for k, r, c, s, (fid, n_real, _) in zip(ks, model, ceiling, inception, fids):
        lo, hi = cis_interval(r, at.t2i.options.confidence).as_tuple()
        ratio = f"{r.cis / c.cis:8.2f}" if c.cis > 0 else f"{'-':>8}"
        is_text = (f"{s.mean:.2f} ± {s.std:.2f} ({s.splits} splits)" if s.splits > 1 else f"{s.mean:.2f} (1 split)")
        fid_text = f"{fid:.2f} (ref {n_real})" if fid is not None else "-"
        lines.append(f"{k:>2}  {len(r.prompts):>7}  {r.n_images:>6}  {r.cis:5.3f}  [{lo:.3f}, {hi:.3f}]   "
                     f"{c.cis:7.3f}  {ratio}  {is_text:<24}  {fid_text}")
    ceiling_prompts = len(ceiling[0].prompts)
    if ceiling_prompts != len(model[0].prompts):
        lines.append(f"ceiling: the first {ceiling_prompts} prompt(s) per K, the CIS_K {len(model[0].prompts)} (a report no "
                     "gate reads: a look's scorer self-check reads the first look's prompts)")
    redrawn = {k: r.redrawn for k, r in zip(ks, model) if r.redrawn}
    lines.append("77-token rule: " + (", ".join(f"K={k}: {n} prompt(s) redrawn" for k, n in redrawn.items())
                                      if redrawn else "no prompt exceeded CLIP's 77 tokens"))
    cut = {k: at.truncation(k) for k in ks}
    lines.append("generator's tokenizer: " + ("not counted (" + cut[ks[0]].encoder + ")" if not cut[ks[0]].counted else
                 ", ".join(f"K={k}: {t.cell()} prompts truncated" for k, t in cut.items()) + f" ({cut[ks[0]].encoder})"))
    missing = {k: f[2] for k, f in zip(ks, fids) if f[0] is None}
    if missing:
        reasons = set(missing.values())
        lines.append("FID not computed: " + (reasons.pop() if len(reasons) == 1 else
                                               "; ".join(f"K={k}: {why}" for k, why in missing.items())))
    summary = {"ks": ks, "cis": [r.cis for r in model], "ceiling": [c.cis for c in ceiling], "ceiling_prompts": ceiling_prompts,
               "inception_score": [vars(s) for s in inception], "fid": [f[0] for f in fids],
               "fid_reference_images": [f[1] for f in fids], "redrawn_77_tokens": [r.redrawn for r in model]}
    t2i_report.png("cis_vs_k", cis_figure(ks, summary["cis"], summary["ceiling"], inception))

    ceiling_drop = None
    if ind.skip is None:
        drop, interval = ind.value, ind.evidence
        ceiling_drop = -degradation_slope(ks, summary["ceiling"])
        is_change = degradation_slope(ks, [s.mean for s in inception], relative_to="mean")
        lines.append(f"drop per component: {100 * drop:.2f} points of CIS per added component "
                     f"[{100 * interval.low:.2f}, {100 * interval.high:.2f}] (least-squares slope over "
                     f"K={','.join(map(str, ks))}; paper: {100 * PAPER_DROP:.2f}% across its models)")
        lines.append(f"ceiling drop per component: {100 * ceiling_drop:.2f} points (what the scorer alone loses)")
        lines.append(f"Inception Score change per component: {100 * is_change:+.2f}% of its mean (paper: -15.91% over K=1..8)")
        summary.update(drop_per_component=drop, drop_interval95=list(interval.as_tuple()),
                       ceiling_drop_per_component=ceiling_drop, inception_score_change_per_component=is_change)
        if all(f[0] is not None for f in fids):
            fid_change = degradation_slope(ks, [f[0] for f in fids], relative_to="mean")
            lines.append(f"FID change per component: {100 * fid_change:+.2f}% of its mean (paper: +9.62%)")
            summary["fid_change_per_component"] = fid_change
    t2i_report.section("CIS: Components Inclusion Score vs K", lines)
    t2i_report.json("cis_vs_k", summary)
    gate(ind, details={"ceiling": dict(zip(map(str, ks), summary["ceiling"])),
                       "ceiling_drop_per_component": ceiling_drop})


def test_cis_order_invariance(cis, gate, t2i_report):
    level, level_text = gate.context.level, gate.context.level_text
    ind = cis.cis_order_invariance(level)
    tests = ind.at.order_results(level)
    if tests is not None:
        study, alpha = ind.at.order(), ind.at.t2i.options.alpha
        t2i_report.section(f"CIS order invariance (K={study.k})", order_lines(
            study, tests, level_text, f"alpha {alpha:g} over {PAPER_PRESET_GATES} gates"))
        t2i_report.json("cis_order_invariance", order_record(study, tests))
    # A test, not an indicator with a bound: it fails when its H0 is rejected at the run's adjusted level.
    gate(ind)


def test_cis_component_rate_floor(cis, gate, t2i_report):
    ind = cis.cis_component_rate_floor()
    rates = ind.at.component_rates()
    if rates is not None:
        ks, floor, counted = rates.ks, ind.at.options.rate_min_images, rates.counted
        gated = {c: rates.rates[c] for c in rates.intervals}
        # at most half of the measured components in each list, so the two lists never overlap
        ignored, prominent = extreme_components(gated, n=min(EXTREMES, max(1, len(gated) // 2)), min_requested=floor)
        lines = [("" if rates.cleared else f"{len(rates.rates)} components requested over K={','.join(map(str, ks))}; ")
                 + f"{counted} requested in >= {floor} images (--t2i-cis-rate-min-images) by >= 2 prompts"
                 + (f"; {len(rates.single)} more named by a single prompt (not gated: no between-prompt variation)"
                    if rates.single else "")]
        if rates.cleared:
            lines.append(f"{rates.cleared} of the {counted} found clear of a miss at earlier looks and not measured "
                         f"again (their prompts got no more images for this gate); the lists below are of the "
                         f"{len(gated)} measured")
        if ignored:
            lines.append("most ignored:   " + "; ".join(fmt_rate(r) for r in ignored))
            lines.append("most prominent: " + "; ".join(fmt_rate(r) for r in prominent))
        t2i_report.section(f"CIS per-component generation rate (K={','.join(map(str, ks))})", lines)
        t2i_report.json("cis_component_rates", sorted(
            ({"component": r.component, "requested": r.requested, "detected": r.detected, "rate": r.rate,
              "gated": r.component in rates.intervals} for r in rates.rates.values()),
            key=lambda d: (d["rate"], -d["requested"], d["component"])))
    gate(ind)
