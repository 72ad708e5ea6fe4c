"""Components Inclusion Score's report pieces: what each gate test attaches beside its verdict (CIS_K's
prompts, the CIS-vs-K table and figure, the order tests' section, the rate lists), and the paper's figures
they print beside the run's."""

from __future__ import annotations

from t2i_fairness.families.cis.options import EXTREMES, PAPER_PRESET_GATES
from t2i_fairness.report.judged import scorer_agreement


def cis_figure(ks, model, ceiling, inception):
    """CIS_K and the scorer ceiling against K; Inception Score against K beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(8, 3.2))
    ax.plot(ks, model, "o-", label="model CIS$_K$")
    ax.plot(ks, ceiling, "s--", label="ceiling (tiled single-component images)")
    ax.set_xticks(ks)
    ax.set_xlabel("components K")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Components Inclusion Score")
    ax.legend(fontsize=7, loc="lower left")
    bx.errorbar(ks, [s.mean for s in inception], yerr=[s.std for s in inception], fmt="o-")
    bx.set_xticks(ks)
    bx.set_xlabel("components K")
    bx.ticklabel_format(axis="y", useOffset=False)
    bx.set_title("Inception Score")
    fig.tight_layout()
    return fig


def fmt_rate(r) -> str:
    return f"{r.component} {r.rate:.2f} ({r.detected}/{r.requested})"


def _power_text(p) -> str:
    if not p.reachable:
        return (f"0 at {p.prompts} prompts x {p.images} images, K={p.k}: the smallest p this design can give is "
                f"{p.floor:.2g} > {p.level:.2g}")
    return f"{p.power:.3f} at {p.prompts} prompts x {p.images} images, K={p.k} ({p.runs} simulated studies)"


def _p_text(r) -> str:
    if not r.resamples:
        return f"asymptotic chi-square p = {r.asymptotic_pvalue:.4g}"
    return (f"permutation p = {r.pvalue:.4g} ({r.resamples} within-prompt permutations, resolution "
            f"{r.resolution:.2g}; asymptotic chi-square p = {r.asymptotic_pvalue:.4g})")


def order_lines(study, tests, level_text: str, paper_text: str) -> list[str]:
    """The order section: sizes, CIS of both sets, inclusion by position, each test and the power.

    ``level_text`` and ``paper_text`` say how the run's and the paper preset's levels read.
    """
    from t2i_fairness.metrics.cis import ORDER_EFFECT

    orig, shuf, k = study.original, study.shuffled, study.k
    m, n = len(orig.prompts), int(orig.scores.shape[1])
    pos, paper, counts = tests.position, tests.paper, tests.counts
    mark = {name: " [the gate]" if tests.chosen == name else "" for name in ("position", "paper")}
    return [
        f"K={k}: {m} prompts x {n} images per group; {study.unchanged} of {m} shuffles left the order unchanged",
        f"CIS_{k}: original {orig.cis:.3f}, shuffled {shuf.cis:.3f} (each prompt's images against its own table, "
        f"as the paper; {study.shuffled_on_original.cis:.3f} against the original prompt's table)",
        f"inclusion by position 1..{k} minus the mean over positions (within prompts; the shuffled images scored "
        f"against the original prompt's table): " + " ".join(f"{x:+.3f}" for x in pos.profile),
        f"position test{mark['position']}: T = {pos.statistic:.3f} ({pos.dof} df), {_p_text(pos)}; "
        f"{pos.informative} of {m} prompts informative",
        f"power of the position test against the first-named component drawn {ORDER_EFFECT:g} more often than the "
        f"last-named (linear in between, added to this run's inclusion rates): {_power_text(tests.power)}, at this "
        f"run's level {tests.power.level:.3g} ({level_text}); at the paper's size, {_power_text(tests.paper_power)}, "
        f"at the paper preset's level {tests.paper_power.level:.3g} ({paper_text}); each study judged by T's "
        "chi-square reference (docs/calibration.md measures it against the permutation p)",
        f"chi-square by component (the paper's statistic, its X2(996, N=175918) = 1006.76, p = .399){mark['paper']}: "
        + (f"X2({paper.dof}, N={int(paper.table.sum())}) = {paper.statistic:.3f}, {_p_text(paper)}" if paper.dof
           else "undefined (fewer than two components detected)"),
        f"as the paper scores (each group against its own prompt's table, so CLIP's sensitivity to the wording "
        f"moves it too): position T = {tests.wording.statistic:.3f} ({tests.wording.dof} df), {_p_text(tests.wording)}",
        f"chi-square on components detected per image (2 x {len(counts.columns)}), no power against an order effect "
        "(the shuffles are uniform, so both groups expect the same counts under any position effect): "
        + (f"X2({counts.dof}, N={int(counts.table.sum())}) = {counts.statistic:.3f}, asymptotic p = {counts.pvalue:.4g}"
           if counts.dof else "undefined (one column)"),
    ]


def order_record(study, tests) -> dict:
    """The order tests as the JSON artifact ``cis_order_invariance`` records them."""
    from t2i_fairness.metrics.cis import ORDER_EFFECT

    orig, shuf, pos, paper = study.original, study.shuffled, tests.position, tests.paper

    def power(p) -> dict:
        return {"power": p.power, "level": p.level, "reachable": p.reachable, "floor": p.floor, "prompts": p.prompts,
                "images": p.images, "k": p.k, "runs": p.runs}

    return {
        "k": study.k, "prompts": len(orig.prompts), "images_per_prompt": int(orig.scores.shape[1]),
        "unchanged_shuffles": study.unchanged, "cis_original": orig.cis, "cis_shuffled": shuf.cis,
        "cis_shuffled_original_table": study.shuffled_on_original.cis, "test": tests.chosen,
        "position_test": {"statistic": pos.statistic, "dof": pos.dof, "pvalue": pos.pvalue if pos.resamples else None,
                          "resamples": pos.resamples, "resolution": pos.resolution if pos.resamples else None,
                          "asymptotic_pvalue": pos.asymptotic_pvalue, "informative_prompts": pos.informative,
                          "min_exact_pvalue": pos.min_exact_pvalue, "profile": pos.profile.tolist()},
        "power": {"effect_first_minus_last": ORDER_EFFECT, "method": tests.power.method, "run": power(tests.power),
                  "paper_size": power(tests.paper_power)},
        "by_component_test": {"statistic": paper.statistic, "dof": paper.dof,
                              "pvalue": paper.pvalue if paper.resamples else None,
                              "asymptotic_pvalue": paper.asymptotic_pvalue, "n": int(paper.table.sum())},
        "own_table_position_test": {"statistic": tests.wording.statistic, "dof": tests.wording.dof,
                                    "asymptotic_pvalue": tests.wording.asymptotic_pvalue},
        "counts_test_no_power": {"statistic": tests.counts.statistic, "dof": tests.counts.dof,
                                 "asymptotic_pvalue": tests.counts.pvalue if tests.counts.dof else None,
                                 "original_counts": orig.counts, "shuffled_counts": shuf.counts},
    }


#: the paper's figures printed beside the run's (section 6.3 and 6.2, averaged over its four models, K = 1..8)
PAPER_DROP = 0.0853  # CIS lost per added component
PAPER_IS_CHANGE = -0.1591  # Inception Score per added component, relative to its mean
PAPER_FID_CHANGE = 0.0962  # FID per added component, relative to its mean


def report_cis_k(ind, k: int, t2i_report) -> dict:
    """Attach CIS_K's prompts, per-image scores and detected subsets (``cis_k<K>.json``); returns the gate's
    details (the generator's truncation of the K's prompts)."""
    r = ind.at.scores(k)
    low, high = ind.evidence.as_tuple()
    t2i_report.json(f"cis_k{k}", {
        "k": k, "cis": r.cis, "interval95": [low, high], "redrawn_77_tokens": r.redrawn,
        "prompts": [{"components": list(p), "scores": s.tolist(), "detected": [list(d) for d in det]}
                    for p, s, det in zip(r.prompts, r.scores, r.detected)],
    })
    scorer = scorer_agreement(ind.at.judgements(k), f"CIS K={k}", t2i_report, f"cis_k{k}_agreement")
    return {"generator_truncation": ind.at.truncation(k).details(), "scorer": scorer}


def report_drop(ind, t2i_report) -> dict:
    """Section 6 beside the drop per component: CIS_K, the scorer ceiling, Inception Score and FID per K (a
    table, a figure, ``cis_vs_k.json``) and their slopes against the paper's; returns the gate's details
    (the ceiling per K and its drop)."""
    at = ind.at
    ks = list(at.options.ks)
    model = [at.scores(k) for k in ks]  # in this order: every K's scores, then ceilings, IS and FID (cis.study.needs)
    ceiling = [at.ceiling(k) for k in ks]
    inception = [at.inception_score(k) for k in ks]
    fids = [at.fid(k) for k in ks]
    lines = _vs_k_table(ks, model, ceiling, inception, fids, at.t2i.options.confidence)
    lines += _vs_k_notes(at, ks, model, ceiling, fids)
    summary = {"ks": ks, "cis": [r.cis for r in model], "ceiling": [c.cis for c in ceiling],
               "ceiling_prompts": len(ceiling[0].prompts), "inception_score": [vars(s) for s in inception],
               "fid": [f[0] for f in fids], "fid_reference_images": [f[1] for f in fids],
               "redrawn_77_tokens": [r.redrawn for r in model]}
    t2i_report.png("cis_vs_k", cis_figure(ks, summary["cis"], summary["ceiling"], inception))
    if ind.skip is None:
        lines += _slopes(ind, summary, inception, fids)
    t2i_report.section("CIS: Components Inclusion Score vs K", lines)
    t2i_report.json("cis_vs_k", summary)
    return {"ceiling": dict(zip(map(str, ks), summary["ceiling"])),
            "ceiling_drop_per_component": summary.get("ceiling_drop_per_component")}


def _vs_k_table(ks, model, ceiling, inception, fids, confidence: float) -> list[str]:
    from t2i_fairness.families.cis.study import cis_interval

    lines = [f"{'K':>2}  {'prompts':>7}  {'images':>6}  {'CIS_K':>5}  {'95% CI':<15}  {'ceiling':>7}  "
             f"{'CIS/ceil':>8}  {'IS':<24}  FID"]
    for k, r, c, s, (fid, n_real, _) in zip(ks, model, ceiling, inception, fids):
        lo, hi = cis_interval(r, confidence).as_tuple()
        ratio = f"{r.cis / c.cis:8.2f}" if c.cis > 0 else f"{'-':>8}"
        is_text = (f"{s.mean:.2f} ± {s.std:.2f} ({s.splits} splits)" if s.splits > 1 else f"{s.mean:.2f} (1 split)")
        fid_text = f"{fid:.2f} (ref {n_real})" if fid is not None else "-"
        lines.append(f"{k:>2}  {len(r.prompts):>7}  {r.n_images:>6}  {r.cis:5.3f}  [{lo:.3f}, {hi:.3f}]   "
                     f"{c.cis:7.3f}  {ratio}  {is_text:<24}  {fid_text}")
    return lines


def _vs_k_notes(at, ks, model, ceiling, fids) -> list[str]:
    """The ceiling's prompts, the 77-token redraws, the generator's truncation and why FID is missing."""
    lines = []
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
    return lines


def _slopes(ind, summary: dict, inception, fids) -> list[str]:
    """The drop with its interval, the ceiling's drop and the IS and FID changes per component, each beside the
    paper's; adds them to ``summary``."""
    from t2i_fairness.metrics.cis import degradation_slope

    ks, drop, interval = summary["ks"], ind.value, ind.evidence
    ceiling_drop = -degradation_slope(ks, summary["ceiling"])
    is_change = degradation_slope(ks, [s.mean for s in inception], relative_to="mean")
    lines = [f"drop per component: {100 * drop:.2f} points of CIS per added component "
             f"[{100 * interval.low:.2f}, {100 * interval.high:.2f}] (least-squares slope over "
             f"K={','.join(map(str, ks))}; paper: {100 * PAPER_DROP:.2f}% across its models)",
             f"ceiling drop per component: {100 * ceiling_drop:.2f} points (what the scorer alone loses)",
             f"Inception Score change per component: {100 * is_change:+.2f}% of its mean "
             f"(paper: {100 * PAPER_IS_CHANGE:+.2f}% over K=1..8)"]
    summary.update(drop_per_component=drop, drop_interval95=list(interval.as_tuple()),
                   ceiling_drop_per_component=ceiling_drop, inception_score_change_per_component=is_change)
    if all(f[0] is not None for f in fids):
        fid_change = degradation_slope(ks, [f[0] for f in fids], relative_to="mean")
        lines.append(f"FID change per component: {100 * fid_change:+.2f}% of its mean (paper: {100 * PAPER_FID_CHANGE:+.2f}%)")
        summary["fid_change_per_component"] = fid_change
    return lines


