"""Components Inclusion Score (Foong et al. 2023, arXiv:2311.13620): do models draw every component?

Prompts name K ImageNet classes ("A photo of a crab, a macaw, a steel drum, and a red butterfly.");
CLIP picks, for each generated image, the best entry of a table holding every subset of the
components and the empty string; S = components of that entry / K and CIS_K = mean S (section 4).

Claims gated:

* ``test_cis[k<K>]`` (min): CIS_K stays above its bound.
* ``test_cis_drop_per_component`` (max): the least-squares drop of CIS_K per added component
  (section 6.3: 8.53% per component across the paper's models) stays below its bound.
* ``test_cis_order_invariance`` (a test, no bound): fails when "shuffling the component order changes
  nothing" (section 8.1) is rejected at the run's adjusted level; the p-value is a Monte Carlo
  permutation test of the chi-square statistic on the number of components detected, labels permuted
  within each prompt (never 0: at least ``1 / (B + 1)``).
* ``test_cis_component_rate_floor`` (min): the lowest per-component generation rate (section 8.2)
  among components requested in at least ``--t2i-cis-rate-min-images`` images by at least two prompts;
  each rate's interval is over the prompts naming it (their images move together), and the worst is
  judged as picked among all counted components (Bonferroni: :func:`t2i_fairness.metrics.evidence.worst_of`).
* ``test_cis_drop_per_component``'s interval: MOVER over the independent CIS_K's exact limits.

Reported beside them: the scorer ceiling (section 5.1's self-check on tiled single-component
images), Inception Score per K and FID per K (section 6.2), the most ignored and most prominent
components. Rules for sampling, the 77-token limit, the composites and the splits:
:mod:`t2i_fairness.families.cis.study`.
"""

from __future__ import annotations

import numpy as np
import pytest

from t2i_fairness.families.cis.options import EXTREMES
from t2i_fairness.families.cis.report import cis_figure, fmt_rate
from t2i_fairness.families.cis.study import cis_interval, drop_interval
from t2i_fairness.metrics.evidence import worst_of
from t2i_fairness.metrics.cis import (
    component_generation_rates,
    component_rate_intervals,
    degradation_slope,
    extreme_components,
    order_invariance_permutation_test,
    order_invariance_test,
    order_invariance_test_by_component,
)
from t2i_fairness.gating.gate import bootstrap_seed
from t2i_fairness.metrics.decisions import HypothesisTest

PAPER_DROP = 0.0853  # section 6.3, averaged over the paper's four models


def test_cis(cis_k, cis, gate, t2i_report):
    r = cis.scores(cis_k)
    interval = cis_interval(r, cis.t2i.options.confidence)
    low, high = interval.as_tuple()
    t2i_report.json(f"cis_k{cis_k}", {
        "k": cis_k, "cis": r.cis, "interval95": [low, high], "redrawn_77_tokens": r.redrawn,
        "prompts": [{"components": list(p), "scores": s.tolist(), "detected": [list(d) for d in det]}
                    for p, s, det in zip(r.prompts, r.scores, r.detected)],
    })
    gate(r.cis, n=r.n_images, interval=interval, provenance=cis.provenance(), sweeps=cis.sweeps(r),
         details={"prompts": len(r.prompts), "images_per_prompt": int(r.scores.shape[1]),
                  "mean_components_detected": float(np.mean(r.counts)), "redrawn_77_tokens": r.redrawn,
                  "generator_truncation": cis.truncation(cis_k).details()})