def report_order(ind, level, t2i_report) -> None:
    """The order tests' section and ``cis_order_invariance.json`` at the run's per-gate level (a
    :class:`~t2i_fairness.metrics.decisions.GateLevel`; and the paper preset's,
    :data:`~t2i_fairness.families.cis.options.PAPER_PRESET_GATES` gates at the run's alpha)."""
    tests = ind.at.order_results(level.value)
    if tests is None:
        return
    study, alpha = ind.at.order(), ind.at.t2i.options.alpha
    t2i_report.section(f"CIS order invariance (K={study.k})", order_lines(
        study, tests, level.text, f"alpha {alpha:g} over {PAPER_PRESET_GATES} gates"))
    t2i_report.json("cis_order_invariance", order_record(study, tests))


def report_rates(ind, t2i_report) -> dict:
    """Section 8.2's per-component generation rates: the counts, the most ignored and most prominent
    components (a section) and every rate (``cis_component_rates.json``); returns the gate's details (what
    the scorer's judgements rest on and their agreement with labels, :func:`scorer_agreement`)."""
    from t2i_fairness.metrics.cis import extreme_components

    rates = ind.at.component_rates()
    if rates is None:
        return {}
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
    judged = [j for k in ks for j in ind.at.judgements(k)]
    scorer = scorer_agreement(judged, f"CIS components (K={','.join(map(str, ks))})", t2i_report,
                              "cis_component_agreement", focus=(ind.details or {}).get("component"))
    t2i_report.json("cis_component_rates", sorted(
        ({"component": r.component, "requested": r.requested, "detected": r.detected, "rate": r.rate,
          "gated": r.component in rates.intervals} for r in rates.rates.values()),
        key=lambda d: (d["rate"], -d["requested"], d["component"])))
    return {"scorer": scorer}