def test_cis_drop_per_component(cis, gate, t2i_report):
    ks = list(cis.options.ks)
    model = [cis.scores(k) for k in ks]
    ceiling = [cis.ceiling(k) for k in ks]
    inception = [cis.inception_score(k) for k in ks]
    fids = [cis.fid(k) for k in ks]

    lines = [f"{'K':>2}  {'prompts':>7}  {'images':>6}  {'CIS_K':>5}  {'95% CI':<15}  {'ceiling':>7}  "
             f"{'CIS/ceil':>8}  {'IS':<24}  FID"]
    for k, r, c, s, (fid, n_real, _) in zip(ks, model, ceiling, inception, fids):
        lo, hi = cis_interval(r, cis.t2i.options.confidence).as_tuple()
        ratio = f"{r.cis / c.cis:8.2f}" if c.cis > 0 else f"{'-':>8}"
        is_text = (f"{s.mean:.2f} ± {s.std:.2f} ({s.splits} splits)" if s.splits > 1 else f"{s.mean:.2f} (1 split)")
        fid_text = f"{fid:.2f} (ref {n_real})" if fid is not None else "-"
        lines.append(f"{k:>2}  {len(r.prompts):>7}  {r.n_images:>6}  {r.cis:5.3f}  [{lo:.3f}, {hi:.3f}]   "
                     f"{c.cis:7.3f}  {ratio}  {is_text:<24}  {fid_text}")
    redrawn = {k: r.redrawn for k, r in zip(ks, model) if r.redrawn}
    lines.append("77-token rule: " + (", ".join(f"K={k}: {n} prompt(s) redrawn" for k, n in redrawn.items())
                                      if redrawn else "no prompt exceeded CLIP's 77 tokens"))
    cut = {k: cis.truncation(k) for k in ks}
    lines.append("generator's tokenizer: " + ("not counted (" + cut[ks[0]].encoder + ")" if not cut[ks[0]].counted else
                 ", ".join(f"K={k}: {t.cell()} prompts truncated" for k, t in cut.items()) + f" ({cut[ks[0]].encoder})"))
    missing = {k: f[2] for k, f in zip(ks, fids) if f[0] is None}
    if missing:
        reasons = set(missing.values())
        lines.append("FID not computed: " + (reasons.pop() if len(reasons) == 1 else
                                               "; ".join(f"K={k}: {why}" for k, why in missing.items())))
    summary = {"ks": ks, "cis": [r.cis for r in model], "ceiling": [c.cis for c in ceiling],
               "inception_score": [vars(s) for s in inception], "fid": [f[0] for f in fids],
               "fid_reference_images": [f[1] for f in fids], "redrawn_77_tokens": [r.redrawn for r in model]}
    t2i_report.png("cis_vs_k", cis_figure(ks, summary["cis"], summary["ceiling"], inception))

    if len(ks) < 2:
        t2i_report.section("CIS: Components Inclusion Score vs K", lines)
        t2i_report.json("cis_vs_k", summary)
        pytest.skip(f"the drop per component needs two values of K; --t2i-cis-k gives only K={ks[0]}")

    drop = -degradation_slope(ks, summary["cis"])
    ceiling_drop = -degradation_slope(ks, summary["ceiling"])
    interval = drop_interval(model, cis.t2i.options.confidence)
    is_change = degradation_slope(ks, [s.mean for s in inception], relative_to="mean")
    lines.append(f"drop per component: {100 * drop:.2f} points of CIS per added component "
                 f"[{100 * interval.low:.2f}, {100 * interval.high:.2f}] (least-squares slope over K={','.join(map(str, ks))}; "
                 f"paper: {100 * PAPER_DROP:.2f}% across its models)")
    lines.append(f"ceiling drop per component: {100 * ceiling_drop:.2f} points (what the scorer alone loses)")
    lines.append(f"Inception Score change per component: {100 * is_change:+.2f}% of its mean (paper: -15.91% over K=1..8)")
    summary.update(drop_per_component=drop, drop_interval95=list(interval.as_tuple()), ceiling_drop_per_component=ceiling_drop,
                   inception_score_change_per_component=is_change)
    if all(f[0] is not None for f in fids):
        fid_change = degradation_slope(ks, [f[0] for f in fids], relative_to="mean")
        lines.append(f"FID change per component: {100 * fid_change:+.2f}% of its mean (paper: +9.62%)")
        summary["fid_change_per_component"] = fid_change
    t2i_report.section("CIS: Components Inclusion Score vs K", lines)
    t2i_report.json("cis_vs_k", summary)
    gate(drop, n=sum(r.n_images for r in model), higher_is_better=False, interval=interval,
         provenance=cis.provenance(),
         details={"cis": dict(zip(map(str, ks), summary["cis"])), "ceiling": dict(zip(map(str, ks), summary["ceiling"])),
                  "ceiling_drop_per_component": ceiling_drop})


def _expected_below_five(table: np.ndarray) -> int:
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    return int((expected < 5).sum())


def test_cis_order_invariance(cis, gate, t2i_report):
    study = cis.order()
    if study is None:
        pytest.skip(f"order invariance needs a K >= 2; --t2i-cis-k gives {list(cis.options.ks)}")
    k, orig, shuf = study.k, study.original, study.shuffled
    test = order_invariance_test(orig.counts, shuf.counts, k)
    lines = [
        f"K={k}: {len(orig.prompts)} prompts x {orig.scores.shape[1]} images per group; "
        f"{study.unchanged} of {len(orig.prompts)} shuffles left the order unchanged",
        f"CIS_{k}: original {orig.cis:.3f}, shuffled {shuf.cis:.3f}",
        "components detected  " + " ".join(f"{c:>4}" for c in range(k + 1)),
        "  original           " + " ".join(f"{orig.counts.count(c):>4}" for c in range(k + 1)),
        "  shuffled           " + " ".join(f"{shuf.counts.count(c):>4}" for c in range(k + 1)),
    ]
    n_total = int(test.table.sum())
    if test.dof == 0:
        only = test.columns[0]
        reason = (f"chi-square undefined: all {n_total} images of both groups show exactly {only} of {k} components "
                  "(one non-empty column, no degrees of freedom)")
        lines.append(f"chi-square on detected counts: {reason}")
    else:
        perm = order_invariance_permutation_test(np.reshape(orig.counts, orig.scores.shape),
                                                 np.reshape(shuf.counts, shuf.scores.shape), k,
                                                 seed=bootstrap_seed("test_cis_order_invariance", cis.t2i.options.seed))
        lines.append(f"chi-square on detected counts (2 x {len(test.columns)} columns): "
                     f"X2({test.dof}, N={n_total}) = {test.statistic:.3f}, permutation p = {perm.pvalue:.4g} "
                     f"({perm.resamples} within-prompt permutations, resolution {perm.resolution:.2g}; "
                     f"asymptotic chi-square p = {test.pvalue:.4g})")
        low = _expected_below_five(test.table)
        if low:
            lines.append(f"  {low} of {test.table.size} expected counts are below 5: the asymptotic p is rough "
                         "(the gate uses the permutation p)")
    try:
        by = order_invariance_test_by_component([d for row in orig.detected for d in row],
                                                [d for row in shuf.detected for d in row])
        by_text = (f"X2({by.dof}, N={int(by.table.sum())}) = {by.statistic:.3f}, p = {by.pvalue:.4g}" if by.dof
                   else "undefined (a single component detected in all)")
    except ValueError as exc:
        by, by_text = None, f"not computable ({exc})"
    lines.append(f"chi-square by component (the paper's variant, X2(996, N=175918) = 1006.76, p = .399): {by_text}")
    t2i_report.section(f"CIS order invariance (K={k})", lines)
    t2i_report.json("cis_order_invariance", {
        "k": k, "unchanged_shuffles": study.unchanged, "cis_original": orig.cis, "cis_shuffled": shuf.cis,
        "original_counts": orig.counts, "shuffled_counts": shuf.counts,
        "counts_test": {"statistic": test.statistic, "dof": test.dof, "pvalue": perm.pvalue if test.dof else None,
                        "method": perm.method if test.dof else None, "resamples": perm.resamples if test.dof else None,
                        "asymptotic_pvalue": test.pvalue if test.dof else None,
                        "columns": list(test.columns), "table": test.table.tolist()},
        "by_component_test": None if by is None else {"statistic": by.statistic, "dof": by.dof,
                                                      "pvalue": by.pvalue if by.dof else None},
    })
    if test.dof == 0:
        pytest.skip(reason)
    # A test, not an indicator: it fails when its H0 is rejected at the run's adjusted level (no bound).
    gate(perm.pvalue, n=n_total, provenance=cis.provenance(),
         test=HypothesisTest(perm.pvalue, "shuffling the component order changes nothing", perm.method,
                             perm.statistic, perm.resolution),
         details={"statistic": test.statistic, "dof": test.dof, "cis_original": orig.cis, "cis_shuffled": shuf.cis,
                  "unchanged_shuffles": study.unchanged, "resamples": perm.resamples,
                  "asymptotic_pvalue": test.pvalue})


def test_cis_component_rate_floor(cis, gate, t2i_report):
    ks = cis.options.rate_ks
    if not ks:
        pytest.skip(f"per-component rates need a K >= 2; --t2i-cis-k gives {list(cis.options.ks)}")
    requested, detected, prompts, by_prompt = [], [], [], []
    for k in ks:
        r = cis.scores(k)
        for comps, row in zip(r.prompts, r.detected):
            requested += [comps] * len(row)
            detected += row
            prompts.append(comps)
            by_prompt.append(row)
    rates = component_generation_rates(requested, detected)
    floor = cis.options.rate_min_images
    # the floor is over components named by at least two prompts: prompts are the sampled unit, and one
    # prompt's images say nothing of how the component fares in other combinations
    intervals, single = component_rate_intervals(prompts, by_prompt, min_requested=floor,
                                                 confidence=cis.t2i.options.confidence)
    counted = len(intervals)
    gated = {c: rates[c] for c in intervals}
    # at most half of the counted components in each list, so the two lists never overlap
    ignored, prominent = extreme_components(gated, n=min(EXTREMES, max(1, counted // 2)), min_requested=floor)
    lines = [f"{len(rates)} components requested over K={','.join(map(str, ks))}; "
             f"{counted} requested in >= {floor} images (--t2i-cis-rate-min-images) by >= 2 prompts"
             + (f"; {len(single)} more named by a single prompt (not gated: no between-prompt variation)"
                if single else "")]
    if ignored:
        lines.append("most ignored:   " + "; ".join(fmt_rate(r) for r in ignored))
        lines.append("most prominent: " + "; ".join(fmt_rate(r) for r in prominent))
    t2i_report.section(f"CIS per-component generation rate (K={','.join(map(str, ks))})", lines)
    t2i_report.json("cis_component_rates", sorted(
        ({"component": r.component, "requested": r.requested, "detected": r.detected, "rate": r.rate,
          "gated": r.component in intervals} for r in rates.values()),
        key=lambda d: (d["rate"], -d["requested"], d["component"])))
    if not intervals:
        most = max(r.requested for r in rates.values())
        pytest.skip(f"no component was requested in >= {floor} images by >= 2 prompts (the most: {most} images); "
                    "lower --t2i-cis-rate-min-images or raise --t2i-cis-prompts")
    evidence = worst_of(intervals, confidence=cis.t2i.options.confidence)
    worst = gated[evidence.worst_label]
    gate(evidence.estimate, n=worst.requested, interval=evidence, provenance=cis.provenance(),
         details={"component": worst.component, "detected": worst.detected, "components_counted": counted,
                  "selected_from": evidence.selection, "single_prompt_components": len(single)})
